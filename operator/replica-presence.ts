// This operator replica, marked present in the results store while it runs (results/pg-results.ts
// seeOperatorReplica, migration 0005). Some runs are this replica's to finish, not a pod's: a call held at zero
// and cancelled here, recorded with its webhook pending while this replica delivers it. The leader's sweep
// (results-upkeep.ts) leaves those to a replica it sees, and closes them once the replica is gone: stopped
// (marked gone at once, its deliveries over), or not seen for three marks (killed, its node lost, or cut off from
// the store, where it could not record the outcome anyway).
import type { Logger } from 'pino';
import type { PgResults } from '../results/pg-results.ts';

/** Marks missed before a replica counts as gone: one late mark (a slow database, a pause) is not a death. */
export const PRESENCE_MARKS_MISSED = 3;

export class ReplicaPresence {
  readonly #store: Pick<PgResults, 'seeOperatorReplica' | 'markOperatorReplicaGone'>;
  readonly #identity: string;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | undefined;
  /** The mark under way, if any: a tick meanwhile is skipped; stop() waits for it, so no mark follows the last. */
  #marking: Promise<void> | undefined;
  /** Whether the last mark failed: the first failure of a run of them is logged, not each. */
  #failing = false;

  constructor(options: { store: Pick<PgResults, 'seeOperatorReplica' | 'markOperatorReplicaGone'>; identity: string; intervalSeconds: number; logger: Logger }) {
    this.#store = options.store;
    this.#identity = options.identity;
    this.#intervalMs = options.intervalSeconds * 1000;
    this.#logger = options.logger;
  }

  start(): void {
    const mark = (): void => {
      this.#marking ??= this.#mark().finally(() => (this.#marking = undefined));
    };
    mark();
    this.#timer = setInterval(mark, this.#intervalMs);
    this.#timer.unref();
  }

  /**
   * Marks this replica present now, before it records a run only it can finish: the sweep must know it by then
   * (a run of a replica it does not know is a gone pod's, closed at once). Rejects as the mark fails.
   */
  async markNow(): Promise<void> {
    await this.#store.seeOperatorReplica(this.#identity);
  }

  /** Stops marking and says this replica is gone: call once it delivers nothing more. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#marking;
    try {
      await this.#store.markOperatorReplicaGone(this.#identity);
    } catch (error) {
      this.#logger.warn({ err: error }, 'this operator replica could not mark itself gone in the results store: the leader counts it gone once its marks stop');
    }
  }

  async #mark(): Promise<void> {
    try {
      await this.#store.seeOperatorReplica(this.#identity);
      if (this.#failing) this.#logger.info('this operator replica is marked present in the results store again');
      this.#failing = false;
    } catch (error) {
      if (!this.#failing) this.#logger.warn({ err: error }, 'this operator replica could not mark itself present in the results store; the leader will close the webhooks it is delivering once it misses marks');
      this.#failing = true;
    }
  }
}
