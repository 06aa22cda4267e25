// One sidecar replica: the apps it fronts, how runs are recorded, admitted, forwarded and drained. Both the
// pod sidecar (sidecar/main.ts) and `runlet dev` compose this; only the run store and the apps differ.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ActiveRuns } from './active-runs.ts';
import type { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import type { AppRegistry, AppTarget } from './apps.ts';
import { SidecarMetrics } from './metrics.ts';
import type { RunStore } from './runs/store.ts';
import { DEFAULT_REQUEST_BUFFER_BYTES, RequestBudget } from '../run-request/request-budget.ts';
import { RunRecorder } from './runs/recorder.ts';
import { WebhookDeliverer, type DelivererOptions } from './webhook/deliver.ts';
import { WebhookForwarder } from './webhook-forwarding.ts';
import { StoreRefusalLog } from './runs/store-refusal-log.ts';

export interface ReplicaOptions {
  apps: AppRegistry;
  store: RunStore;
  /** The pod name, or the host name in local mode; written on every run record. */
  replicaName: string;
  logger: Logger;
  bodyLimitBytes?: number;
  /** The longest pause while a request's body arrives (run-request/request-timeouts.ts has the default). */
  bodyTimeoutMs?: number;
  /** The longest a request read into memory may take to arrive, head and body (the default is there too). */
  requestDeadlineMs?: number;
  /** What all connections may hold of requests still arriving (run-request/request-budget.ts has the default). */
  requestBufferBytes?: number;
  webhooks?: DelivererOptions;
  /** How long a caller may read nothing of an answer written as it comes (active-runs.ts has the default). */
  clientStallTimeoutMs?: number;
  /** Where the sidecar's metrics register; shared with the run store's own. Default: a new registry. */
  registry?: Registry;
  /** Verifies callers' bearer tokens; absent: the run interface is open (loopback `runlet dev`, auth off). */
  auth?: RunAuthenticator;
  /** Shared with the holder: vouches for a held call's run id and wait (auth/held-run.ts). Absent: none accepted. */
  holderKey?: Uint8Array;
}

/** Deliveries still pending when drain's bound passes get this much more before they are abandoned. */
const WEBHOOK_DRAIN_EXTRA_MS = 15_000;

export class Replica {
  readonly apps: AppRegistry;
  readonly store: RunStore;
  readonly logger: Logger;
  readonly bodyLimitBytes: number | undefined;
  readonly bodyTimeoutMs: number | undefined;
  readonly requestDeadlineMs: number | undefined;
  /** Shared by the run port's front and node:http's body reads: one budget per replica, as one run port. */
  readonly requestBudget: RequestBudget;
  readonly auth: RunAuthenticator | null;
  readonly holderKey: Uint8Array | null;
  readonly recorder: RunRecorder;
  readonly activeRuns: ActiveRuns;
  readonly metrics: SidecarMetrics;
  readonly deliverer: WebhookDeliverer;
  readonly webhooks: WebhookForwarder;
  /** Why async calls are refused, logged (sparingly) beside the refusals metric. */
  readonly storeRefusals: StoreRefusalLog;
  #drain: Promise<void> | null = null;
  /** When the drain ended (performance.now()), null before. */
  #drainedAt: number | null = null;

  constructor(options: ReplicaOptions) {
    this.apps = options.apps;
    this.store = options.store;
    this.logger = options.logger;
    this.bodyLimitBytes = options.bodyLimitBytes;
    this.bodyTimeoutMs = options.bodyTimeoutMs;
    this.requestDeadlineMs = options.requestDeadlineMs;
    this.requestBudget = new RequestBudget(options.requestBufferBytes ?? DEFAULT_REQUEST_BUFFER_BYTES);
    this.auth = options.auth ?? null;
    this.holderKey = options.holderKey ?? null;
    this.recorder = new RunRecorder(options.store, options.replicaName);
    this.activeRuns = new ActiveRuns(options.clientStallTimeoutMs);
    this.metrics = new SidecarMetrics({
      inFlight: () => this.#sumOverApps((app) => app.admission.inFlight),
      queued: () => this.#sumOverApps((app) => app.admission.queued),
    }, options.registry);
    this.deliverer = new WebhookDeliverer(options.webhooks);
    this.webhooks = new WebhookForwarder(this.deliverer, this.recorder, this.metrics, options.logger);
    this.storeRefusals = new StoreRefusalLog(options.logger);
    options.store.deliverOwedWebhooks?.((record) => this.webhooks.forwardOwed(record));
  }

  get draining(): boolean {
    return this.#drain !== null;
  }

  /** Ready for new runs: not draining, and every app's runtime attached. */
  get ready(): boolean {
    if (this.draining) return false;
    for (const app of this.apps.all()) if (!app.ready) return false;
    return true;
  }

  /** How long ago the drain ended; null while not drained (or still draining). */
  drainedForMs(now = performance.now()): number | null {
    return this.#drainedAt === null ? null : now - this.#drainedAt;
  }

  /**
   * Stops taking runs; lets accepted ones (sync, stream, async, queued) and their webhook deliveries finish
   * within the longest run time limit of the apps; stops what is left (recorded `failure`, reason
   * `shutdown`); flushes the run records. Idempotent: every caller waits for the same drain.
   */
  drain(): Promise<void> {
    // Drained even when the records could not all be flushed: the replica takes no more runs either way.
    this.#drain ??= this.#drainOnce().finally(() => (this.#drainedAt = performance.now()));
    return this.#drain;
  }

  async #drainOnce(): Promise<void> {
    const boundMs = Math.max(1000, ...[...this.apps.all()].map((app) => app.runTimeLimitMs));
    this.logger.info({ inFlight: this.activeRuns.size, boundMs }, 'draining');
    if (!(await within(this.activeRuns.idle(), boundMs))) {
      this.logger.warn({ stopping: this.activeRuns.size }, 'runs still in flight at the drain bound: stopping them');
      this.activeRuns.stopAll('shutdown');
      await this.activeRuns.idle();
    }
    if (!(await within(this.deliverer.idle(), WEBHOOK_DRAIN_EXTRA_MS))) {
      this.logger.warn({ pending: this.deliverer.pendingCount }, 'webhook deliveries still pending at the drain bound: abandoning them');
    }
    await this.deliverer.close();
    await this.auth?.close();
    await this.store.flush();
    this.logger.info('drained');
  }

  #sumOverApps(count: (app: AppTarget) => number): number {
    let sum = 0;
    for (const app of this.apps.all()) sum += count(app);
    return sum;
  }
}

/** True when `promise` settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true as const), expired]);
  } finally {
    clearTimeout(timer);
  }
}
