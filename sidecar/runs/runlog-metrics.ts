// Prometheus metrics of the pod's run store (the RunLog, or the results collector): run records lost before
// they reached it, and how many wait.
import { Counter, Gauge, type Registry } from '../prom-client.ts';

/** Why records were dropped: the unwritten buffer overflowed, or the store closed before writing them. */
export type DropReason = 'buffer_full' | 'closed';

export class RunLogMetrics {
  readonly #dropped: Record<DropReason, Counter.Internal>;

  /** `destination`: where the records go, for the metrics' help. */
  constructor(registry: Registry, buffered: () => number, destination = 'the RunLog') {
    const dropped = new Counter({
      name: 'runlet_run_records_dropped_total',
      help: `Run records dropped before they reached ${destination} (it was unreachable for too long), by reason`,
      labelNames: ['reason'],
      registers: [registry],
    });
    this.#dropped = { buffer_full: dropped.labels('buffer_full'), closed: dropped.labels('closed') };
    new Gauge({
      name: 'runlet_run_records_buffered',
      help: `Run records saved and not yet written to ${destination}`,
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
