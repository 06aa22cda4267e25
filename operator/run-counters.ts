// App.status.runs: the run counters of an App's replicas, summed from their RunLogs, so that `kubectl get app
// -o yaml` answers "how many runs, how many failed, how many in flight, when was the last" without paging
// through the management API.
//
// Every replica keeps the per-App summaries current from the RunLog watch (so a new leader has them at once);
// the leader writes them, at most once per App every `minIntervalMs` and never when nothing changed: replicas
// write their RunLogs about once a second each, and an App's status must not be written at that rate.
//
// The sums cover the RunLogs that exist: when a gone pod's RunLog is deleted after its retention, its runs
// leave the sums (the last run time stays).
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import type { App, AppRunCounts } from '../crds/app-schema.ts';
import type { RunLogCounts } from '../crds/runlog-schema.ts';
import type { RunLogObject } from '../management/runlog-source.ts';
import { APP_LABEL } from '../crds/api-group.ts';
import type { KubeApi } from '../kube/client.ts';
import { isNamespaceTerminating, isNotFound } from '../kube/errors.ts';
import { resourcePath } from '../kube/objects.ts';
import { objectKey } from '../kube/watch.ts';

/** What one RunLog adds to its App's counters. */
export interface RunLogSummary {
  counts: RunLogCounts;
  /** Creation time (epoch ms) of its newest run; undefined without runs. */
  lastRunAt: number | undefined;
}

export function summarizeRunLog(runLog: RunLogObject): RunLogSummary {
  const runs = runLog.status?.runs ?? [];
  let lastRunAt: number | undefined;
  for (const run of runs) {
    const created = Date.parse(run.createdAt);
    if (!Number.isNaN(created) && (lastRunAt === undefined || created > lastRunAt)) lastRunAt = created;
  }
  return { counts: runLog.status?.counts ?? countRuns(runs), lastRunAt };
}

/** Counts derived from the records, as the sidecar counts them, for a RunLog written without counts. */
function countRuns(runs: readonly { status: string }[]): RunLogCounts {
  const counts = { total: runs.length, success: 0, failure: 0, inFlight: 0 };
  for (const { status } of runs) {
    if (status === 'success') counts.success += 1;
    else if (status === 'failure') counts.failure += 1;
    else if (status === 'pending' || status === 'running') counts.inFlight += 1;
  }
  return counts;
}

/** The App's counters: sums over its RunLogs; the last run time never goes back (`previous` may know a later one). */
export function rollUpRunCounts(summaries: Iterable<RunLogSummary>, previous: AppRunCounts | undefined): AppRunCounts {
  const sums = { total: 0, success: 0, failure: 0, inFlight: 0 };
  let lastRunAt = previous?.lastRunTime === undefined ? undefined : Date.parse(previous.lastRunTime);
  for (const { counts, lastRunAt: runAt } of summaries) {
    sums.total += counts.total;
    sums.success += counts.success;
    sums.failure += counts.failure;
    sums.inFlight += counts.inFlight;
    if (runAt !== undefined && (lastRunAt === undefined || Number.isNaN(lastRunAt) || runAt > lastRunAt)) lastRunAt = runAt;
  }
  if (lastRunAt === undefined || Number.isNaN(lastRunAt)) return sums;
  // The previous value as written when it still stands: no rewrite for a change of notation.
  const lastRunTime = previous?.lastRunTime !== undefined && Date.parse(previous.lastRunTime) === lastRunAt ? previous.lastRunTime : new Date(lastRunAt).toISOString();
  return { ...sums, lastRunTime };
}

export interface RunCountersOptions {
  api: KubeApi;
  /** The App cache: which Apps exist, and the counters their status shows. */
  apps: { get(namespace: string, name: string): App | undefined; list(): App[] };
  logger: Logger;
  /** Least time between two writes of one App's counters. */
  minIntervalMs: number;
  /** Monotonic milliseconds, for the rate limit. Default `performance.now()`. */
  monotonicNow?: () => number;
  onWrite?(): void;
}

export class RunCounters {
  readonly #options: RunCountersOptions;
  readonly #now: () => number;
  /** App key → RunLog key → what that RunLog adds. */
  readonly #byApp = new Map<string, Map<string, RunLogSummary>>();
  /** RunLog key → its App key, to move or drop its summary. */
  readonly #appOf = new Map<string, string>();
  readonly #timers = new Map<string, NodeJS.Timeout>();
  readonly #lastWriteAt = new Map<string, number>();
  /**
   * What this leader last wrote per App. The App cache shows a write only once its watch event is in: compared
   * with this too, a write is not repeated while that event is late. (The operator alone writes status.runs.)
   */
  readonly #written = new Map<string, AppRunCounts>();
  readonly #writing = new Set<Promise<void>>();
  #running = false;

