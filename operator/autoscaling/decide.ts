// How many replicas an App needs, from its load: Knative's KPA (knative/serving pkg/autoscaler/scaling/
// autoscaler.go), with Runlet's cold-start rules. No I/O and no clock: the caller feeds load samples and asks
// for a decision with the time and the Deployment's replicas; one AppAutoscaler per App, on the leader.
//
//   desired = ceil(load ÷ target per replica), load averaged over the stable window (60 s);
//   panic when the panic window (6 s, its newest seconds weighing most) asks for ≥ 2× the ready replicas:
//     follow the panic window, never down, until a stable window passed without that condition;
//   scale down only to the most any decision of the last `cooldown` wanted (Knative's scale-down delay);
//   to zero (minReplicas 0) only after `cooldown` without any call, counted from when a replica was ready;
//   from zero, ceil(calls waiting now ÷ target) replicas, raised while more wait before one is ready, and that
//     start's backlog is not new load once one is (decide-backlog.ts);
//   a start from zero that no replica answers within the wake deadline goes back to zero once no call waits;
//   always within [minReplicas, maxReplicas].
import { ColdStartBacklog } from './decide-backlog.ts';
import type { DeploymentScale, LoadSample, ScalingDecision, ScalingMode, ScalingReason } from './decide-types.ts';
import { BUCKET_MS, replicasForWaiting, type ScalingSettings } from './settings.ts';
import { AveragingWindow, MaxWindow, smoothingFor } from './windows.ts';

/**
 * How long a start from zero may go without a ready replica before it is given up (when no call waits):
 * Kubernetes' default `progressDeadlineSeconds`, after which the Deployment itself reports the rollout failed.
 */
export const WAKE_DEADLINE_MS = 600_000;

export type { DeploymentScale, LoadSample, ScalingDecision, ScalingMode, ScalingReason } from './decide-types.ts';

type Phase =
  /** No replica asked for. */
  | { kind: 'zero' }
  /**
   * Replicas asked for, none ready yet, since `since`; `peakCalls`: the most calls seen waiting meanwhile;
   * `givenUp`: past the wake deadline, going back to zero.
   */
  | { kind: 'waking'; since: number; peakCalls: number; givenUp?: boolean }
  /** A replica has been ready since the last start from zero. */
  | { kind: 'warm' };
type Waking = Extract<Phase, { kind: 'waking' }>;

interface Panic {
  /** When the panic condition last held. */
  lastOverAt: number;
  /** The most replicas asked for during this panic: it never scales down. */
  replicas: number;
}

/** What the windows want before the cooldown, the idle rule and the bounds. */
interface Want {
  replicas: number;
  mode: ScalingMode;
  reason: ScalingReason;
  message: string;
}

export class AppAutoscaler {
  #settings: ScalingSettings;
  readonly #load: AveragingWindow;
  #recentWants: MaxWindow;
  readonly #backlog = new ColdStartBacklog();
  #phase: Phase;
  #panic: Panic | undefined;
  #latest: LoadSample | undefined;
  /** The last moment a call was waiting, running or started, or a replica became ready after a cold start. */
  #lastBusyAt: number;

  /** `start`: when the autoscaler takes the App over, and its Deployment then. */
  constructor(settings: ScalingSettings, start: { now: number; deployment: DeploymentScale }) {
    this.#settings = settings;
    this.#load = new AveragingWindow(settings.stableWindowMs, BUCKET_MS);
    this.#recentWants = new MaxWindow(settings.cooldownMs);
    const { replicas, readyReplicas } = start.deployment;
    // Taken over with replicas none of which is ready: a start under way, maybe from zero, with no record of
    // calls waiting. Its replicas are kept until one is ready, like any start's.
    this.#phase = replicas === 0 ? { kind: 'zero' } : readyReplicas > 0 ? { kind: 'warm' } : { kind: 'waking', since: start.now, peakCalls: 0 };
    // The idle countdown starts now at the earliest: what happened before is unknown.
    this.#lastBusyAt = start.now;
  }

  get settings(): ScalingSettings {
    return this.#settings;
  }

