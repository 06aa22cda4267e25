// The leader's upkeep of RunLogs whose pod is gone: what the pod left unfinished is recorded as failed (its
// runs `replica_lost`), and the RunLog is deleted once it has been kept for its App's retention. Which of the
// two a RunLog needs is runlog-verdict.ts's call; this module gathers the facts, asks, and writes.
//
// It looks at a RunLog when its pod goes (deleted, or ended), when a RunLog of a gone pod is written, and in a
// sweep every `sweepIntervalMs` (retention comes due with time, not with events; and a leader that just took
// over finds what happened while nobody led). Work goes through a work queue: one look per RunLog at a time,
// retried with backoff when the API server fails.
//
// The RunLogs come from the RunLog cache in RunLog mode. With a results store no pod writes a RunLog and none
// is cached: the RunLogs left from before the store are found by the sweep, listed a page at a time
// (`pagedRunLogs`), and read again before each look, so the operator's memory does not grow with them.
import type { Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import { APP_LABEL, RUNLET_GROUP, RUNLET_VERSION, RUNLOG_PLURAL } from '../crds/api-group.ts';
import type { RunLogObject } from '../management/runlog-source.ts';
import type { KubeApi } from '../kube/client.ts';
import { isConflict, isNamespaceTerminating, isNotFound } from '../kube/errors.ts';
import { KubePath } from '../kube/paths.ts';
import { closeUnfinishedRuns } from './replica-lost.ts';
import { DEFAULT_RETENTION_SECONDS, judgeRunLog, podRuns, type PodObject } from './runlog-verdict.ts';
import { objectKey } from '../kube/watch.ts';
import { WorkQueue } from '../kube/work-queue.ts';

/** Where the janitor reads RunLogs. */
export interface RunLogLookup {
  /** The RunLog as last known, or undefined (never modified here). */
  find(namespace: string, name: string): Promise<RunLogObject | undefined>;
  /** Calls `visit` for every RunLog. */
  forEach(visit: (runLog: RunLogObject) => void): Promise<void>;
  /** Whether a RunLog of this name is known without asking (a pod's going then needs a look at it). */
  knows(namespace: string, name: string): boolean;
}

/** The RunLog cache (the management API's, in RunLog mode). */
export function cachedRunLogs(cache: { runLog(namespace: string, name: string): RunLogObject | undefined; runLogs(): RunLogObject[] }): RunLogLookup {
  return {
    find: async (namespace, name) => cache.runLog(namespace, name),
    forEach: async (visit) => cache.runLogs().forEach(visit),
    knows: (namespace, name) => cache.runLog(namespace, name) !== undefined,
  };
}

/**
 * No cache: every RunLog of the cluster, `pageSize` at a time (a RunLog may be about 90 KB), and each read
 * again before its look. Pods of a results store write none, so a pod's going says nothing of one: the sweep
 * finds those left from before.
 */
export function pagedRunLogs(api: KubeApi, pageSize: number): RunLogLookup {
  const collection = KubePath.of({ group: RUNLET_GROUP, version: RUNLET_VERSION, resource: RUNLOG_PLURAL });
  return {
    find: (namespace, name) => api.find<RunLogObject>(runLogPath(namespace, name)),
    async forEach(visit) {
      let continueToken: string | undefined;
      do {
        const page = await api.list<RunLogObject>(collection, { limit: pageSize, continue: continueToken });
        page.items.forEach(visit);
        continueToken = page.metadata?.continue || undefined;
      } while (continueToken !== undefined);
    },
    knows: () => false,
  };
}

export interface RunLogJanitorOptions {
  api: KubeApi;
  runLogs: RunLogLookup;
  /** The pod cache. */
  pods: { get(namespace: string, name: string): PodObject | undefined };
  /** The App cache, for each App's retention. */
  apps: { get(namespace: string, name: string): App | undefined };
  logger: Logger;
  /** Wall clock: RunLog ages and the completion time of lost runs. */
  now: () => Date;
  sweepIntervalMs: number;
  /** Told what was done, for metrics. */
  onRunsClosed?(lost: number, undelivered: number): void;
  onRunLogDeleted?(): void;
}

/** Rounds of 409 Conflict (someone wrote the RunLog meanwhile: read it again, decide again) within one look. */
const MAX_WRITE_ROUNDS = 5;
const BACKOFF = { initialMs: 500, maxMs: 60_000 };

export class RunLogJanitor {
  readonly #options: RunLogJanitorOptions;
  readonly #queue: WorkQueue;
  #sweepTimer: NodeJS.Timeout | undefined;
  #sweeping = false;

  constructor(options: RunLogJanitorOptions) {
    this.#options = options;
    this.#queue = new WorkQueue({
      workers: 2,
      backoff: BACKOFF,
      handle: (key) => this.#look(key),
      onFailure: (key, error, failures, retryInMs) => options.logger.warn({ runLog: key, err: error, failures, retryInMs }, 'RunLog upkeep failed; retrying'),
    });
  }

  /** Starts the upkeep (leader only), with a sweep now: call it once the RunLog, pod and App caches are synced. */
  start(): void {
    this.#queue.start();
    this.sweep();
    this.#sweepTimer = setInterval(() => this.sweep(), this.#options.sweepIntervalMs);
    this.#sweepTimer.unref();
  }

  /** Stops sweeping and finishes the looks in hand. */
  async stop(): Promise<void> {
    clearInterval(this.#sweepTimer);
    this.#sweepTimer = undefined;
    await this.#queue.stop();
  }

  /** Queues every RunLog whose pod the cache does not show running. Ignored while stopped. */
  sweep(): void {
    // One at a time: a list of many pages can outlast the interval.
    if (this.#sweeping) return;
    this.#sweeping = true;
    this.#options.runLogs
      .forEach((runLog) => this.runLogChanged(runLog))
      .catch((error: unknown) => this.#options.logger.warn({ err: error }, 'could not list the RunLogs to look after; the next sweep tries again'))
      .finally(() => (this.#sweeping = false));
  }

  /**
   * A RunLog was written (or listed): only one whose pod is gone and that is due for something needs a look. One
   * kept for its retention is not read again until it is due (without a cache, each look reads it again).
   */
  runLogChanged(runLog: RunLogObject): void {
    const { namespace, name } = runLog.metadata;
    if (namespace === undefined || podRuns(this.#options.pods.get(namespace, name))) return;
    if (this.#judge(runLog).verdict.action !== 'keep') this.#queue.add(objectKey(namespace, name));
  }

  /** A pod changed or went: its RunLog needs a look once the pod no longer runs. */
  podChanged(pod: PodObject, deleted: boolean): void {
    const namespace = pod.metadata?.namespace;
    const name = pod.metadata?.name;
    if (namespace === undefined || name === undefined || (!deleted && podRuns(pod))) return;
    if (this.#options.runLogs.knows(namespace, name)) this.#queue.add(objectKey(namespace, name));
  }

  async #look(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    let runLog = await this.#options.runLogs.find(namespace, name);
    for (let round = 1; runLog !== undefined; round += 1) {
      const { verdict, retentionSeconds } = this.#judge(runLog);
      if (verdict.action === 'keep') return;
      // The pod and RunLog caches are fed by separate watches: before acting on a pod's absence, ask.
      if (await this.#podRunsOnServer(namespace, name)) return;
      try {
        if (verdict.action === 'close-runs') await this.#closeRuns(runLog);
        else await this.#delete(runLog, verdict.lastWrite, retentionSeconds);
        return;
      } catch (error) {
        if (isNotFound(error) || isNamespaceTerminating(error)) return;
        if (!isConflict(error) || round >= MAX_WRITE_ROUNDS) throw error;
      }
      runLog = await this.#options.api.find<RunLogObject>(runLogPath(namespace, name));
    }
  }

  #judge(runLog: RunLogObject): { verdict: ReturnType<typeof judgeRunLog>; retentionSeconds: number } {
    const { namespace = '', name = '' } = runLog.metadata;
    const app = this.#options.apps.get(namespace, runLog.spec?.appName ?? runLog.metadata.labels?.[APP_LABEL] ?? '');
    const retentionSeconds = app?.spec.runs?.retention ?? DEFAULT_RETENTION_SECONDS;
    return { verdict: judgeRunLog(runLog, { pod: this.#options.pods.get(namespace, name), retentionSeconds, now: this.#options.now() }), retentionSeconds };
  }

  async #podRunsOnServer(namespace: string, name: string): Promise<boolean> {
    const pods = await this.#options.api.list<PodObject>(KubePath.of({ version: 'v1', namespace, resource: 'pods' }), {
      fieldSelector: `metadata.name=${name}`,
    });
    return pods.items.some(podRuns);
  }

  /**
   * Replaces the status only if the RunLog is still the version judged (409 otherwise). A PUT, not a merge
   * patch: the API server drops every null of a merge patch, and a run record's nullable fields are required.
   */
  async #closeRuns(runLog: RunLogObject): Promise<void> {
    const { namespace = '', name = '' } = runLog.metadata;
    const closed = closeUnfinishedRuns(runLog.status, name, this.#options.now());
    if (closed === undefined) return;
    await this.#options.api.replace<RunLogObject>(runLogPath(namespace, name).subresource('status'), { ...runLog, status: closed.status });
    this.#options.onRunsClosed?.(closed.lost.length, closed.undelivered.length);
    this.#options.logger.info(
      { runLog: `${namespace}/${name}`, lost: closed.lost, undelivered: closed.undelivered },
      'the pod is gone: its runs in flight are recorded as failures (replica_lost), its pending webhooks as not delivered',
    );
  }

  async #delete(runLog: RunLogObject, lastWrite: Date, retentionSeconds: number): Promise<void> {
    const { namespace = '', name = '', uid, resourceVersion } = runLog.metadata;
    await this.#options.api.delete(runLogPath(namespace, name), { uid, resourceVersion });
    this.#options.onRunLogDeleted?.();
    this.#options.logger.info({ runLog: `${namespace}/${name}`, lastWrite: lastWrite.toISOString(), retentionSeconds }, 'deleted the RunLog of a gone pod after its retention');
  }
}

function runLogPath(namespace: string, name: string): KubePath {
  return KubePath.of({ group: RUNLET_GROUP, version: RUNLET_VERSION, namespace, resource: RUNLOG_PLURAL, name });
}
