// The Kubernetes calls behind a replica's RunLog: read its App (owner uid, how many finished runs to keep),
// read or create the RunLog, and write its status with the resourceVersion as precondition.
import { APP_KIND, APP_LABEL, APP_PLURAL, RUNLET_API_VERSION, RUNLET_GROUP, RUNLET_VERSION, RUNLOG_KIND, RUNLOG_PLURAL } from '../../crds/api-group.ts';
import { DEFAULT_KEEP_FINISHED, type RemoteStatus } from './runlog-window.ts';
import type { KubeApi } from '../../kube/client.ts';
import { isConflict, isNotFound } from '../../kube/errors.ts';
import { KubePath } from '../../kube/paths.ts';

export interface AppFacts {
  uid: string;
  keepFinished: number;
}

export interface RunLogState {
  resourceVersion: string;
  status: RemoteStatus;
}

export interface RunLogRef {
  namespace: string;
  /** The pod's name. */
  name: string;
  appName: string;
}

export class RunLogApi {
  readonly #client: KubeApi;
  readonly #ref: RunLogRef;
  readonly #appPath: KubePath;
  readonly #runLogsPath: KubePath;
  readonly #runLogPath: KubePath;

  constructor(client: KubeApi, ref: RunLogRef) {
    this.#client = client;
    this.#ref = ref;
    const scope = { group: RUNLET_GROUP, version: RUNLET_VERSION, namespace: ref.namespace };
    this.#appPath = KubePath.of({ ...scope, resource: APP_PLURAL, name: ref.appName });
    this.#runLogsPath = KubePath.of({ ...scope, resource: RUNLOG_PLURAL });
    this.#runLogPath = this.#runLogsPath.named(ref.name);
  }

  async readApp(): Promise<AppFacts> {
    const app = objectOf(await this.#client.request('GET', this.#appPath), this.#appPath);
    const uid = app.metadata.uid;
    if (typeof uid !== 'string') throw new Error(`GET ${this.#appPath}: the App has no metadata.uid`);
    // The API server defaults keepFinished from the CRD schema; a missing value still means the default.
    const keepFinished = pathOf(app, ['spec', 'runs', 'keepFinished']);
    return { uid, keepFinished: typeof keepFinished === 'number' && keepFinished >= 1 ? keepFinished : DEFAULT_KEEP_FINISHED };
  }

  /** The RunLog, or undefined when it does not exist. */
  async readRunLog(): Promise<RunLogState | undefined> {
    try {
      return stateOf(await this.#client.request('GET', this.#runLogPath), this.#runLogPath);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** Creates the RunLog owned by the App (garbage-collected with it); reads it if another writer was first. */
  async createRunLog(appUid: string): Promise<RunLogState> {
    const { name, namespace, appName } = this.#ref;
    const body = {
      apiVersion: RUNLET_API_VERSION,
      kind: RUNLOG_KIND,
      metadata: {
        name,
        namespace,
        labels: { [APP_LABEL]: appName },
        // No blockOwnerDeletion: setting it needs update rights on the App's finalizers, which a sidecar has no
        // business holding; the RunLog is collected with the App either way.
        ownerReferences: [{ apiVersion: RUNLET_API_VERSION, kind: APP_KIND, name: appName, uid: appUid, controller: true }],
      },
      spec: { appName },
    };
    try {
      return stateOf(await this.#client.request('POST', this.#runLogsPath, { body: JSON.stringify(body) }), this.#runLogsPath);
    } catch (error) {
      if (!isConflict(error)) throw error;
      const existing = await this.readRunLog();
      if (existing === undefined) throw new Error(`RunLog ${namespace}/${name} already existed, then vanished`, { cause: error });
      return existing;
    }
  }

  /**
   * Replaces the status, only if the RunLog is still at `resourceVersion` (409 otherwise: a resourceVersion in
   * the patched object is a precondition). A JSON patch, not a merge patch: the API server drops every null
   * of a merge patch, even inside the runs array, and a record's nullable fields are required.
   * Returns the new resourceVersion.
   */
  async writeStatus(resourceVersion: string, statusJson: string): Promise<string> {
    const path = this.#runLogPath.subresource('status');
    const body =
      `[{"op":"replace","path":"/metadata/resourceVersion","value":${JSON.stringify(resourceVersion)}},` +
      `{"op":"add","path":"/status","value":${statusJson}}]`;
    const answer = await this.#client.request('PATCH', path, { body, contentType: 'application/json-patch+json' });
    return objectOf(answer, path).metadata.resourceVersion;
  }
}

interface ObjectShape {
  metadata: { uid?: unknown; resourceVersion: string };
  [field: string]: unknown;
}

function objectOf(answer: unknown, path: KubePath): ObjectShape {
  const metadata = pathOf(answer, ['metadata']);
  if (typeof metadata !== 'object' || metadata === null || typeof pathOf(metadata, ['resourceVersion']) !== 'string') {
    throw new Error(`${path}: the answer is not an object with metadata.resourceVersion`);
  }
  return answer as ObjectShape; // metadata.resourceVersion checked just above
}

function stateOf(answer: unknown, path: KubePath): RunLogState {
  const object = objectOf(answer, path);
  const runs = pathOf(object, ['status', 'runs']);
  const counts = pathOf(object, ['status', 'counts']);
  return {
    resourceVersion: object.metadata.resourceVersion,
    // The API server validated both against the RunLog schema, whose run record is field for field RunRecord.
    status: {
      runs: Array.isArray(runs) ? (runs as RemoteStatus['runs']) : undefined,
      counts: typeof counts === 'object' && counts !== null ? (counts as RemoteStatus['counts']) : undefined,
    },
  };
}

function pathOf(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}