  /** New settings (the App's spec changed). Load measured in another metric, or another cooldown, starts afresh. */
  updateSettings(next: ScalingSettings): void {
    if (next.metric !== this.#settings.metric) {
      this.#load.clear();
      this.#panic = undefined;
    }
    // A fresh window holds no scale-down for a whole cooldown (MaxWindow.coversWindow).
    if (next.cooldownMs !== this.#settings.cooldownMs) this.#recentWants = new MaxWindow(next.cooldownMs);
    this.#settings = next;
  }

  /** One load sample of the App; feed one on every tick (a window counts only the seconds that have samples). */
  observe(sample: LoadSample): void {
    if (this.#latest === undefined || sample.at >= this.#latest.at) this.#latest = sample;
    const calls = callsOf(sample);
    if (calls > 0 || sample.requestsPerSecond > 0) this.#lastBusyAt = Math.max(this.#lastBusyAt, sample.at);
    if (this.#phase.kind === 'waking') this.#phase.peakCalls = Math.max(this.#phase.peakCalls, calls);
    this.#noteReady(sample.at, sample.readyReplicas);
    // Before a replica serves, the load is calls waiting, not what replicas carry: it stays out of the windows.
    if (this.#phase.kind === 'warm') this.#load.record(sample.at, this.#backlog.discount(sample.at, this.#loadOf(sample), sample));
  }

  /** The replicas the App should have at `now`, given its Deployment. */
  decide(now: number, deployment: DeploymentScale): ScalingDecision {
    this.#noteReady(now, deployment.readyReplicas);
    // The scale to zero took effect (or someone scaled the Deployment to zero). A replica the load reports
    // still show ready means the Deployment seen is older than they are: not at zero yet.
    const atZero = deployment.replicas === 0 && deployment.readyReplicas === 0 && (this.#latest?.readyReplicas ?? 0) === 0;
    const goingToZero = this.#phase.kind === 'warm' || (this.#phase.kind === 'waking' && this.#phase.givenUp === true);
    if (goingToZero && atZero) this.#phase = { kind: 'zero' };
    const { minReplicas } = this.#settings;
    const held = this.#latest?.held ?? 0;
    // The replicas the calls waiting now need: what a start from zero asks for, and raises to while none is ready.
    const firstReplicas = replicasForWaiting(held, this.#settings);
    switch (this.#phase.kind) {
      case 'zero': {
        // Replicas asked for by someone else while at zero: a holder that woke the app for the calls it holds
        // (another operator replica's, whose count this one does not see). A start like any other.
        if (deployment.replicas > 0) {
          const waking: Waking = { kind: 'waking', since: now, peakCalls: held };
          this.#phase = waking;
          return this.#decideWaking(now, waking, deployment, firstReplicas);
        }
        if (held === 0 && minReplicas === 0) return this.#decision(0, 'idle', 'Idle', 'at zero replicas; no call waits');
        this.#phase = { kind: 'waking', since: now, peakCalls: held };
        const why = held > 0 ? `${held} calls wait at zero replicas` : `minReplicas is ${minReplicas}`;
        return this.#decision(firstReplicas, 'cold', 'ColdStart', `${why}: starting ${firstReplicas}`);
      }
      case 'waking':
        return this.#decideWaking(now, this.#phase, deployment, firstReplicas);
      case 'warm':
        return this.#decideWarm(now, deployment);
    }
  }

  #decideWaking(now: number, waking: Waking, deployment: DeploymentScale, firstReplicas: number): ScalingDecision {
    const { minReplicas, maxReplicas, coldStartTimeoutMs } = this.#settings;
    const held = this.#latest?.held ?? 0;
    const wakingMs = now - waking.since;
    // A replica that crash-loops, or cannot be scheduled, would otherwise be kept for ever: the rule that
    // nothing is removed before it served cannot tell a slow start from one that never ends. Past the
    // Deployment's own progress deadline (and the cold-start limit, so no held sync call is cut short), and
    // with no call waiting here, the app goes back to zero; the next call starts it afresh.
    const deadlineMs = Math.max(WAKE_DEADLINE_MS, coldStartTimeoutMs);
    if (waking.givenUp === true || (minReplicas === 0 && wakingMs >= deadlineMs && callsOf(this.#latest) === 0)) {
      waking.givenUp = true;
      return this.#decision(0, 'idle', 'NeverReady', `no replica ready ${Math.floor(wakingMs / 1000)} s after the start from zero, and no call waits: back to zero`);
    }
    // Calls that came during the start are demand too; none is removed before one has served.
    const keep = clamp(Math.max(firstReplicas, deployment.replicas), minReplicas, maxReplicas);
    return this.#decision(keep, 'cold', 'WaitingForReady', `${keep} replicas starting, none ready yet; ${held} calls wait`);
  }

  #decideWarm(now: number, deployment: DeploymentScale): ScalingDecision {
    const { minReplicas, maxReplicas, cooldownMs } = this.#settings;
    const want = this.#wantOfWindows(now, deployment);
    const mode = want.mode;
    let { replicas, reason, message } = want;

    if (want.reason !== 'NoLoadReported') {
      this.#recentWants.record(now, want.replicas);
      const recentMost = this.#recentWants.max(now) ?? want.replicas;
      // Taken over, or cooldown changed, less than a cooldown ago: larger wants may have gone unrecorded.
      const kept = this.#recentWants.coversWindow(now) ? recentMost : Math.max(recentMost, deployment.replicas);
      if (kept > replicas) {
        // Working off a cold start's backlog is the story worth telling while it lasts.
        if (reason !== 'ColdStartBacklog') reason = 'CoolingDown';
        message = `${message}; keeping ${kept} until fewer have sufficed for the ${cooldownMs / 1000} s cooldown`;
        replicas = kept;
      }
    }

    if (minReplicas === 0) {
      const idleMs = now - this.#lastBusyAt;
      // Idle is what the reports say: without any in the stable window, nothing is known, and nothing removed.
      if (idleMs >= cooldownMs && want.reason !== 'NoLoadReported' && callsOf(this.#latest) === 0) {
        return this.#decision(0, 'idle', 'IdleToZero', `no call for ${Math.floor(idleMs / 1000)} s (cooldown ${cooldownMs / 1000} s): to zero`, want);
      }
      if (replicas === 0) {
        replicas = 1;
        reason = 'IdleCountdown';
        message = `${message}; one replica stays until no call has come for the ${cooldownMs / 1000} s cooldown`;
      }
    }

    if (replicas > maxReplicas) return this.#decision(maxReplicas, mode, 'AtMaximum', `${message}; capped at maxReplicas ${maxReplicas}`, want);
    if (replicas < minReplicas) return this.#decision(minReplicas, mode, 'AtMinimum', `${message}; raised to minReplicas ${minReplicas}`, want);
    return this.#decision(replicas, mode, reason, message, want);
  }

  /** Knative's stable and panic windows (autoscaler.go, Scale). */
  #wantOfWindows(now: number, deployment: DeploymentScale): Want & { stableLoad?: number; panicLoad?: number } {
    const { stableWindowMs, panicWindowMs, panicThreshold, targetPerReplica } = this.#settings;
    const stableLoad = this.#load.average(now, stableWindowMs);
    if (stableLoad === undefined) {
      return { replicas: deployment.replicas, mode: 'stable', reason: 'NoLoadReported', message: `no load reported for ${stableWindowMs / 1000} s: keeping ${deployment.replicas}` };
    }
    // The panic window weighs its newest second most (Knative's weightedExponential): with a plain mean, the
    // quiet seconds before a burst hold it under the threshold for seconds (bench/results.md, burst).
    const panicLoad = this.#load.weightedAverage(now, panicWindowMs, smoothingFor(Math.ceil(panicWindowMs / BUCKET_MS))) ?? stableLoad;
    const stableReplicas = Math.ceil(stableLoad / targetPerReplica);
    const panicReplicas = Math.ceil(panicLoad / targetPerReplica);
    const ready = Math.max(1, deployment.readyReplicas);
    const overThreshold = panicReplicas / ready >= panicThreshold;

    if (overThreshold) this.#panic = { lastOverAt: now, replicas: this.#panic?.replicas ?? 0 };
    else if (this.#panic !== undefined && now - this.#panic.lastOverAt >= stableWindowMs) this.#panic = undefined;

    const load = `load ${round(stableLoad)} over ${stableWindowMs / 1000} s, ${round(panicLoad)} over ${panicWindowMs / 1000} s, target ${round(targetPerReplica)} per replica`;
    if (this.#panic !== undefined) {
      this.#panic.replicas = Math.max(this.#panic.replicas, stableReplicas, panicReplicas);
      return {
        replicas: this.#panic.replicas,
        mode: 'panic',
        reason: 'PanicBurst',
        message: `burst (${load}, ${ready} ready): ${this.#panic.replicas}, not fewer until the burst has passed`,
        stableLoad,
        panicLoad,
      };
    }
    if (this.#backlog.active(now)) {
      return {
        replicas: stableReplicas,
        mode: 'cold',
        reason: 'ColdStartBacklog',
        message: `${load}, not counting the ${this.#backlog.remaining} calls that waited during the cold start: ${stableReplicas}`,
        stableLoad,
        panicLoad,
      };
    }
    return { replicas: stableReplicas, mode: 'stable', reason: 'StableLoad', message: `${load}: ${stableReplicas}`, stableLoad, panicLoad };
  }

  #noteReady(at: number, readyReplicas: number): void {
    if (this.#phase.kind !== 'waking' || readyReplicas === 0) return;
    this.#backlog.begin(at, this.#phase.peakCalls, this.#settings.panicWindowMs);
    this.#phase = { kind: 'warm' };
    // What the windows held is from before the app went to zero.
    this.#load.clear();
    this.#recentWants = new MaxWindow(this.#settings.cooldownMs);
    this.#panic = undefined;
    // The idle countdown starts once a replica is ready: a slow start is never cut short.
    this.#lastBusyAt = Math.max(this.#lastBusyAt, at);
  }

  #loadOf(sample: LoadSample): number {
    return this.#settings.metric === 'requests_per_second' ? sample.requestsPerSecond : callsOf(sample);
  }

  #decision(
    desiredReplicas: number,
    mode: ScalingMode,
    reason: ScalingReason,
    message: string,
    loads: { stableLoad?: number; panicLoad?: number } = {},
  ): ScalingDecision {
    return { desiredReplicas, mode: desiredReplicas === 0 ? 'idle' : mode, reason, message, stableLoad: loads.stableLoad, panicLoad: loads.panicLoad };
  }
}

/** Calls waiting or running for the App; 0 without a sample. */
function callsOf(sample: LoadSample | undefined): number {
  return sample === undefined ? 0 : sample.inFlight + sample.queued + sample.held;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
