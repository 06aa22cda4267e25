// The operator's Prometheus metrics, in a registry of its own (several operators can live in one test
// process, and the management API mounted later adds to the same registry).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RestartReason } from '../kube/watch.ts';
import { HeldCallMetrics } from '../activator/metrics.ts';
import type { ScalerMetrics } from './autoscaling/scaler.ts';
import type { QuotaLimits } from '../results/namespace-quotas.ts';
import type { ResultsUsage } from './results-usage.ts';

export type ReconcileOutcome = 'reconciled' | 'invalid' | 'gone' | 'error';

export class OperatorMetrics {
  readonly registry = new Registry();

  readonly reconciles = new Counter({
    name: 'runlet_operator_reconciles_total',
    help: 'App reconciles by outcome (reconciled, invalid spec, App gone, error).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly reconcileErrors = new Counter({
    name: 'runlet_operator_reconcile_errors_total',
    help: 'App reconciles that failed and were scheduled for a retry.',
    registers: [this.registry],
  });

  readonly reconcileDuration = new Histogram({
    name: 'runlet_operator_reconcile_duration_seconds',
    help: 'Time to reconcile one App: read, render, apply, status.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly queueDepth = new Gauge({
    name: 'runlet_operator_queue_depth',
    help: 'Apps waiting to be reconciled (not counting those in a retry backoff).',
    registers: [this.registry],
  });

  readonly watchRestarts = new Counter({
    name: 'runlet_operator_watch_restarts_total',
    help: 'Watches restarted, by resource and reason (closed, expired, silent, idle, error, list-error).',
    labelNames: ['resource', 'reason'] as const,
    registers: [this.registry],
  });

  readonly runsLost = new Counter({
    name: 'runlet_operator_runs_lost_total',
    help: 'Runs left in flight by a gone pod, recorded as failures (reason replica_lost).',
    registers: [this.registry],
  });

  readonly webhooksUndelivered = new Counter({
    name: 'runlet_operator_webhooks_undelivered_total',
    help: 'Webhook deliveries a gone pod still owed, recorded as failed.',
    registers: [this.registry],
  });

  readonly runLogsDeleted = new Counter({
    name: 'runlet_operator_runlogs_deleted_total',
    help: 'RunLogs of gone pods deleted after their App’s retention.',
    registers: [this.registry],
  });

  readonly runCounterWrites = new Counter({
    name: 'runlet_operator_run_counter_writes_total',
    help: 'Writes of App.status.runs (rate-limited per App).',
    registers: [this.registry],
  });

  readonly loadScrapes = new Counter({
    name: 'runlet_operator_load_scrapes_total',
    help: 'Scrapes of the replicas’ load (their sidecars’ /load, by the leader) by outcome (ok, failed).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly activatorScrapes = new Counter({
    name: 'runlet_operator_activator_scrapes_total',
    help: 'Scrapes of the calls waiting at the activators (their admin port’s /load, by the leader) by outcome (ok, failed).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly leader = new Gauge({
    name: 'runlet_operator_leader',
    help: '1 while this replica holds the leader lease and reconciles.',
    registers: [this.registry],
  });

  readonly resultsQuotaRefusals = new Counter({
    name: 'runlet_results_quota_refusals_total',
    help: 'What the results store’s per-namespace quotas refused: run records of new runs (quota runs, recordBytes) and kept results dropped (keptResultBytes).',
    labelNames: ['namespace', 'quota'] as const,
    registers: [this.registry],
  });

  readonly resultsBatchRefusals = new Counter({
    name: 'runlet_results_batches_refused_total',
    help: 'Batches of run records the results collector refused whole, by reason (unauthenticated, wrong-pod, wrong-namespace, review-rate, review-unavailable, too-large, budget, preempted, slow, aborted, invalid, unsupported-media-type, store-unavailable) and the sender\'s namespace once the API server authenticated it (else empty).',
    labelNames: ['reason', 'namespace'] as const,
    registers: [this.registry],
  });

