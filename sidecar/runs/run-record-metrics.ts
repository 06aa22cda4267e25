// Prometheus metrics of the stores that send run records elsewhere (the RunLog store to the API server, the results
// shipper to the collector): records lost before reaching it, and how many wait.
import { Counter, Gauge, type Registry } from '../prom-client.ts';

/**
 * Why records were dropped: the unwritten buffer overflowed, the store closed before writing them, the
 * receiving end refused them for good (the results collector: a record no store can hold), or the namespace is
 * at its results store quota (the collector refuses records of new runs).
 */
export type DropReason = 'buffer_full' | 'closed' | 'refused' | 'quota';

export class RunRecordMetrics {
  readonly #dropped: Record<DropReason, Counter.Internal>;

  constructor(registry: Registry, buffered: () => number) {
    const dropped = new Counter({
      name: 'runlet_run_records_dropped_total',
      help: 'Run records dropped before they reached their store (the RunLog, or the results collector), by reason',
      labelNames: ['reason'],
      registers: [registry],
    });
    this.#dropped = { buffer_full: dropped.labels('buffer_full'), closed: dropped.labels('closed'), refused: dropped.labels('refused'), quota: dropped.labels('quota') };
    new Gauge({
      name: 'runlet_run_records_buffered',
      help: 'Run records saved and not yet written to their store (the RunLog, or the results collector)',
      registers: [registry],
      collect() {
        this.set(buffered());
      },
    });
  }

  dropped(reason: DropReason, records: number): void {
    this.#dropped[reason].inc(records);
  }
}
