// The results store's size and each namespace's usage, read every results.usageMetricsSeconds by each operator
// replica for its /metrics (operator/metrics.ts observeResultsUsage): a scrape reads the last figures, never the
// database, so however often Prometheus scrapes, the store is asked twice a minute at most. Both reads are
// cheap: pg_database_size sums the files' sizes, and the usage is one row per App (migrations 0003 and 0007).
import type { Logger } from 'pino';
import type { NamespaceUsage, NamespaceUsageReader } from '../results/namespace-usage.ts';

export interface ResultsUsage {
  databaseBytes: number;
  namespaces: ReadonlyMap<string, NamespaceUsage>;
  /** When it was read (ms since the epoch). */
  readAt: number;
}

export interface ResultsUsageOptions {
  usage: Pick<NamespaceUsageReader, 'allUsage' | 'databaseBytes'>;
  intervalMs: number;
  logger: Logger;
}

export class ResultsUsageReader {
  readonly #options: ResultsUsageOptions;
  #last: ResultsUsage | undefined;
  #timer: NodeJS.Timeout | undefined;
  #reading: Promise<void> = Promise.resolve();

  constructor(options: ResultsUsageOptions) {
    this.#options = options;
  }

  /** The last figures read; undefined before the first read succeeded. */
  get last(): ResultsUsage | undefined {
    return this.#last;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    const read = (): void => {
      // One read at a time: a slow database never stacks them.
      this.#reading = this.#reading.then(async () => void (await this.read())).catch((error: unknown) => {
        this.#options.logger.warn({ err: error }, 'reading the results store’s size and usage for the metrics failed; the next read tries again');
      });
    };
    read();
    this.#timer = setInterval(read, this.#options.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#reading;
  }

  /** Reads the figures now. */
  async read(): Promise<ResultsUsage> {
    const [databaseBytes, namespaces] = await Promise.all([this.#options.usage.databaseBytes(), this.#options.usage.allUsage()]);
    this.#last = { databaseBytes, namespaces, readAt: Date.now() };
    return this.#last;
  }
}
