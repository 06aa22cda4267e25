// Prometheus metrics of one sidecar. Label children are resolved once up front, so counting a run is a
// property access and an increment, not a label lookup.
import { Counter, Gauge, Histogram, Registry } from './prom-client.ts';
import type { ProblemError } from '../crds/problem.ts';
import type { RunMode, RunStatus } from '../crds/run-record-schema.ts';
import type { AttemptOutcome } from './webhook/retry-policy.ts';

const MODES: readonly RunMode[] = ['sync', 'async', 'stream'];
const FINAL_STATUSES: readonly RunStatus[] = ['success', 'failure', 'cancelled'];
/**
 * The refusals of a request as it arrives (a caller too slow, too large, or the run port's buffer budget
 * spent), by problem code: the signs of slow or hostile callers an operator watches for.
 */
const REQUEST_REFUSALS = ['request-buffer-full', 'request-timeout', 'body-too-large', 'headers-too-large'] as const;

export class SidecarMetrics {
  readonly registry: Registry;
  readonly #runs: Record<string, Record<string, Counter.Internal>> = {};
  readonly #durations: Record<string, Histogram.Internal<'mode'>> = {};
  readonly #webhookAttempts: Counter<'outcome'>;
  readonly #webhookConnectionWait: Histogram;
  readonly #webhookDeliveries: Counter<'state'>;
  readonly refused: Counter<'reason'>;
  readonly #requestRefusals = new Map<string, Counter.Internal>();

  /** Gauges are read at scrape time from the admissions, so the hot path never updates them. */
  constructor(load: { inFlight: () => number; queued: () => number }, registry = new Registry()) {
    this.registry = registry;
    const runs = new Counter({ name: 'runlet_runs_total', help: 'Runs completed, by mode and final status', labelNames: ['mode', 'status'], registers: [this.registry] });
    const durations = new Histogram({
      name: 'runlet_run_duration_seconds',
      help: 'Run time of completed runs (from start of execution), by mode',
      labelNames: ['mode'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 900, 3600],
      registers: [this.registry],
    });
    for (const mode of MODES) {
      this.#durations[mode] = durations.labels(mode);
      const byStatus: Record<string, Counter.Internal> = (this.#runs[mode] = {});
      for (const status of FINAL_STATUSES) byStatus[status] = runs.labels(mode, status);
    }
    new Gauge({
      name: 'runlet_runs_in_flight',
      help: 'Calls in flight to the apps',
      registers: [this.registry],
      collect() {
        this.set(load.inFlight());
      },
    });
    new Gauge({
      name: 'runlet_queue_depth',
      help: 'Runs waiting for a slot (queued and accepted async runs)',
      registers: [this.registry],
      collect() {
        this.set(load.queued());
      },
    });
    this.refused = new Counter({ name: 'runlet_runs_refused_total', help: 'Run calls refused before running, by reason', labelNames: ['reason'], registers: [this.registry] });
    for (const code of REQUEST_REFUSALS) this.#requestRefusals.set(code, this.refused.labels(code.replaceAll('-', '_')));
    this.#webhookAttempts = new Counter({ name: 'runlet_webhook_attempts_total', help: 'Webhook delivery attempts, by outcome', labelNames: ['outcome'], registers: [this.registry] });
    this.#webhookConnectionWait = new Histogram({
      name: 'runlet_webhook_connection_wait_seconds',
      help: 'Time a webhook attempt waited for a connection to its receiver before it was sent (not part of its timeout)',
      // Up to the wait's bound (10 minutes): a receiver slower than the pool drains shows here, not as failures.
      buckets: [0.001, 0.01, 0.1, 1, 5, 10, 30, 60, 120, 300, 600],
      registers: [this.registry],
    });
    this.#webhookDeliveries = new Counter({ name: 'runlet_webhook_deliveries_total', help: 'Webhook deliveries finished, by final state', labelNames: ['state'], registers: [this.registry] });
  }

  /** Counts a request refused as it arrived; other problems are counted where they are decided, or not at all. */
  requestRefused(problem: ProblemError): void {
    this.#requestRefusals.get(problem.spec.code)?.inc();
  }

  runCompleted(mode: RunMode, status: RunStatus, runtimeMs: number | null): void {
    this.#runs[mode]?.[status]?.inc();
    if (runtimeMs !== null) this.#durations[mode]?.observe(runtimeMs / 1000);
  }

  webhookAttempt(outcome: AttemptOutcome, connectionWaitMs: number): void {
    this.#webhookConnectionWait.observe(connectionWaitMs / 1000);
    this.#webhookAttempts.labels(outcome.kind === 'response' ? `${Math.floor(outcome.statusCode / 100)}xx` : outcome.kind).inc();
  }

  webhookFinished(state: 'delivered' | 'failed'): void {
    this.#webhookDeliveries.labels(state).inc();
  }
}
