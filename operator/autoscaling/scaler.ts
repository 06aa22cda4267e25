// The autoscaler's loop, run by the leader alone: every tick, for each autoscaled App, the load its replicas
// report goes to the App's decider; a change of the replicas wanted is written to the Deployment's scale
// subresource, recorded in App.status (desiredReplicas, lastScaling) and told as an Event. The ticks cost
// nothing but memory reads while no decision changes: the API server sees writes per decision, not per tick.
import type { Logger } from 'pino';
import type { App, ScalingDecisionRecord } from '../../crds/app-schema.ts';
import type { KubeApi } from '../../kube/client.ts';
import { isNotFound } from '../../kube/errors.ts';
import { resourcePath } from '../../kube/objects.ts';
import { objectKey } from '../../kube/watch.ts';
import { childName } from '../render/names.ts';
import { autoscales, type ScaledDeployment } from './replicas-owner.ts';

/** What one App's decider is asked each tick. */
export interface ScalingInput {
  now: number;
  /** The Deployment's `spec.replicas` and ready replicas, as its watch last saw them. */
  currentReplicas: number;
  readyReplicas: number;
}

export interface ScalingDecision {
  desiredReplicas: number;
  /** One CamelCase word (App.status.lastScaling.reason, the Event's reason). */
  reason: string;
  message: string;
}

export interface AppDecider {
  decide(input: ScalingInput): ScalingDecision;
}

export interface ScalingEvents {
  /** An Event on the App (deduplicated by the recorder). */
  record(app: App, type: 'Normal' | 'Warning', reason: string, message: string): void;
}

export interface ScalerMetrics {
  decided(app: App, decision: ScalingDecision, from: number): void;
  desired(app: App, replicas: number): void;
  forget(app: App): void;
}

export interface ScalerOptions {
  /** Applies and patches as the autoscaler's field manager. */
  api: KubeApi;
  apps: { list(): App[] };
  deployments: { get(namespace: string, name: string): ScaledDeployment | undefined };
  /** A decider for an App, made when the App starts autoscaling and whenever its scaling settings change. */
  deciderFor(app: App): AppDecider;
  events: ScalingEvents;
  metrics?: ScalerMetrics;
  logger: Logger;
  clock?: () => number;
  /** Default 500 ms: a burst's samples are acted on within half a second of their arrival. */
  tickMs?: number;
}

/** How long a scale write may take to come back through the Deployment watch before the App is decided again. */
const WATCH_LAG_BOUND_MS = 10_000;

interface Tracked {
  decider: AppDecider;
  /** The scaling settings the decider was made for. */
  settings: string;
  /** What this leader last wrote to the scale subresource: a different `spec.replicas` was someone else's. */
  written: number | undefined;
  /** Until the watch shows the write (or this time passes), the App is not decided again. */
  awaitingWatchUntil: number;
  /** A scale write under way: the next tick leaves this App alone. */
  busy: boolean;
}

export class Scaler {
  readonly #options: ScalerOptions;
  readonly #clock: () => number;
  readonly #tracked = new Map<string, Tracked>();
  #timer: NodeJS.Timeout | undefined;
  #inFlight = new Set<Promise<void>>();

  constructor(options: ScalerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? Date.now;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.tick(), this.#options.tickMs ?? 500);
    this.#timer.unref();
  }

  /** Stops deciding; resolves once the writes in hand have ended. A new leadership starts afresh. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.allSettled(this.#inFlight);
    this.#tracked.clear();
  }

  /** One round of decisions (the timer's; tests call it to step an injected clock). */
  tick(): void {
    const now = this.#clock();
    const seen = new Set<string>();
    for (const app of this.#options.apps.list()) {
      if (app.metadata.deletionTimestamp !== undefined || !autoscales(app.spec.scaling)) continue;
      const key = objectKey(app.metadata.namespace, app.metadata.name);
      seen.add(key);
      const deployment = this.#options.deployments.get(app.metadata.namespace!, childName(app));
      if (deployment?.spec?.replicas === undefined) continue;
      const tracked = this.#trackedFor(key, app);
      const current = deployment.spec.replicas;
      if (tracked.busy || (current !== tracked.written && now < tracked.awaitingWatchUntil)) continue;
      const decision = tracked.decider.decide({ now, currentReplicas: current, readyReplicas: deployment.status?.readyReplicas ?? 0 });
      this.#options.metrics?.desired(app, decision.desiredReplicas);
      if (decision.desiredReplicas === current) continue;
      const overridden = tracked.written !== undefined && tracked.written !== current;
      tracked.busy = true;
      const write = this.#scale(app, tracked, current, decision, overridden, now)
        .catch((error: unknown) => {
          this.#options.logger.warn({ app: key, err: error, to: decision.desiredReplicas }, 'could not scale the app; the next tick tries again');
        })
        .finally(() => {
          tracked.busy = false;
          this.#inFlight.delete(write);
        });
      this.#inFlight.add(write);
    }
    for (const [key, tracked] of this.#tracked) {
      if (seen.has(key) || tracked.busy) continue;
      this.#tracked.delete(key);
    }
  }

  #trackedFor(key: string, app: App): Tracked {
    const settings = JSON.stringify(app.spec.scaling);
    const existing = this.#tracked.get(key);
    if (existing !== undefined && existing.settings === settings) return existing;
    const tracked: Tracked = { decider: this.#options.deciderFor(app), settings, written: existing?.written, awaitingWatchUntil: 0, busy: false };
    this.#tracked.set(key, tracked);
    return tracked;
  }

  async #scale(app: App, tracked: Tracked, from: number, decision: ScalingDecision, overridden: boolean, now: number): Promise<void> {
    const { api, events, logger } = this.#options;
    const namespace = app.metadata.namespace!;
    const deploymentPath = resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace, name: childName(app) });
    await api.mergePatch(`${deploymentPath}/scale`, { spec: { replicas: decision.desiredReplicas } });
    tracked.written = decision.desiredReplicas;
    tracked.awaitingWatchUntil = this.#clock() + WATCH_LAG_BOUND_MS;
    const { minReplicas, maxReplicas } = app.spec.scaling;
    if (overridden) {
      events.record(app, 'Warning', 'ScaleOverridden',
        `spec.replicas of Deployment ${childName(app)} was set to ${from} outside Runlet (kubectl scale?); the App autoscales between ${minReplicas} and ${maxReplicas} replicas, so it is set to ${decision.desiredReplicas}. Change [scaling] in service.toml (spec.scaling) instead.`);
    }
    events.record(app, 'Normal', decision.reason, `${from} → ${decision.desiredReplicas} replicas: ${decision.message}`);
    this.#options.metrics?.decided(app, decision, from);
    logger.info({ app: `${namespace}/${app.metadata.name}`, from, to: decision.desiredReplicas, reason: decision.reason }, decision.message);
    const lastScaling: ScalingDecisionRecord = {
      time: new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      from,
      to: decision.desiredReplicas,
      reason: decision.reason,
      message: decision.message,
    };
    const appPath = resourcePath({ apiVersion: app.apiVersion, kind: app.kind, namespace, name: app.metadata.name }, 'status');
    await api.mergePatch(appPath, { status: { desiredReplicas: decision.desiredReplicas, lastScaling } }).catch((error: unknown) => {
      if (!isNotFound(error)) throw error;
    });
  }
}