  constructor(options: RunCountersOptions) {
    this.#options = options;
    this.#now = options.monotonicNow ?? (() => performance.now());
  }

  /** Starts writing (leader only): every App is looked at once, then those whose RunLogs change. */
  start(): void {
    this.#running = true;
    for (const app of this.#options.apps.list()) this.#schedule(objectKey(app.metadata.namespace, app.metadata.name));
  }

  /** Stops writing; resolves once the writes in flight are done. Summaries stay current. */
  async stop(): Promise<void> {
    this.#running = false;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    this.#written.clear();
    await Promise.allSettled([...this.#writing]);
  }

  runLogChanged(runLog: RunLogObject): void {
    const runLogKey = objectKey(runLog.metadata.namespace, runLog.metadata.name);
    const appName = runLog.spec?.appName ?? runLog.metadata.labels?.[APP_LABEL];
    if (appName === undefined) {
      this.runLogDeleted(runLog);
      return;
    }
    const appKey = objectKey(runLog.metadata.namespace, appName);
    const before = this.#appOf.get(runLogKey);
    if (before !== undefined && before !== appKey) this.runLogDeleted(runLog);
    let summaries = this.#byApp.get(appKey);
    if (summaries === undefined) this.#byApp.set(appKey, (summaries = new Map()));
    summaries.set(runLogKey, summarizeRunLog(runLog));
    this.#appOf.set(runLogKey, appKey);
    this.#schedule(appKey);
  }

  runLogDeleted(runLog: RunLogObject): void {
    const runLogKey = objectKey(runLog.metadata.namespace, runLog.metadata.name);
    const appKey = this.#appOf.get(runLogKey);
    if (appKey === undefined) return;
    this.#appOf.delete(runLogKey);
    const summaries = this.#byApp.get(appKey);
    summaries?.delete(runLogKey);
    if (summaries?.size === 0) this.#byApp.delete(appKey);
    this.#schedule(appKey);
  }

  /** The App (`namespace/name`) is gone: nothing more to write for it. */
  appDeleted(appKey: string): void {
    clearTimeout(this.#timers.get(appKey));
    this.#timers.delete(appKey);
    this.#lastWriteAt.delete(appKey);
    this.#written.delete(appKey);
  }

  /** A write of the App's counters as soon as its rate limit allows (one timer per App, however many changes). */
  #schedule(appKey: string): void {
    if (!this.#running || this.#timers.has(appKey)) return;
    const lastWriteAt = this.#lastWriteAt.get(appKey);
    const waitMs = lastWriteAt === undefined ? 0 : Math.max(0, lastWriteAt + this.#options.minIntervalMs - this.#now());
    const timer = setTimeout(() => {
      this.#timers.delete(appKey);
      const writing = this.#write(appKey).finally(() => this.#writing.delete(writing));
      this.#writing.add(writing);
    }, waitMs);
    timer.unref();
    this.#timers.set(appKey, timer);
  }

  async #write(appKey: string): Promise<void> {
    const slash = appKey.indexOf('/');
    const [namespace, name] = [appKey.slice(0, slash), appKey.slice(slash + 1)];
    const app = this.#options.apps.get(namespace, name);
    if (!this.#running || app === undefined) return;
    const summaries = this.#byApp.get(appKey);
    const shown = app.status?.runs;
    // An App that never ran anything has nothing to show yet.
    if (shown === undefined && summaries === undefined) return;
    const next = rollUpRunCounts(summaries?.values() ?? [], shown);
    if (isDeepStrictEqual(withoutUndefined(shown), next) || isDeepStrictEqual(this.#written.get(appKey), next)) return;
    this.#lastWriteAt.set(appKey, this.#now());
    const path = resourcePath({ apiVersion: app.apiVersion, kind: app.kind, namespace, name }, 'status');
    try {
      await this.#options.api.mergePatch(path, { status: { runs: next } });
      this.#written.set(appKey, next);
      this.#options.onWrite?.();
    } catch (error) {
      if (isNotFound(error) || isNamespaceTerminating(error)) return;
      this.#options.logger.warn({ app: appKey, err: error }, 'could not write the run counters into the App status; retrying');
      this.#schedule(appKey);
    }
  }
}

function withoutUndefined(counts: AppRunCounts | undefined): Partial<AppRunCounts> | undefined {
  if (counts === undefined) return undefined;
  return Object.fromEntries(Object.entries(counts).filter(([, value]) => value !== undefined));
}
