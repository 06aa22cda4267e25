// App.status.runs with a results store: the per-App counters PostgreSQL keeps in the same statements that
// write the runs (results/migrations/0003_app_run_counts.sql), read by the leader every `intervalMs` in one
// query of one row per App. Nothing here grows with run history; the operator holds one summary per App.
//
// The counters cover the runs the store keeps, as the management API lists them: runs deleted by retention
// leave them (the last run time stays). An App that showed counters from its RunLogs before the store was
// configured shows the store's from then on.
import type { Logger } from 'pino';
import type { AppRunCounts } from '../crds/app-schema.ts';
import { objectKey } from '../kube/watch.ts';
import type { PgResults } from '../results/pg-results.ts';
import { rollUpRunCounts, type CountsSummary, type RunCountsSource } from './run-counters.ts';

export interface ResultsRunCountsOptions {
  store: Pick<PgResults, 'allRunCounts'>;
  /** How often the counters are read: the writer's least interval between two writes of one App. */
  intervalMs: number;
  logger: Logger;
  /** The App's counters may have moved (the writer's `changed`). */
  changed(appKey: string): void;
}

export class ResultsRunCounts implements RunCountsSource {
  readonly #options: ResultsRunCountsOptions;
  /** App key → its counters as last read; undefined until the first read (nothing is written before it). */
  #read: Map<string, CountsSummary> | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** The read under way: one at a time, so a slow database never stacks them. */
  #reading: Promise<void> = Promise.resolve();

  constructor(options: ResultsRunCountsOptions) {
    this.#options = options;
  }

  countsOf(appKey: string, shown: AppRunCounts | undefined): AppRunCounts | undefined {
    if (this.#read === undefined) return undefined;
    const summary = this.#read.get(appKey);
    if (summary === undefined && shown === undefined) return undefined;
    return rollUpRunCounts(summary === undefined ? [] : [summary], shown);
  }

  /** Reads now and every `intervalMs`; resolves once the first read is done (or failed, and logged). */
  start(): Promise<void> {
    const read = (): Promise<void> =>
      (this.#reading = this.#reading.then(() => this.#readOnce()).catch((error: unknown) => {
        this.#options.logger.warn({ err: error }, 'could not read the run counters from the results store; the next read tries again');
      }));
    this.#timer = setInterval(read, this.#options.intervalMs);
    this.#timer.unref();
    return read();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#reading;
    // A later leadership reads afresh: whatever moved meanwhile is written then.
    this.#read = undefined;
  }

  async #readOnce(): Promise<void> {
    const rows = await this.#options.store.allRunCounts();
    const read = new Map<string, CountsSummary>();
    for (const { projectId, appName, counts } of rows) {
      const { lastRunTime, ...sums } = counts;
      read.set(objectKey(projectId, appName), { counts: sums, lastRunAt: lastRunTime === null ? undefined : Date.parse(lastRunTime) });
    }
    this.#read = read;
    // Every App, changed or not: the writer compares with what its status shows and writes only a difference,
    // so an App its cache did not hold yet at an earlier read is written now.
    for (const appKey of read.keys()) this.#options.changed(appKey);
  }
}
