// App.status.runs: an App's run counters, so that `kubectl get app -o yaml` answers "how many runs, how many
// failed, how many in flight, when was the last" without paging through the management API. They come from a
// source: the RunLogs' counts (runlog-run-counts.ts), or the results store's per-App counters
// (results-run-counts.ts), which tells this writer which Apps' counters changed.
//
// The leader writes them, at most once per App every `minIntervalMs` and never when nothing changed: replicas
// write their RunLogs about once a second each, and an App's status must not be written at that rate.
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import type { App, AppRunCounts } from '../crds/app-schema.ts';
import type { RunLogCounts } from '../crds/runlog-schema.ts';
import type { KubeApi } from '../kube/client.ts';
import { isNamespaceTerminating, isNotFound } from '../kube/errors.ts';
import { resourcePath } from '../kube/objects.ts';
import { objectKey } from '../kube/watch.ts';

/** What one source of runs (a RunLog, the results store's row) adds to its App's counters. */
export interface CountsSummary {
  counts: RunLogCounts;
  /** Creation time (epoch ms) of its newest run; undefined without runs. */
  lastRunAt: number | undefined;
}

/** The App's counters: sums over its sources; the last run time never goes back (`previous` may know a later one). */
export function rollUpRunCounts(summaries: Iterable<CountsSummary>, previous: AppRunCounts | undefined): AppRunCounts {
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

/** Where an App's counters come from; it calls the writer's `changed(appKey)` when they may have moved. */
export interface RunCountsSource {
  /** The counters to show, given those shown now; undefined: nothing to show yet (an App that never ran). */
  countsOf(appKey: string, shown: AppRunCounts | undefined): AppRunCounts | undefined;
  /** Begins (leader only) and ends watching for changes, where the source polls; resolves once it can answer. */
  start?(): Promise<void> | void;
  stop?(): Promise<void>;
}

export interface RunCountersOptions {
  api: KubeApi;
  source: RunCountsSource;
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

  /** Starts writing (leader only): every App is looked at once, then those whose counters change. */
  start(): void {
    this.#running = true;
    void Promise.resolve(this.#options.source.start?.()).then(() => {
      for (const app of this.#options.apps.list()) this.#schedule(objectKey(app.metadata.namespace, app.metadata.name));
    });
  }

  /** Stops writing; resolves once the writes in flight are done. */
  async stop(): Promise<void> {
    this.#running = false;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    await this.#options.source.stop?.();
    this.#written.clear();
    await Promise.allSettled([...this.#writing]);
  }

  /** The App's (`namespace/name`) counters may have moved: written when its rate limit allows. */
  changed(appKey: string): void {
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
    const shown = app.status?.runs;
    const next = this.#options.source.countsOf(appKey, shown);
    if (next === undefined) return;
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
