// The autoscaler's loop, run by the leader alone: every tick, for each autoscaled App, the load its replicas
// report goes to the App's decider; a change of the replicas wanted is written to the Deployment's scale
// subresource, recorded in App.status (desiredReplicas, lastScaling) and told as an Event. The ticks cost
// nothing but memory reads while no decision changes: the API server sees writes per decision, not per tick.
import type { Logger } from 'pino';
import type { App, AppStatus, ScalingDecisionRecord } from '../../crds/app-schema.ts';
import type { KubeApi } from '../../kube/client.ts';
import { applyAppDefaults, validateApp } from '../../crds/validate.ts';
import { isNotFound } from '../../kube/errors.ts';
import { metaTime, resourcePath } from '../../kube/objects.ts';
import { objectKey } from '../../kube/watch.ts';
import { childName } from '../render/names.ts';
import type { AppLoad } from './app-load.ts';
import type { HeldDemand } from './held-demand.ts';
import { AppAutoscaler, type DeploymentScale, type LoadSample, type ScalingDecision } from './decide.ts';
import { autoscales, FIXED_SCALING_REASON, type ScaledDeployment } from './replicas-owner.ts';
import { scalingSettingsOf, type ScalingSettings } from './settings.ts';

/** The Events recorder the scaler tells its decisions to. */
export interface ScalingEvents {
  /** An Event on the App (kube/event-recorder.ts: repeats counted, bursts bounded). */
  record(app: App, note: { type: 'Normal' | 'Warning'; reason: string; message: string }): void;
}

export interface ScalerMetrics {
  decided(app: App, decision: ScalingDecision, from: number): void;
  desired(app: App, replicas: number): void;
}

export interface ScalerOptions {
  /** Applies and patches as the autoscaler's field manager. */
  api: KubeApi;
  apps: { list(): App[] };
  deployments: { get(namespace: string, name: string): ScaledDeployment | undefined };
  /** What the replicas' sidecars report (app-load.ts). */
  loads: { get(namespace: string, app: string): AppLoad };
  /** Calls waiting for a replica at the scale-to-zero holder (held-demand.ts). Default none. */
  held?: HeldDemand['held'];
  /** Knative's stable window (the panic window is a tenth of it). Default 60 s; tests shorten it. */
  stableWindowMs?: number;
  /**
   * A holder takes the calls of an App at zero (activator/holder.ts). Without one, nothing would answer
   * them, so `minReplicas: 0` is kept at one replica. Default true.
   */
  scalesToZero?: boolean;
  events: ScalingEvents;
  metrics?: ScalerMetrics;
  logger: Logger;
  /** Epoch ms. Default Date.now. */
  clock?: () => number;
  /** Default 500 ms: a burst's samples are acted on within half a second of their arrival. */
  tickMs?: number;
}

/** How long a scale write may take to come back through the Deployment watch before the App is decided again. */
const WATCH_LAG_BOUND_MS = 10_000;

interface CheckedSpec {
  generation: number;
  uid: string | undefined;
  /** With its defaults applied. */
  app: App;
}

interface Tracked {
  autoscaler: AppAutoscaler;
  /** The App's generation whose settings it was last given. */
  generation: number;
  /** What this leader last wrote to the scale subresource (or found): a different `spec.replicas` is someone else's. */
  written: number;
  /** Until the watch shows the write (or this time passes), the App is not decided again. */
  awaitingWatchUntil: number;
  /** A scale write under way: the next tick leaves this App alone. */
  busy: boolean;
}

