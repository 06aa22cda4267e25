// The autoscaler's decision, driven second by second against a simulated Deployment: table tests of the
// scenarios the design names (docs/autoscaling.md), and properties over random load.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AppScaling } from '../../crds/app-schema.ts';
import { AppAutoscaler, WAKE_DEADLINE_MS } from './decide.ts';
import type { DeploymentScale, LoadSample, ScalingDecision } from './decide-types.ts';
import { DEFAULT_SCALING_TARGET, scalingSettingsOf, type ScalingSettings } from './settings.ts';

const SECOND = 1000;
/** Any epoch; not a multiple of a bucket, so nothing depends on alignment. */
const T0 = 1_750_000_000_300;

function settingsOf(scaling: Partial<AppScaling>): ScalingSettings {
  return scalingSettingsOf({
    minReplicas: 1,
    maxReplicas: 10,
    replicaConcurrency: 10,
    responseGracePeriod: 900,
    cooldown: 60,
    scalingMetric: 'concurrency_utilization',
    scalingTarget: 100,
    coldStartTimeout: 60,
    ...scaling,
  });
}

interface Load {
  inFlight?: number;
  peakCalls?: number;
  queued?: number;
  held?: number;
  requestsPerSecond?: number;
}

/**
 * An App's Deployment following the autoscaler once a second: a replica asked for is ready `startSeconds`
 * later; removed replicas go at once (newest first).
 */
class Simulation {
  readonly autoscaler: AppAutoscaler;
  now = T0;
  /** When each replica is (or was) ready. */
  readyAt: number[];
  readonly decisions: ScalingDecision[] = [];
  readonly #startMs: number;

  constructor(settings: ScalingSettings, options: { replicas: number; startSeconds?: number }) {
    this.#startMs = (options.startSeconds ?? 3) * SECOND;
    this.readyAt = Array.from({ length: options.replicas }, () => T0);
    this.autoscaler = new AppAutoscaler(settings, { now: T0, deployment: this.deployment() });
  }

  deployment(): DeploymentScale {
    return { replicas: this.readyAt.length, readyReplicas: this.ready() };
  }

  ready(): number {
    return this.readyAt.filter((at) => at <= this.now).length;
  }

