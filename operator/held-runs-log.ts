// Where the operator records the runs of async calls cancelled while held at zero (activator/hold-cancel.ts):
// no replica saw them, so no replica's RunLog has them. One RunLog per App, `<app>.held-runs` (a pod's name
// never has a dot past its App's name: pods are `<deployment>-<hash>-<suffix>`), labelled HELD_RUNS_LABEL and
// owned by the App like a replica's; the management API lists it as any other, and the janitor keeps it for the
// App's retention (runlog-verdict.ts: it has no pod, so its pending webhooks get a delivery's time first).
//
// Writes are rare (a cancel each) and serialized per App in this process; another operator replica's write
// meanwhile is a 409, read again.
import type { Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import { APP_KIND, APP_LABEL, RUNLET_API_VERSION, RUNLET_GROUP, RUNLET_VERSION, RUNLOG_KIND, RUNLOG_PLURAL } from '../crds/api-group.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { RunLog } from '../crds/runlog-schema.ts';
import type { HeldRunWriter } from '../activator/hold-cancel.ts';
import type { KubeApi } from '../kube/client.ts';
import { isConflict } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';

/** Marks a RunLog of held runs: no pod writes it. */
export const HELD_RUNS_LABEL = 'runlet.dev/held-runs';
/** How many cancelled held runs an App's RunLog keeps, newest last; older ones fall out, as a replica's finished runs do. */
export const HELD_RUNS_KEPT = 200;
const MAX_ROUNDS = 5;

type RunLogObject = RunLog & KubeObject;

export function heldRunsLogName(appName: string): string {
  return `${appName}.held-runs`;
}

export class HeldRunsLog implements HeldRunWriter {
  readonly #api: KubeApi;
  readonly #apps: { get(namespace: string, name: string): App | undefined };
  readonly #logger: Logger;
  /** The write under way per RunLog: the next waits for it, so one process never races itself. */
  readonly #writing = new Map<string, Promise<void>>();

  constructor(options: { api: KubeApi; apps: { get(namespace: string, name: string): App | undefined }; logger: Logger }) {
    this.#api = options.api;
    this.#apps = options.apps;
    this.#logger = options.logger;
  }

  /** Adds `run` (or replaces its earlier state, by id) in its App's RunLog of held runs. */
  write(run: RunRecord): Promise<void> {
    const key = `${run.projectId}/${run.appName}`;
    const previous = this.#writing.get(key) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(() => this.#write(run));
    const settled = next.finally(() => {
      if (this.#writing.get(key) === settled) this.#writing.delete(key);
    });
    this.#writing.set(key, settled);
    return next;
  }

  async #write(run: RunRecord): Promise<void> {
    const collection = KubePath.of({ group: RUNLET_GROUP, version: RUNLET_VERSION, namespace: run.projectId, resource: RUNLOG_PLURAL });
    const path = collection.named(heldRunsLogName(run.appName));
    for (let round = 1; ; round += 1) {
      const runLog = (await this.#api.find<RunLogObject>(path)) ?? (await this.#create(collection, run));
      const others = (runLog.status?.runs ?? []).filter((kept) => kept.id !== run.id);
      const runs = [...others, run].slice(-HELD_RUNS_KEPT);
      try {
        await this.#api.replace<RunLogObject>(path.subresource('status'), { ...runLog, status: { ...runLog.status, runs } });
        return;
      } catch (error) {
        if (!isConflict(error) || round >= MAX_ROUNDS) throw error;
      }
    }
  }

  async #create(collection: KubePath, run: RunRecord): Promise<RunLogObject> {
    const app = this.#apps.get(run.projectId, run.appName);
    const uid = app?.metadata.uid;
    if (uid === undefined) throw new Error(`the App ${run.projectId}/${run.appName} is not known (deleted?): the cancelled held run ${run.id} is not recorded`);
    const body: RunLogObject = {
      apiVersion: RUNLET_API_VERSION,
      kind: RUNLOG_KIND,
      metadata: {
        name: heldRunsLogName(run.appName),
        namespace: run.projectId,
        labels: { [APP_LABEL]: run.appName, [HELD_RUNS_LABEL]: 'true' },
        ownerReferences: [{ apiVersion: RUNLET_API_VERSION, kind: APP_KIND, name: run.appName, uid, controller: true }],
      },
      spec: { appName: run.appName },
    };
    try {
      const created = await this.#api.create(collection, body);
      this.#logger.info({ runLog: `${run.projectId}/${body.metadata.name}` }, 'created the RunLog of the App’s cancelled held runs');
      return created;
    } catch (error) {
      if (!isConflict(error)) throw error;
      return this.#api.get<RunLogObject>(collection.named(body.metadata.name!));
    }
  }
}