export class Scaler {
  readonly #options: ScalerOptions;
  readonly #clock: () => number;
  readonly #tracked = new Map<string, Tracked>();
  readonly #specs = new Map<string, CheckedSpec & { valid: boolean }>();
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
    this.#specs.clear();
  }

  /** Resolves once the writes in hand have ended (tests step the clock between ticks with it). */
  async settled(): Promise<void> {
    await Promise.allSettled(this.#inFlight);
  }

  /** One round of decisions (the timer's; tests call it to step an injected clock). */
  tick(): void {
    const now = this.#clock();
    /** Autoscaled Apps decided this tick, and every App listed (whose checked spec is kept). */
    const seen = new Set<string>();
    const listed = new Set<string>();
    for (const stored of this.#options.apps.list()) {
      if (stored.metadata.deletionTimestamp !== undefined) continue;
      const key = objectKey(stored.metadata.namespace, stored.metadata.name);
      listed.add(key);
      const spec = this.#specOf(key, stored);
      if (spec === undefined || !autoscales(spec.app.spec.scaling)) continue;
      const app = spec.app;
      seen.add(key);
      const deployment = this.#options.deployments.get(app.metadata.namespace!, childName(app));
      if (deployment?.spec?.replicas === undefined) continue;
      const current = { replicas: deployment.spec.replicas, readyReplicas: deployment.status?.readyReplicas ?? 0 };
      const tracked = this.#trackedFor(key, spec, now, current);
      tracked.autoscaler.observe(this.#sample(app, now, current.readyReplicas));
      if (tracked.busy || (current.replicas !== tracked.written && now < tracked.awaitingWatchUntil)) continue;
      const decision = tracked.autoscaler.decide(now, current);
      this.#options.metrics?.desired(app, decision.desiredReplicas);
      // What the decision keeps is this leader's too, whoever wrote it (a holder's wake from zero).
      if (decision.desiredReplicas === current.replicas) tracked.written = current.replicas;
      if (decision.desiredReplicas !== current.replicas) {
        const overridden = tracked.written !== current.replicas;
        this.#inHand(tracked, key, this.#scale(app, tracked, current.replicas, decision, overridden, now));
      } else if (stored.status?.lastScaling?.reason === FIXED_SCALING_REASON) {
        // Was fixed, now autoscaled at the same size: the Fixed scaling would stay in `kubectl get apps`.
        const lastScaling = { time: metaTime(new Date(now)), from: current.replicas, to: decision.desiredReplicas, reason: decision.reason, message: decision.message };
        this.#inHand(tracked, key, this.#writeStatus(app, { desiredReplicas: decision.desiredReplicas, lastScaling }));
      } else if (stored.status?.desiredReplicas !== decision.desiredReplicas) {
        // (The stored App's status: `app` is its spec, defaulted, as first seen at this generation.)
        // Taken over at the right size: the status says so once, for `kubectl get apps`.
        this.#inHand(tracked, key, this.#writeStatus(app, { desiredReplicas: decision.desiredReplicas }));
      }
    }
    for (const [key, tracked] of this.#tracked) {
      if (seen.has(key) || tracked.busy) continue;
      this.#tracked.delete(key);
    }
    for (const key of this.#specs.keys()) if (!listed.has(key)) this.#specs.delete(key);
  }

  /** A write for one App: none other for it starts before it ends; a failure is retried by a later tick. */
  #inHand(tracked: Tracked, key: string, work: Promise<void>): void {
    tracked.busy = true;
    const done = work
      .catch((error: unknown) => this.#options.logger.warn({ app: key, err: error }, 'autoscaler write failed; a later tick tries again'))
      .finally(() => {
        tracked.busy = false;
        this.#inFlight.delete(done);
      });
    this.#inFlight.add(done);
  }

  /**
   * The App with its defaults, checked once per generation (the reconciler refuses an invalid one; the
   * scaler leaves it alone). The cache holds what the API server stores, which an older server or the
   * test server may not have defaulted.
   */
  #specOf(key: string, stored: App): CheckedSpec | undefined {
    const generation = stored.metadata.generation ?? 0;
    const known = this.#specs.get(key);
    if (known?.generation === generation && known.uid === stored.metadata.uid) return known.valid ? known : undefined;
    const valid = validateApp({ ...stored, status: undefined }).length === 0;
    const checked: CheckedSpec & { valid: boolean } = { generation, uid: stored.metadata.uid, app: valid ? (applyAppDefaults(stored) as App) : stored, valid };
    this.#specs.set(key, checked);
    return valid ? checked : undefined;
  }

  #trackedFor(key: string, spec: CheckedSpec, now: number, deployment: DeploymentScale): Tracked {
    const existing = this.#tracked.get(key);
    if (existing !== undefined) {
      if (existing.generation !== spec.generation) {
        existing.autoscaler.updateSettings(this.#settingsOf(spec.app));
        existing.generation = spec.generation;
        this.#explainKeptFromZero(spec.app);
      }
      return existing;
    }
    this.#explainKeptFromZero(spec.app);
    const autoscaler = new AppAutoscaler(this.#settingsOf(spec.app), { now, deployment });
    // The size found at takeover is taken as this leader's own: a change it did not write is someone else's.
    const tracked: Tracked = { autoscaler, generation: spec.generation, written: deployment.replicas, awaitingWatchUntil: 0, busy: false };
    this.#tracked.set(key, tracked);
    return tracked;
  }

  /** Says why an App with `minReplicas: 0` never goes to zero here: once per leadership and generation. */
  #explainKeptFromZero(app: App): void {
    if (this.#options.scalesToZero !== false || app.spec.scaling.minReplicas !== 0) return;
    const message =
      'minReplicas is 0, but the operator runs without its holder (holder.enabled: false, or runlet operator --holder off), ' +
      'so nothing would answer calls while the App has no replica: it is kept at one replica';
    this.#options.events.record(app, { type: 'Warning', reason: 'ScaleToZeroUnavailable', message });
    this.#options.logger.warn({ app: `${app.metadata.namespace}/${app.metadata.name}` }, message);
  }

  #settingsOf(app: App): ScalingSettings {
    const settings = scalingSettingsOf(app.spec.scaling);
    const stableWindowMs = this.#options.stableWindowMs ?? settings.stableWindowMs;
    const minReplicas = this.#options.scalesToZero === false ? Math.max(1, settings.minReplicas) : settings.minReplicas;
    return { ...settings, minReplicas, stableWindowMs, panicWindowMs: stableWindowMs / 10 };
  }

  /**
   * The App's load now. Concurrency is the replicas' average over their last second (calls running and
   * queued, sampled every 100 ms by each sidecar): a count at the instant of a RunLog write would miss calls
   * of a few milliseconds altogether.
   */
  #sample(app: App, now: number, readyReplicas: number): LoadSample {
    const namespace = app.metadata.namespace!;
    const load = this.#options.loads.get(namespace, app.metadata.name);
    return {
      at: now,
      replicasReporting: load.replicasReporting,
      readyReplicas,
      inFlight: load.averageConcurrency,
      peakCalls: load.peakConcurrency,
      queued: 0,
      requestsPerSecond: load.requestsPerSecond,
      held: this.#options.held?.(namespace, app.metadata.name) ?? 0,
    };
  }

  async #scale(app: App, tracked: Tracked, from: number, decision: ScalingDecision, overridden: boolean, now: number): Promise<void> {
    const { api, events, logger } = this.#options;
    const namespace = app.metadata.namespace!;
    await api.mergePatch(resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace, name: childName(app) }, 'scale'), { spec: { replicas: decision.desiredReplicas } });
    tracked.written = decision.desiredReplicas;
    tracked.awaitingWatchUntil = this.#clock() + WATCH_LAG_BOUND_MS;
    const { minReplicas, maxReplicas } = app.spec.scaling;
    if (overridden) {
      events.record(app, {
        type: 'Warning',
        reason: 'ScaleOverridden',
        message: `spec.replicas of Deployment ${childName(app)} was set to ${from} outside Runlet (kubectl scale?); the App autoscales between ${minReplicas} and ${maxReplicas} replicas, so it is set to ${decision.desiredReplicas}. Change [scaling] in service.toml (spec.scaling) instead.`,
      });
    }
    events.record(app, { type: 'Normal', reason: decision.reason, message: `${from} → ${decision.desiredReplicas} replicas: ${decision.message}` });
    this.#options.metrics?.decided(app, decision, from);
    logger.info({ app: `${namespace}/${app.metadata.name}`, from, to: decision.desiredReplicas, reason: decision.reason }, decision.message);
    const lastScaling: ScalingDecisionRecord = {
      time: metaTime(new Date(now)),
      from,
      to: decision.desiredReplicas,
      reason: decision.reason,
      message: decision.message,
    };
    await this.#writeStatus(app, { desiredReplicas: decision.desiredReplicas, lastScaling });
  }

  /** The autoscaler's part of App.status (merge-patched: the operator's conditions and counters stay). */
  async #writeStatus(app: App, status: Pick<AppStatus, 'desiredReplicas' | 'lastScaling'>): Promise<void> {
    const path = resourcePath({ apiVersion: app.apiVersion, kind: app.kind, namespace: app.metadata.namespace, name: app.metadata.name }, 'status');
    await this.#options.api.mergePatch(path, { status }).catch((error: unknown) => {
      if (!isNotFound(error)) throw error;
    });
  }
}