  /** One second: a load sample (as the replicas and the holder report it now), a decision, the Deployment follows. */
  tick(load: Load): ScalingDecision {
    this.autoscaler.observe({
      at: this.now,
      replicasReporting: this.ready(),
      readyReplicas: this.ready(),
      inFlight: load.inFlight ?? 0,
      peakCalls: load.peakCalls ?? (load.inFlight ?? 0) + (load.queued ?? 0),
      queued: load.queued ?? 0,
      requestsPerSecond: load.requestsPerSecond ?? 0,
      held: load.held ?? 0,
    });
    const decision = this.autoscaler.decide(this.now, this.deployment());
    this.decisions.push(decision);
    while (this.readyAt.length > decision.desiredReplicas) this.readyAt.pop();
    while (this.readyAt.length < decision.desiredReplicas) this.readyAt.push(this.now + this.#startMs);
    this.now += SECOND;
    return decision;
  }

  run(seconds: number, load: (second: number) => Load): ScalingDecision[] {
    return Array.from({ length: seconds }, (_, second) => this.tick(load(second)));
  }
}

const desired = (decisions: ScalingDecision[]) => decisions.map((decision) => decision.desiredReplicas);

describe('settings', () => {
  it('turns a utilisation into calls per replica, and defaults the target per metric', () => {
    expect(settingsOf({ replicaConcurrency: 10, scalingTarget: 70 }).targetPerReplica).toBe(7);
    expect(settingsOf({ replicaConcurrency: 4, scalingTarget: undefined }).targetPerReplica).toBeCloseTo(4 * 0.7, 9);
    expect(settingsOf({ scalingMetric: 'requests_per_second', scalingTarget: undefined }).targetPerReplica).toBe(DEFAULT_SCALING_TARGET.requests_per_second);
    expect(settingsOf({ scalingMetric: 'requests_per_second', scalingTarget: 2.5 }).targetPerReplica).toBe(2.5);
    expect(settingsOf({ cooldown: 90, coldStartTimeout: 30 })).toMatchObject({ cooldownMs: 90_000, coldStartTimeoutMs: 30_000, stableWindowMs: 60_000, panicWindowMs: 6000 });
  });
});

describe('cold start from zero', () => {
  // Knative's scenario: 30 calls arrive at an app at zero; a replica takes 10 at once (target 100 % of 10) and a
  // call takes 100 ms, so one replica serves all 30 in 300 ms. The replica is ready 3 s after it is asked for.
  // Sampled once a second, the replica's first report shows the 30 (10 in flight, 20 queued); the next, nothing.
  const coldBurst = (sim: Simulation, calls: number, sustained: boolean) => (second: number): Load => {
    if (sim.ready() === 0) return { held: calls };
    const readySecond = (sim.readyAt[0]! - T0) / SECOND;
    if (second === readySecond) return { inFlight: 10, queued: calls - 10, requestsPerSecond: 10 };
    if (sustained) return { inFlight: 10, queued: calls - 10, requestsPerSecond: 100 };
    return second === readySecond + 1 ? { requestsPerSecond: calls - 10 } : {};
  };

  it('starts ceil(30 ÷ 10) = 3 replicas for 30 waiting calls, never more though the backlog reaches them at once (serving#4344), and goes back to zero after the cooldown', () => {
    const sim = new Simulation(settingsOf({ minReplicas: 0 }), { replicas: 0 });
    const decisions = sim.run(120, coldBurst(sim, 30, false));
    expect(decisions[0]).toMatchObject({ desiredReplicas: 3, mode: 'cold', reason: 'ColdStart' });
    expect(decisions[1]).toMatchObject({ desiredReplicas: 3, mode: 'cold', reason: 'WaitingForReady' });
    expect(decisions[3]).toMatchObject({ desiredReplicas: 3, mode: 'cold', reason: 'ColdStartBacklog' });
    expect(Math.max(...desired(decisions))).toBe(3);
    expect(decisions.some((decision) => decision.mode === 'panic')).toBe(false);
    // Ready at 3 s, the last calls started by the sample at 4 s: to zero a cooldown (60 s) after.
    const zeroAt = desired(decisions).indexOf(0, 1);
    expect(zeroAt).toBe(4 + 60);
    expect(decisions[zeroAt]).toMatchObject({ mode: 'idle', reason: 'IdleToZero' });
  });

  it('gives a burst at zero the replicas its waiting calls need from the start, and keeps them while its load lasts', () => {
    const sim = new Simulation(settingsOf({ minReplicas: 0 }), { replicas: 0 });
    const decisions = sim.run(30, coldBurst(sim, 30, true));
    expect(desired(decisions).every((replicas) => replicas === 3)).toBe(true);
  });

  it('raises a start from zero as more calls wait before a replica is ready, within maxReplicas, and never lowers it then', () => {
    // replica_concurrency 4 at 70 %: 2.8 calls per replica.
    const autoscaler = new AppAutoscaler(settingsOf({ minReplicas: 0, maxReplicas: 5, replicaConcurrency: 4, scalingTarget: 70 }), { now: T0, deployment: { replicas: 0, readyReplicas: 0 } });
    const step = (second: number, held: number, replicas: number) => {
      autoscaler.observe({ at: T0 + second * SECOND, replicasReporting: 0, readyReplicas: 0, inFlight: 0, peakCalls: 0, queued: 0, requestsPerSecond: 0, held });
      return autoscaler.decide(T0 + second * SECOND, { replicas, readyReplicas: 0 });
    };
    expect(step(0, 5, 0)).toMatchObject({ desiredReplicas: 2, reason: 'ColdStart' });
    expect(step(1, 8, 2)).toMatchObject({ desiredReplicas: 3, reason: 'WaitingForReady' });
    expect(step(2, 50, 3)).toMatchObject({ desiredReplicas: 5, reason: 'WaitingForReady' });
    expect(step(3, 1, 5)).toMatchObject({ desiredReplicas: 5, reason: 'WaitingForReady' });
  });

  it('keeps minReplicas 0 at zero while no call waits', () => {
    const sim = new Simulation(settingsOf({ minReplicas: 0 }), { replicas: 0 });
    const decisions = sim.run(5, () => ({}));
    expect(decisions.map((decision) => [decision.desiredReplicas, decision.reason])).toEqual(Array(5).fill([0, 'Idle']));
  });

  it('never removes a replica that has not been ready, however long its start', () => {
    const sim = new Simulation(settingsOf({ minReplicas: 0, cooldown: 10 }), { replicas: 0, startSeconds: 600 });
    const decisions = sim.run(300, (second) => (second === 0 ? { held: 1 } : {}));
    expect(desired(decisions).every((replicas) => replicas === 1)).toBe(true);
    expect(decisions.at(-1)).toMatchObject({ reason: 'WaitingForReady', mode: 'cold' });
  });

  it('gives up a start from zero that no replica answers by the wake deadline, once no call waits, and starts afresh on the next call', () => {
    const sim = new Simulation(settingsOf({ minReplicas: 0, cooldown: 10 }), { replicas: 0, startSeconds: 100_000 });
    const deadline = WAKE_DEADLINE_MS / SECOND;
    // One call held 2 minutes (a long cold-start limit), then nothing; the replica never becomes ready.
    const decisions = sim.run(deadline + 10, (second) => (second < 120 ? { held: 1 } : second === deadline + 5 ? { held: 1 } : {}));
    expect(desired(decisions.slice(0, deadline)).every((replicas) => replicas === 1)).toBe(true);
    expect(decisions[deadline]).toMatchObject({ desiredReplicas: 0, mode: 'idle', reason: 'NeverReady' });
    // The simulated Deployment followed at once: at zero, and the next call starts a replica again.
    expect(decisions[deadline + 5]).toMatchObject({ desiredReplicas: 1, reason: 'ColdStart' });
  });

  it('does not give up a start while a call still waits for it, nor one of an app with minReplicas above 0', () => {
    const held = new Simulation(settingsOf({ minReplicas: 0, coldStartTimeout: 900 }), { replicas: 0, startSeconds: 100_000 });
    const heldDecisions = held.run(WAKE_DEADLINE_MS / SECOND + 60, () => ({ held: 1 }));
    expect(desired(heldDecisions).every((replicas) => replicas === 1)).toBe(true);
    const floor = new Simulation(settingsOf({ minReplicas: 1 }), { replicas: 0, startSeconds: 100_000 });
    const floorDecisions = floor.run(WAKE_DEADLINE_MS / SECOND + 60, () => ({}));
    expect(desired(floorDecisions).every((replicas) => replicas === 1)).toBe(true);
    expect(floorDecisions.at(-1)).toMatchObject({ reason: 'WaitingForReady' });
  });

  it('keeps going back to zero until the Deployment is there, without taking its own pending write for a wake', () => {
    const autoscaler = new AppAutoscaler(settingsOf({ minReplicas: 0 }), { now: T0, deployment: { replicas: 0, readyReplicas: 0 } });
    const sample = (at: number, held: number) => ({ at, replicasReporting: 0, readyReplicas: 0, inFlight: 0, peakCalls: 0, queued: 0, requestsPerSecond: 0, held });
    autoscaler.observe(sample(T0, 1));
    expect(autoscaler.decide(T0, { replicas: 0, readyReplicas: 0 }).reason).toBe('ColdStart');
    const late = T0 + WAKE_DEADLINE_MS;
    autoscaler.observe(sample(late, 0));
    expect(autoscaler.decide(late, { replicas: 1, readyReplicas: 0 })).toMatchObject({ desiredReplicas: 0, reason: 'NeverReady' });
    // The write of 0 not yet seen: still 0, not a wake by someone else.
    expect(autoscaler.decide(late + SECOND, { replicas: 1, readyReplicas: 0 })).toMatchObject({ desiredReplicas: 0, reason: 'NeverReady' });
    expect(autoscaler.decide(late + 2 * SECOND, { replicas: 0, readyReplicas: 0 })).toMatchObject({ desiredReplicas: 0, reason: 'Idle' });
    // Now at zero, a holder's wake (0 → 1) is a start again.
    expect(autoscaler.decide(late + 3 * SECOND, { replicas: 1, readyReplicas: 0 })).toMatchObject({ desiredReplicas: 1, reason: 'WaitingForReady' });
  });

  it('does not take a Deployment seen before the first replica was ready for one at zero', () => {
    const autoscaler = new AppAutoscaler(settingsOf({ minReplicas: 0 }), { now: T0, deployment: { replicas: 0, readyReplicas: 0 } });
    const sample = { replicasReporting: 0, readyReplicas: 0, inFlight: 0, peakCalls: 0, queued: 0, requestsPerSecond: 0, held: 0 };
    autoscaler.observe({ ...sample, at: T0, held: 5 });
    expect(autoscaler.decide(T0, { replicas: 0, readyReplicas: 0 }).desiredReplicas).toBe(1);
    autoscaler.observe({ ...sample, at: T0 + 3 * SECOND, replicasReporting: 1, readyReplicas: 1, inFlight: 5 });
    // The Deployment as a cache not yet updated shows it: the replica that reports ready is not scaled away.
    expect(autoscaler.decide(T0 + 3 * SECOND, { replicas: 0, readyReplicas: 0 })).toMatchObject({ desiredReplicas: 1, mode: 'cold' });
  });

  it('starts the idle countdown when the replica is ready, not when the call came', () => {
    const sim = new Simulation(settingsOf({ minReplicas: 0, cooldown: 10 }), { replicas: 0, startSeconds: 30 });
    // The one call gives up while the replica starts: nothing ever reaches the replica.
    const decisions = sim.run(60, (second) => (second < 5 ? { held: 1 } : {}));
    expect(desired(decisions).indexOf(0, 1)).toBe(30 + 10);
  });
});

describe('warm', () => {
  it('follows the stable window: ceil(load ÷ target), with the default 70 % target', () => {
    const sim = new Simulation(settingsOf({ scalingTarget: undefined }), { replicas: 3 });
    // 20 calls at 7 per replica: 3 replicas.
    const decisions = sim.run(70, () => ({ inFlight: 20 }));
    expect(decisions.at(-1)).toMatchObject({ desiredReplicas: 3, mode: 'stable', reason: 'StableLoad', stableLoad: 20 });
  });

  it('reacts to a burst in the first decision, in panic mode, and has what it needs once the panic window is full', () => {
    const sim = new Simulation(settingsOf({ maxReplicas: 20 }), { replicas: 1 });
    sim.run(60, () => ({ inFlight: 5 }));
    const burst = sim.run(6, () => ({ inFlight: 10, queued: 90 }));
    expect(burst[0]).toMatchObject({ mode: 'panic', reason: 'PanicBurst' });
    expect(burst[0]!.desiredReplicas).toBeGreaterThan(1);
    expect(burst.at(-1)!.desiredReplicas).toBe(10);
  });

  it('panics at a burst of just twice the ready capacity in the first decision that sees it: its newest second outweighs the calm ones', () => {
    const sim = new Simulation(settingsOf({}), { replicas: 1 });
    sim.run(60, () => ({ inFlight: 5 }));
    const burst = sim.run(3, () => ({ inFlight: 20 }));
    expect(burst.map((decision) => [decision.desiredReplicas, decision.mode])).toEqual([
      [2, 'panic'],
      [2, 'panic'],
      [2, 'panic'],
    ]);
  });

  it('decides for a burst of three times the target within a second of its first scrape, the load ramping as a sidecar averages it', () => {
    // The bench's burst (bench/scenarios/burst.ts): one replica taking 2 calls at a 100 % target, idle, then 6
    // calls at once. Each sidecar reports its calls averaged over its last second, so what the scrapes show
    // ramps from 0 to 6 over that second; the scaler samples and decides every 500 ms. A plain mean over the
    // 6 s panic window, five of whose seconds are idle, reached the threshold only about 2.5 s in.
    const settings = settingsOf({ replicaConcurrency: 2, maxReplicas: 3 });
    const autoscaler = new AppAutoscaler(settings, { now: T0, deployment: { replicas: 1, readyReplicas: 1 } });
    const deployment = { replicas: 1, readyReplicas: 1 };
    const tick = 500;
    const sample = (at: number, calls: number) => ({ at, replicasReporting: 1, readyReplicas: 1, inFlight: calls, peakCalls: calls, queued: 0, requestsPerSecond: 0, held: 0 });
    let at = T0;
    for (; at < T0 + 60 * SECOND; at += tick) {
      autoscaler.observe(sample(at, 0));
      expect(autoscaler.decide(at, deployment).desiredReplicas).toBe(1);
    }
    const burstAt = at;
    const wanted: { afterMs: number; replicas: number; mode: string }[] = [];
    for (; at < burstAt + 6 * SECOND; at += tick) {
      autoscaler.observe(sample(at, Math.min(6, (6 * (at - burstAt + tick)) / SECOND)));
      const decision = autoscaler.decide(at, deployment);
      wanted.push({ afterMs: at - burstAt, replicas: decision.desiredReplicas, mode: decision.mode });
    }
    const first = wanted.find((decision) => decision.replicas > 1);
    expect(first).toMatchObject({ mode: 'panic' });
    expect(first!.afterMs).toBeLessThanOrEqual(SECOND);
    // And all it needs once the scrapes show the whole burst.
    expect(wanted.find((decision) => decision.replicas === 3)!.afterMs).toBeLessThanOrEqual(2 * SECOND);
  });

  it('never goes above maxReplicas, and says so', () => {
    const sim = new Simulation(settingsOf({ maxReplicas: 4 }), { replicas: 1 });
    const decisions = sim.run(20, () => ({ inFlight: 10, queued: 500 }));
    expect(Math.max(...desired(decisions))).toBe(4);
    expect(decisions.at(-1)).toMatchObject({ desiredReplicas: 4, reason: 'AtMaximum' });
  });

  it('removes replicas only when fewer have sufficed for the whole cooldown', () => {
    const sim = new Simulation(settingsOf({ cooldown: 30 }), { replicas: 5 });
    sim.run(120, () => ({ inFlight: 50 }));
    const after = sim.run(150, () => ({ inFlight: 10 }));
    // The stable window (60 s) brings the need down gradually, the first step after 13 s; each step waits 30 s.
    const firstDrop = desired(after).findIndex((replicas) => replicas < 5);
    expect(firstDrop).toBe(13 + 30);
    expect(after[firstDrop - 1]).toMatchObject({ desiredReplicas: 5, reason: 'CoolingDown' });
    expect(after.at(-1)).toMatchObject({ desiredReplicas: 1, reason: 'StableLoad' });
  });

  it('scales an app with minReplicas 0 to zero after a cooldown without calls, and keeps one replica before', () => {
    const sim = new Simulation(settingsOf({ minReplicas: 0, cooldown: 20 }), { replicas: 2 });
    sim.run(30, () => ({ inFlight: 15 }));
    const idle = sim.run(40, () => ({}));
    // The last call was seen in the last busy sample, a second before the first idle one.
    expect(desired(idle).indexOf(0)).toBe(20 - 1);
    expect(idle[18]!.desiredReplicas).toBeGreaterThan(0);
    expect(idle[19]).toMatchObject({ mode: 'idle', reason: 'IdleToZero' });
  });

  it('keeps one replica of an app with minReplicas 0 while a call runs, though the load metric says none', () => {
    const sim = new Simulation(settingsOf({ minReplicas: 0, cooldown: 20, scalingMetric: 'requests_per_second', scalingTarget: 5 }), { replicas: 1 });
    const decisions = sim.run(200, () => ({ inFlight: 1 }));
    expect(decisions.at(-1)).toMatchObject({ desiredReplicas: 1, reason: 'IdleCountdown' });
    expect(Math.min(...desired(decisions))).toBe(1);
  });

  it('scales on requests per second with that metric', () => {
    const sim = new Simulation(settingsOf({ scalingMetric: 'requests_per_second', scalingTarget: 25 }), { replicas: 1 });
    const decisions = sim.run(70, () => ({ requestsPerSecond: 80, inFlight: 1 }));
    expect(decisions.at(-1)).toMatchObject({ desiredReplicas: 4, reason: 'StableLoad' });
  });

  it('keeps the replicas as they are while no load is reported, also an app with minReplicas 0 past its cooldown', () => {
    const autoscaler = new AppAutoscaler(settingsOf({}), { now: T0, deployment: { replicas: 3, readyReplicas: 3 } });
    expect(autoscaler.decide(T0 + 5 * SECOND, { replicas: 3, readyReplicas: 3 })).toMatchObject({ desiredReplicas: 3, reason: 'NoLoadReported' });
    const toZero = new AppAutoscaler(settingsOf({ minReplicas: 0, cooldown: 10 }), { now: T0, deployment: { replicas: 1, readyReplicas: 1 } });
    expect(toZero.decide(T0 + 120 * SECOND, { replicas: 1, readyReplicas: 1 })).toMatchObject({ desiredReplicas: 1, reason: 'NoLoadReported' });
  });

  it('does not scale down for a cooldown after being taken over (a new leader), since it saw no earlier wants', () => {
    const sim = new Simulation(settingsOf({ cooldown: 30 }), { replicas: 6 });
    const decisions = sim.run(40, () => ({ inFlight: 10 }));
    expect(desired(decisions).findIndex((replicas) => replicas < 6)).toBe(30);
  });

  it('starts measuring afresh when the metric changes', () => {
    const sim = new Simulation(settingsOf({}), { replicas: 5 });
    sim.run(70, () => ({ inFlight: 50, requestsPerSecond: 5 }));
    sim.autoscaler.updateSettings(settingsOf({ scalingMetric: 'requests_per_second', scalingTarget: 1 }));
    expect(sim.tick({ inFlight: 50, requestsPerSecond: 5 })).toMatchObject({ stableLoad: 5, panicLoad: 5 });
  });
});

describe('properties', () => {
  const scaling = fc.record({
    minReplicas: fc.integer({ min: 0, max: 5 }),
    extra: fc.integer({ min: 0, max: 15 }),
    replicaConcurrency: fc.integer({ min: 1, max: 20 }),
    scalingTarget: fc.integer({ min: 1, max: 100 }),
    cooldown: fc.integer({ min: 0, max: 90 }),
  });
  const toSettings = (s: { minReplicas: number; extra: number; replicaConcurrency: number; scalingTarget: number; cooldown: number }) =>
    settingsOf({ minReplicas: s.minReplicas, maxReplicas: Math.max(1, s.minReplicas + s.extra), replicaConcurrency: s.replicaConcurrency, scalingTarget: s.scalingTarget, cooldown: s.cooldown });
  const load = fc.record({ inFlight: fc.nat(200), queued: fc.nat(200), held: fc.nat(50), requestsPerSecond: fc.nat(100) });
  const loads = fc.array(load, { minLength: 1, maxLength: 200 });

  it('never decides outside [minReplicas, maxReplicas]', () => {
    fc.assert(
      fc.property(scaling, fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 10 }), loads, (s, initial, startSeconds, script) => {
        const settings = toSettings(s);
        const sim = new Simulation(settings, { replicas: initial, startSeconds });
        for (const step of script) {
          const { desiredReplicas } = sim.tick(step);
          expect(desiredReplicas).toBeGreaterThanOrEqual(settings.minReplicas);
          expect(desiredReplicas).toBeLessThanOrEqual(settings.maxReplicas);
        }
      }),
    );
  });

