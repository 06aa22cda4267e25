// The management API's runs in a cluster: a watch-fed cache of the RunLogs (every replica's runs in flight and
// last finished runs), merged per app, and of the Apps (which apps exist, for the 404 of an unknown one). The
// same RunSource and AppDirectory `runlet dev` serves from SQLite, so the one plugin serves both modes.
//
//   const source = new RunLogSource({ api, logger });
//   source.start();
//   await fastify.register(managementApi, { runs: source, apps: source, authenticate });
//
// Answers come from memory, never from the API server: a list is as fresh as the last watch event (RunLogs
// are written about once a second per replica). The watches relist on 410 Gone, resume after errors with a
// backoff, and restart when silent (kube/watch.ts).
import type { Logger } from 'pino';
import { APP_LABEL, APP_PLURAL, RUNLET_GROUP, RUNLET_VERSION, RUNLOG_PLURAL } from '../crds/api-group.ts';
import type { App } from '../crds/app-schema.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { RunLog } from '../crds/runlog-schema.ts';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import { ResourceWatch, objectKey, type ResourceWatchHandlers, type RestartReason } from '../kube/watch.ts';
import type { AppDirectory } from './app-directory.ts';
import { hasRecordFilters, matchesRecordFilters } from './run-filters.ts';
import type { ListRunsQuery, RunPage, RunSource } from './run-source.ts';
import { RunLogIndex, appKey } from './runlog-source-index.ts';

export interface RunLogSourceOptions {
  /** The operator's client (its credentials need list and watch on runlogs and apps). */
  api: KubeApi;
  /** Cache one namespace (project) only; default every namespace. */
  namespace?: string;
  logger: Logger;
  /** Restart a watch that delivered no event and no bookmark for this long. Default 120 s (as the operator). */
  watchdogMs?: number;
  /** Each watch restart and why: for the operator's `watchRestarted` metric. */
  onRestart?(resource: typeof RUNLOG_PLURAL | typeof APP_PLURAL, reason: RestartReason): void;
  /** Retry delays after failed lists and watches; default kube/watch.ts's (250 ms doubling to 30 s). */
  backoff?: { initialMs: number; maxMs: number };
  /**
   * Which apps exist, when the caller watches Apps already (the operator): the source then watches no Apps of
   * its own, and `ready()` waits for the RunLogs only.
   */
  apps?: AppDirectory;
  /** Told of every RunLog the cache takes in or lets go, after the index: the operator's RunLog upkeep shares this watch. */
  onRunLog?: ResourceWatchHandlers<RunLogObject>;
}

export type RunLogObject = RunLog & KubeObject;
type AppObject = App & KubeObject;

const DEFAULT_WATCHDOG_MS = 120_000;

export class RunLogSource implements RunSource, AppDirectory {
  readonly #index = new RunLogIndex();
  readonly #runLogs: ResourceWatch<RunLogObject>;
  /** Undefined when the caller gave its own directory of Apps. */
  readonly #apps: ResourceWatch<AppObject> | undefined;
  readonly #directory: AppDirectory;
  readonly #logger: Logger;

  constructor(options: RunLogSourceOptions) {
    const { api, namespace, logger, onRestart, backoff, onRunLog } = options;
    this.#logger = logger;
    const collection = (resource: string): KubePath => KubePath.of({ group: RUNLET_GROUP, version: RUNLET_VERSION, namespace, resource });
    const common = { api, logger, backoff, watchdogMs: options.watchdogMs ?? DEFAULT_WATCHDOG_MS };
    this.#runLogs = new ResourceWatch<RunLogObject>({
      ...common,
      name: RUNLOG_PLURAL,
      path: collection(RUNLOG_PLURAL),
      onRestart: (reason) => onRestart?.(RUNLOG_PLURAL, reason),
      handlers: {
        onUpsert: (runLog, previous) => {
          this.#put(runLog);
          onRunLog?.onUpsert?.(runLog, previous);
        },
        onDelete: (runLog) => {
          this.#index.deleteRunLog(keyOf(runLog));
          onRunLog?.onDelete?.(runLog);
        },
      },
    });
    const apps =
      options.apps === undefined
        ? new ResourceWatch<AppObject>({
            ...common,
            name: APP_PLURAL,
            path: collection(APP_PLURAL),
            onRestart: (reason) => onRestart?.(APP_PLURAL, reason),
            handlers: {},
          })
        : undefined;
    this.#apps = apps;
    this.#directory = options.apps ?? { hasApp: (projectId, appName) => apps!.get(projectId, appName) !== undefined };
  }

  /** Starts the watches; returns at once (see `ready`). */
  start(): void {
    this.#runLogs.start();
    this.#apps?.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.#runLogs.stop(), this.#apps?.stop()]);
  }

  /**
   * Resolves once the first lists of RunLogs and Apps have filled the cache. Until then apps are unknown (404)
   * and lists empty: the operator's readiness should include `synced`, so no request arrives before.
   */
  async ready(): Promise<void> {
    await Promise.all([this.#runLogs.whenSynced(), this.#apps?.whenSynced()]);
  }

  get synced(): boolean {
    return this.#runLogs.synced && (this.#apps?.synced ?? true);
  }

  /** A RunLog as last heard of (the watch cache: do not modify it), or undefined. */
  runLog(namespace: string, name: string): RunLogObject | undefined {
    return this.#runLogs.get(namespace, name);
  }

  /** Every RunLog cached. */
  runLogs(): RunLogObject[] {
    return this.#runLogs.list();
  }

  /** Runs cached across every app (a run held by several RunLogs counts once): for a gauge. */
  get runs(): number {
    return this.#index.size;
  }

  hasApp(projectId: string, appName: string): boolean {
    return this.#directory.hasApp(projectId, appName);
  }

  async listRuns(query: ListRunsQuery): Promise<RunPage> {
    const key = appKey(query.projectId, query.appName);
    if (!hasRecordFilters(query)) return this.#index.page(key, query, query.beforeId, query.pageSize);
    // Pages of the indexed filters, sieved: bounded by the app's cached runs (a RunLog window per replica).
    const items: RunRecord[] = [];
    let beforeId = query.beforeId;
    for (;;) {
      const page = this.#index.page(key, query, beforeId, query.pageSize + 1);
      for (const run of page.items) {
        if (!matchesRecordFilters(run, query)) continue;
        if (items.length === query.pageSize) return { items, hasMore: true };
        items.push(run);
      }
      const last = page.items.at(-1);
      if (!page.hasMore || last === undefined) return { items, hasMore: false };
      beforeId = last.id;
    }
  }

  async getRun(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined> {
    return this.#index.get(appKey(projectId, appName), runId);
  }

  #put(runLog: RunLogObject): void {
    const key = keyOf(runLog);
    const { namespace } = runLog.metadata;
    // spec.appName is required by the CRD; the label (set by the sidecar too) covers objects written without it.
    const appName = runLog.spec?.appName ?? runLog.metadata.labels?.[APP_LABEL];
    if (namespace === undefined || appName === undefined) {
      this.#logger.warn({ runLog: key }, 'RunLog names no app (spec.appName or the runlet.dev/app label); its runs are not listed');
      this.#index.deleteRunLog(key);
      return;
    }
    this.#index.putRunLog(key, appKey(namespace, appName), runLog.status?.runs ?? []);
  }
}

function keyOf(runLog: RunLogObject): string {
  return objectKey(runLog.metadata.namespace, runLog.metadata.name);
}
