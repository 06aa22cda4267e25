// The log line of run-store refusals: an async call the store could not record (a full disk, the collector
// away, the namespace at its quota) is refused 503 or 507, and the metric alone told no one why. The first
// refusal is logged with its cause at once, later ones at most once every interval with how many there were
// since: a store that refuses every call must not turn each refused call into a log write.
import type { Logger } from 'pino';

const DEFAULT_INTERVAL_MS = 10_000;

export class StoreRefusalLog {
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #now: () => number;
  #lastLoggedAt = -Infinity;
  #unlogged = 0;

  constructor(logger: Logger, options: { intervalMs?: number; now?: () => number } = {}) {
    this.#logger = logger;
    this.#intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
    this.#now = options.now ?? Date.now;
  }

  /** One refused call, and why the store refused it. */
  note(runId: string, error: unknown): void {
    const now = this.#now();
    if (now - this.#lastLoggedAt < this.#intervalMs) {
      this.#unlogged += 1;
      return;
    }
    const refusedSince = this.#unlogged;
    this.#unlogged = 0;
    this.#lastLoggedAt = now;
    this.#logger.warn(
      { err: error, runId, alsoRefusedSinceLastLine: refusedSince },
      'the run store could not record an async call, so it was refused; calls are refused until the store takes records again',
    );
  }
}