  it('never goes to zero before a replica has been ready', () => {
    fc.assert(
      fc.property(scaling, loads, (s, script) => {
        const sim = new Simulation(toSettings({ ...s, minReplicas: 0 }), { replicas: 0, startSeconds: 10_000 });
        let woke = false;
        for (const step of script) {
          const { desiredReplicas } = sim.tick(step);
          if (woke) expect(desiredReplicas).toBeGreaterThan(0);
          woke ||= desiredReplicas > 0;
        }
      }),
    );
  });

  it('meets a burst of at least twice the ready capacity once its samples fill the panic window', () => {
    fc.assert(
      fc.property(scaling, fc.integer({ min: 1, max: 5 }), fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 2, max: 30 }), (s, ready, calm, times) => {
        const settings = toSettings({ ...s, minReplicas: Math.min(s.minReplicas, ready) });
        const sim = new Simulation(settings, { replicas: ready, startSeconds: 1000 });
        const target = settings.targetPerReplica;
        // At least a call in flight: an idle app with minReplicas 0 would be at zero, where a burst is held.
        sim.run(60, () => ({ inFlight: Math.max(1, Math.floor(calm * target * ready)) }));
        const burst = Math.ceil(times * target * ready);
        const decisions = sim.run(settings.panicWindowMs / SECOND, () => ({ inFlight: burst }));
        expect(decisions.at(-1)!.desiredReplicas).toBe(Math.min(settings.maxReplicas, Math.max(Math.ceil(burst / target), settings.minReplicas)));
      }),
    );
  });

  it('removes no replica until a cooldown after the last sample of the higher load', () => {
    fc.assert(
      fc.property(scaling, fc.integer({ min: 1, max: 400 }), fc.integer({ min: 0, max: 100 }), (s, high, fallPercent) => {
        const settings = toSettings(s);
        const sim = new Simulation(settings, { replicas: 1, startSeconds: 1 });
        sim.run(130, () => ({ inFlight: high }));
        const before = sim.decisions.at(-1)!.desiredReplicas;
        const low = Math.floor((high * fallPercent) / 100);
        const after = sim.run(Math.max(0, settings.cooldownMs / SECOND - 1), () => ({ inFlight: low }));
        for (const decision of after) expect(decision.desiredReplicas).toBeGreaterThanOrEqual(before);
      }),
    );
  });

  it('is monotone in load: more load, never fewer replicas', () => {
    fc.assert(
      fc.property(scaling, fc.integer({ min: 1, max: 8 }), fc.array(fc.tuple(load, load), { minLength: 1, maxLength: 150 }), fc.array(fc.nat(8), { minLength: 150, maxLength: 150 }), (s, initial, pairs, readyScript) => {
        const settings = toSettings(s);
        const lower = new AppAutoscaler(settings, { now: T0, deployment: { replicas: initial, readyReplicas: initial } });
        const higher = new AppAutoscaler(settings, { now: T0, deployment: { replicas: initial, readyReplicas: initial } });
        pairs.forEach(([a, b], second) => {
          const at = T0 + second * SECOND;
          // The same Deployment for both, with at least one ready replica: both stay warm.
          const deployment = { replicas: initial, readyReplicas: Math.max(1, readyScript[second]!) };
          const sample = { at, replicasReporting: deployment.readyReplicas, readyReplicas: deployment.readyReplicas };
          const small = { inFlight: Math.min(a.inFlight, b.inFlight), queued: Math.min(a.queued, b.queued), held: Math.min(a.held, b.held), requestsPerSecond: Math.min(a.requestsPerSecond, b.requestsPerSecond) };
          const large = { inFlight: Math.max(a.inFlight, b.inFlight), queued: Math.max(a.queued, b.queued), held: Math.max(a.held, b.held), requestsPerSecond: Math.max(a.requestsPerSecond, b.requestsPerSecond) };
          lower.observe({ ...sample, ...small, peakCalls: small.inFlight + small.queued });
          higher.observe({ ...sample, ...large, peakCalls: large.inFlight + large.queued });
          expect(lower.decide(at, deployment).desiredReplicas).toBeLessThanOrEqual(higher.decide(at, deployment).desiredReplicas);
        });
      }),
    );
  });
});

