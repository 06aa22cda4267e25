// What the autoscaler's decision takes in and gives out (operator/autoscaling/decide.ts). Times are
// milliseconds since the epoch on the caller's clock.

/** One App's load at one moment: the sum over its replicas' reports, plus the calls held while at zero. */
export interface LoadSample {
  at: number;
  /** Replicas whose load report is in this sample. */
  replicasReporting: number;
  /** Replicas ready to take calls, as the reports (or the Endpoints) show them. */
  readyReplicas: number;
  /** Calls running in the replicas. */
  inFlight: number;
  /** The most calls running and queued at once in the replicas' last second, summed over them. */
  peakCalls: number;
  /** Calls admitted by the replicas' sidecars and waiting for a slot. */
  queued: number;
  /** Calls started per second, summed over the replicas. */
  requestsPerSecond: number;
  /** Calls waiting at the scale-to-zero holder for a replica (async calls waiting to be started included). */
  held: number;
}

/** The App's Deployment as the scale subresource and its status show it. */
export interface DeploymentScale {
  /** spec.replicas: what was last asked for. */
  replicas: number;
  readyReplicas: number;
}

/**
 * stable: following the stable window; panic: a burst, following the panic window and not scaling down;
 * cold: starting from zero, or working off the calls that waited during the cold start; idle: at (or going to) zero.
 */
export type ScalingMode = 'stable' | 'panic' | 'cold' | 'idle';

/** A short machine word for App.status and Events; `message` says the same for a person, with numbers. */
export type ScalingReason =
  /** At zero, nothing waits. */
  | 'Idle'
  /** Calls wait at zero: the first replica is asked for. */
  | 'ColdStart'
  /** Replicas were asked for and none is ready yet; none is removed before one has served. */
  | 'WaitingForReady'
  /** A start from zero had no ready replica by its deadline and no call waits: back to zero. */
  | 'NeverReady'
  /** The first replica is working off the calls that waited during its start; they do not count as new load. */
  | 'ColdStartBacklog'
  /** No load sample in the stable window: the replicas are kept as they are. */
  | 'NoLoadReported'
  /** The replicas the stable window's load needs. */
  | 'StableLoad'
  /** A burst: the panic window's load needs at least twice the ready replicas. */
  | 'PanicBurst'
  /** Fewer replicas would do, but not yet for the whole cooldown. */
  | 'CoolingDown'
  /** minReplicas 0 and no call now, but not yet for the whole cooldown: one replica stays. */
  | 'IdleCountdown'
  /** No call for the whole cooldown: to zero. */
  | 'IdleToZero'
  | 'AtMinimum'
  | 'AtMaximum';

export interface ScalingDecision {
  desiredReplicas: number;
  mode: ScalingMode;
  reason: ScalingReason;
  message: string;
  /** The load over the stable and the panic window, in the metric's units; undefined without samples there. */
  stableLoad: number | undefined;
  panicLoad: number | undefined;
}