  readonly resultsTokenChecks = new Counter({
    name: 'runlet_results_token_checks_total',
    help: 'Tokens the results collector checked offline (signature, issuer, audience, expiry, pod binding) before a TokenReview, by outcome: verified (then reviewed), refused (never reviewed), unchecked (the issuer\'s keys could not be read: reviewed).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'runlet_operator_' });
  }

  /** The runs held by the management API's RunLog cache, read at each scrape. */
  observeRunsCached(read: () => number): void {
    new Gauge({
      name: 'runlet_operator_runs_cached',
      help: 'Runs held by the management API’s RunLog cache (a run in several RunLogs counts once).',
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** The Apps' load (operator/autoscaling/app-load.ts), read at each scrape: Apps without a report leave the series. */
  observeAppLoads(read: () => Iterable<{ namespace: string; app: string; load: { averageConcurrency: number; requestsPerSecond: number } }>): void {
    const concurrency = new Gauge({
      name: 'runlet_app_load_concurrency',
      help: 'Calls in flight plus queued over an App’s reporting replicas, each averaged over its last second.',
      labelNames: ['namespace', 'app'] as const,
      registers: [this.registry],
      collect() {
        concurrency.reset();
        requestsPerSecond.reset();
        for (const { namespace, app, load } of read()) {
          concurrency.set({ namespace, app }, load.averageConcurrency);
          requestsPerSecond.set({ namespace, app }, load.requestsPerSecond);
        }
      },
    });
    const requestsPerSecond = new Gauge({
      name: 'runlet_app_requests_per_second',
      help: 'Calls arriving per second at an App’s reporting replicas, over their last second.',
      labelNames: ['namespace', 'app'] as const,
      registers: [this.registry],
    });
  }

  /**
   * The results store's size and each namespace's usage, as last read (operator/results-usage.ts reads them
   * every results.usageMetricsSeconds, not per scrape), with each namespace's quotas; nothing before the first read.
   */
  observeResultsUsage(read: () => ResultsUsage | undefined, limitsOf: (namespace: string) => QuotaLimits): void {
    const database = new Gauge({
      name: 'runlet_results_database_bytes',
      help: 'Size of the results store’s database on disk (pg_database_size), as last read.',
      registers: [this.registry],
      collect() {
        const usage = read();
        database.reset();
        for (const gauge of namespaceGauges) gauge.reset();
        limit.reset();
        if (usage === undefined) return;
        database.set(usage.databaseBytes);
        readAt.set(usage.readAt / 1000);
        for (const [namespace, used] of usage.namespaces) {
          runs.set({ namespace }, used.runs);
          recordBytes.set({ namespace }, used.recordBytes);
          keptResultBytes.set({ namespace }, used.keptResultBytes);
          for (const [quota, value] of Object.entries(limitsOf(namespace))) if (value !== null) limit.set({ namespace, quota }, value);
        }
      },
    });
    const readAt = new Gauge({
      name: 'runlet_results_usage_read_timestamp_seconds',
      help: 'When the results store’s size and usage were last read (Unix time).',
      registers: [this.registry],
    });
    const runs = new Gauge({
      name: 'runlet_results_namespace_runs',
      help: 'Runs a namespace keeps in the results store.',
      labelNames: ['namespace'] as const,
      registers: [this.registry],
    });
    const recordBytes = new Gauge({
      name: 'runlet_results_namespace_record_bytes',
      help: 'Bytes of run records (their JSON) a namespace keeps in the results store.',
      labelNames: ['namespace'] as const,
      registers: [this.registry],
    });
    const keptResultBytes = new Gauge({
      name: 'runlet_results_namespace_kept_result_bytes',
      help: 'Bytes of kept results (their JSON) a namespace keeps in the results store.',
      labelNames: ['namespace'] as const,
      registers: [this.registry],
    });
    const limit = new Gauge({
      name: 'runlet_results_namespace_quota',
      help: 'A namespace’s quota in the results store, by quota (runs, recordBytes, keptResultBytes); absent: no limit.',
      labelNames: ['namespace', 'quota'] as const,
      registers: [this.registry],
    });
    const namespaceGauges = [runs, recordBytes, keptResultBytes];
  }

  readonly desiredReplicas = new Gauge({
    name: 'runlet_autoscaler_desired_replicas',
    help: 'Replicas the autoscaler wants for an App, at its last decision.',
    labelNames: ['namespace', 'app'] as const,
    registers: [this.registry],
  });

  readonly scalingDecisions = new Counter({
    name: 'runlet_autoscaler_scalings_total',
    help: 'Changes of an App’s replicas by the autoscaler, by direction and reason (PanicBurst, CoolingDown, IdleToZero, ColdStart, …).',
    labelNames: ['namespace', 'app', 'direction', 'reason'] as const,
    registers: [this.registry],
  });

  /** What the scaler reports (autoscaling/scaler.ts). */
  readonly scaling: ScalerMetrics = {
    desired: (app, replicas) => this.desiredReplicas.set({ namespace: app.metadata.namespace, app: app.metadata.name }, replicas),
    decided: (app, decision, from) =>
      this.scalingDecisions.inc({
        namespace: app.metadata.namespace,
        app: app.metadata.name,
        direction: decision.desiredReplicas > from ? 'up' : 'down',
        reason: decision.reason,
      }),
  };

  /** What the holder reports while the operator hosts it (activator/metrics.ts). */
  readonly held = new HeldCallMetrics(this.registry);

  watchRestarted(resource: string, reason: RestartReason): void {
    this.watchRestarts.inc({ resource, reason });
  }
}