describe('the cold start backlog', () => {
  it('does not take calls held at another operator replica for new load, though their report comes late', () => {
    // Target 10 calls per replica. Another replica's holder held 30 calls and woke the app; this one held none.
    const autoscaler = new AppAutoscaler(settingsOf({ minReplicas: 0 }), { now: T0, deployment: { replicas: 0, readyReplicas: 0 } });
    const sample = (second: number, load: Partial<LoadSample>): LoadSample => ({
      at: T0 + second * SECOND, replicasReporting: 0, readyReplicas: 0, inFlight: 0, peakCalls: 0, queued: 0, requestsPerSecond: 0, held: 0, ...load,
    });
    const step = (second: number, load: Partial<LoadSample>, deployment: DeploymentScale) => {
      autoscaler.observe(sample(second, load));
      return autoscaler.decide(T0 + second * SECOND, deployment);
    };
    expect(step(0, {}, { replicas: 0, readyReplicas: 0 }).reason).toBe('Idle');
    expect(step(1, {}, { replicas: 1, readyReplicas: 0 }).reason).toBe('WaitingForReady');
    // Ready; its first load report is not written yet.
    expect(step(3, { readyReplicas: 1 }, { replicas: 1, readyReplicas: 1 }).desiredReplicas).toBe(1);
    // The report: the 30 calls arrived during its last second (average 15, peak 30), then still running.
    const decisions = [
      step(4, { readyReplicas: 1, replicasReporting: 1, inFlight: 15, peakCalls: 30, requestsPerSecond: 30 }, { replicas: 1, readyReplicas: 1 }),
      step(5, { readyReplicas: 1, replicasReporting: 1, inFlight: 30, peakCalls: 30 }, { replicas: 1, readyReplicas: 1 }),
      step(6, { readyReplicas: 1, replicasReporting: 1, inFlight: 2, peakCalls: 30 }, { replicas: 1, readyReplicas: 1 }),
      step(7, { readyReplicas: 1, replicasReporting: 1 }, { replicas: 1, readyReplicas: 1 }),
    ];
    expect(decisions.map((decision) => decision.desiredReplicas)).toEqual([1, 1, 1, 1]);
    expect(decisions[0]).toMatchObject({ mode: 'cold', reason: 'ColdStartBacklog' });
  });
});

