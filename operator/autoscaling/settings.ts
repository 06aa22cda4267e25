// An App's [scaling] settings in the autoscaler's units: milliseconds, and a per-replica target in the units of
// the load it is compared with (calls, or requests per second). The windows and the panic threshold are not
// settings: they are Knative's defaults (config-autoscaler: stable-window 60s, panic-window-percentage 10,
// panic-threshold-percentage 200), which its users rarely change and which ours need not learn.
import type { AppScaling, ScalingMetric } from '../../crds/app-schema.ts';

/**
 * The target when `scalingTarget` is not set. 70 % utilisation is Knative's (container-concurrency-target-
 * percentage): replicas are added before every slot is taken, so a burst meets free slots while they start.
 * 10 requests/s: a replica takes `replicaConcurrency` (4 by default) calls at once, and 70 % of 4 slots kept busy
 * by calls of about 300 ms — typical of a small Python function — is about 10 calls started per second.
 * Knative's 200 fits servers taking hundreds of calls at once, not Runlet's few. Whoever picks this metric knows
 * their calls' duration and should set the target.
 */
export const DEFAULT_SCALING_TARGET: Readonly<Record<ScalingMetric, number>> = {
  concurrency_utilization: 70,
  requests_per_second: 10,
};

export const STABLE_WINDOW_MS = 60_000;
/** Knative's panic window: 10 % of the stable window. */
export const PANIC_WINDOW_MS = STABLE_WINDOW_MS / 10;
/** Panic when the panic window asks for at least this many times the ready replicas. */
export const PANIC_THRESHOLD = 2;
/** Load samples are averaged per bucket of this width; the windows are whole buckets. */
export const BUCKET_MS = 1000;

export interface ScalingSettings {
  minReplicas: number;
  maxReplicas: number;
  metric: ScalingMetric;
  /** The load one replica should carry: calls in flight and queued, or requests per second. Above 0. */
  targetPerReplica: number;
  /**
   * The calls waiting at zero one replica is asked for (replicasForWaiting): the target in calls, whatever the
   * metric — requests per second count no waiting call, so with that metric it is replicaConcurrency.
   */
  waitingPerReplica: number;
  cooldownMs: number;
  coldStartTimeoutMs: number;
  stableWindowMs: number;
  panicWindowMs: number;
  panicThreshold: number;
}

/** The autoscaler's settings of a valid (defaulted) App's `spec.scaling`. */
export function scalingSettingsOf(scaling: AppScaling): ScalingSettings {
  const target = scaling.scalingTarget ?? DEFAULT_SCALING_TARGET[scaling.scalingMetric];
  const concurrencyTarget = (scaling.replicaConcurrency * target) / 100;
  return {
    minReplicas: scaling.minReplicas,
    maxReplicas: scaling.maxReplicas,
    metric: scaling.scalingMetric,
    targetPerReplica: scaling.scalingMetric === 'concurrency_utilization' ? concurrencyTarget : target,
    waitingPerReplica: scaling.scalingMetric === 'concurrency_utilization' ? concurrencyTarget : scaling.replicaConcurrency,
    cooldownMs: scaling.cooldown * 1000,
    coldStartTimeoutMs: scaling.coldStartTimeout * 1000,
    stableWindowMs: STABLE_WINDOW_MS,
    panicWindowMs: PANIC_WINDOW_MS,
    panicThreshold: PANIC_THRESHOLD,
  };
}

/**
 * The replicas a start from zero asks for while `waiting` calls wait for one: ceil(waiting ÷ the target in
 * calls), within [max(1, minReplicas), maxReplicas]. Calls waiting now, not an average over a window: a backlog
 * that grew during a slow start is not taken for a rate (Knative serving#4344, docs/scale-to-zero.md).
 */
export function replicasForWaiting(waiting: number, settings: Pick<ScalingSettings, 'minReplicas' | 'maxReplicas' | 'waitingPerReplica'>): number {
  const needed = Math.ceil(waiting / settings.waitingPerReplica);
  return Math.min(settings.maxReplicas, Math.max(1, settings.minReplicas, needed));
}
