// runlet dev's retention of runs: as the operator's leader does in the results store (operator/results-upkeep.ts),
// the runs older than their app's `retention_days` ([runs]; 30 by default, the chart's default too) are deleted
// from the SQLite store, in batches, at start and then every hour. Without it a data dir used for months grows
// without end, and its list slows with it.
import type { Logger } from 'pino';
import type { AppRetention, RunHistory } from '../results/run-history.ts';

/** Days runs are kept in `runlet dev` when their app sets no `retention_days`. */
export const DEV_RETENTION_DEFAULT_DAYS = 30;
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;
const PRUNE_BATCH_SIZE = 1000;

export interface DevRetentionOptions {
  store: Pick<RunHistory, 'pruneExpired'>;
  /** The apps that set their own retention. */
  apps: readonly AppRetention[];
  logger: Logger;
  intervalMs?: number;
  now?: () => Date;
}

export class DevRetention {
  readonly #options: DevRetentionOptions;
  readonly #timer: NodeJS.Timeout;
  /** The pass under way, awaited by stop(): one at a time, and none left writing once the store closes. */
  #running: Promise<number>;

  constructor(options: DevRetentionOptions) {
    this.#options = options;
    this.#running = this.#prune();
    this.#timer = setInterval(() => {
      this.#running = this.#running.then(() => this.#prune());
    }, options.intervalMs ?? PRUNE_INTERVAL_MS);
    this.#timer.unref();
  }

  /** The pass under way (the first starts with the store): resolves with the runs it deleted. */
  get settled(): Promise<number> {
    return this.#running;
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }

  async #prune(): Promise<number> {
    const { store, apps, logger, now } = this.#options;
    try {
      const deleted = await store.pruneExpired({ defaultDays: DEV_RETENTION_DEFAULT_DAYS, apps, batchSize: PRUNE_BATCH_SIZE, now: now?.() });
      if (deleted > 0) logger.info({ deleted }, 'deleted runs past their retention');
      return deleted;
    } catch (err) {
      logger.warn({ err }, 'deleting runs past their retention failed; the next pass tries again');
      return 0;
    }
  }
}
