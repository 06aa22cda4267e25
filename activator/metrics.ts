// The holder's Prometheus metrics, in the registry of whoever runs it: `runlet activator`'s own
// (activator/main.ts), or the operator's while it hosts the holder (`runlet operator --holder on`).
import { Counter, Histogram, type Registry } from 'prom-client';
import type { HolderMetrics } from './holder.ts';

export class HeldCallMetrics {
  readonly calls: Counter<'namespace' | 'app' | 'mode' | 'outcome'>;
  readonly coldStart: Histogram<'namespace' | 'app' | 'mode'>;
  readonly refusals: Counter<'namespace' | 'bound'>;
  /** What the holder reports (holder.ts). */
  readonly holder: HolderMetrics;

  constructor(registry: Registry) {
    this.calls = new Counter({
      name: 'runlet_holder_calls_total',
      help: 'Calls to Apps at zero replicas taken by this holder, by mode (sync, stream, async) and outcome: handed_over to a replica, timed_out (503 past the cold-start limit), accepted (async: recorded, 202), caller_refused (async: taken without a token, the replica refused its caller, 401/403, and recorded no run), unrecorded (async: no replica recorded it after repeated answers), expired (async: held past its record’s expiry), altered (async: its record was changed at rest), refused (503 at once: the holder held as many calls, or body bytes, as its bounds allow), cancelled (sync, stream: cancelled through the management API while it waited, 409).',
      labelNames: ['namespace', 'app', 'mode', 'outcome'] as const,
      registers: [registry],
    });
    this.coldStart = new Histogram({
      name: 'runlet_holder_cold_start_seconds',
      help: 'How long a call to an App at zero waited for a replica: from its arrival at the holder to its hand-over (the run record’s coldStartMs).',
      labelNames: ['namespace', 'app', 'mode'] as const,
      buckets: [0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300],
      registers: [registry],
    });
    this.refusals = new Counter({
      name: 'runlet_holder_refusals_total',
      help: 'Calls the holder refused at once (503) for one of its bounds, by the namespace called and the bound: calls_per_app, calls_per_namespace (the namespace’s fair share), calls (all namespaces together), body_bytes_per_namespace, body_bytes.',
      labelNames: ['namespace', 'bound'] as const,
      registers: [registry],
    });
    const { calls, coldStart, refusals } = this;
    this.holder = {
      handedOver: (namespace, app, mode, waitMs) => {
        calls.inc({ namespace, app, mode, outcome: 'handed_over' });
        coldStart.observe({ namespace, app, mode }, waitMs / 1000);
      },
      timedOut: (namespace, app, mode) => calls.inc({ namespace, app, mode, outcome: 'timed_out' }),
      accepted: (namespace, app) => calls.inc({ namespace, app, mode: 'async', outcome: 'accepted' }),
      dropped: (namespace, app, why) => calls.inc({ namespace, app, mode: 'async', outcome: why }),
      refused: (namespace, app, mode, bound) => {
        calls.inc({ namespace, app, mode, outcome: 'refused' });
        refusals.inc({ namespace, bound });
      },
      cancelled: (namespace, app, mode) => calls.inc({ namespace, app, mode, outcome: 'cancelled' }),
    };
  }
}