describe('a wake from zero by another writer', () => {
  it('is a start: the replica a holder asked for is kept until it has served, not put back to zero', () => {
    const autoscaler = new AppAutoscaler(settingsOf({ minReplicas: 0, cooldown: 10 }), { now: T0, deployment: { replicas: 0, readyReplicas: 0 } });
    const sample = (at: number, readyReplicas: number) => ({ at, replicasReporting: readyReplicas, readyReplicas, inFlight: 0, peakCalls: 0, queued: 0, requestsPerSecond: 0, held: 0 });
    autoscaler.observe(sample(T0, 0));
    expect(autoscaler.decide(T0, { replicas: 0, readyReplicas: 0 })).toMatchObject({ desiredReplicas: 0, reason: 'Idle' });
    // Another operator replica's holder woke it (0 → 1): this one sees no held call of its own.
    for (let second = 1; second <= 30; second += 1) {
      autoscaler.observe(sample(T0 + second * SECOND, 0));
      expect(autoscaler.decide(T0 + second * SECOND, { replicas: 1, readyReplicas: 0 })).toMatchObject({ desiredReplicas: 1, reason: 'WaitingForReady' });
    }
    // Once ready, the idle countdown starts then, not before.
    const ready = T0 + 31 * SECOND;
    autoscaler.observe(sample(ready, 1));
    expect(autoscaler.decide(ready, { replicas: 1, readyReplicas: 1 }).desiredReplicas).toBe(1);
    autoscaler.observe(sample(ready + 11 * SECOND, 1));
    expect(autoscaler.decide(ready + 11 * SECOND, { replicas: 1, readyReplicas: 1 })).toMatchObject({ desiredReplicas: 0, reason: 'IdleToZero' });
  });
});
