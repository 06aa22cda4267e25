// The Deployment controller's decisions, without processes: surge and unavailability bounds, Recreate.
import { describe, expect, it } from 'vitest';
import { ConditionClock } from './conditions.ts';
import { deploymentStatus, planRollout, surgeAndUnavailable, type OwnedPod, type RolloutSpec } from './rollout.ts';

const rolling = (replicas: number, extra: Partial<RolloutSpec> = {}): RolloutSpec => ({
  replicas,
  strategy: 'RollingUpdate',
  maxSurge: undefined,
  maxUnavailable: undefined,
  ...extra,
});

let created = 0;
function pod(name: string, templateHash: string, state: { ready?: boolean; terminating?: boolean } = {}): OwnedPod {
  created += 1;
  return { name, templateHash, ready: state.ready ?? false, terminating: state.terminating ?? false, createdAt: new Date(created * 1000).toISOString() };
}

describe('planRollout', () => {
  it('creates the missing replicas of the current template', () => {
    expect(planRollout(rolling(3), 'new', [pod('a', 'new', { ready: true })])).toEqual({ create: 2, remove: [] });
  });

  it('with one replica (surge 1, unavailable 0): starts the new pod, and stops the old one only once the new one is ready', () => {
    const old = pod('old', 'v1', { ready: true });
    expect(planRollout(rolling(1), 'v2', [old])).toEqual({ create: 1, remove: [] });
    expect(planRollout(rolling(1), 'v2', [old, pod('new', 'v2')])).toEqual({ create: 0, remove: [] });
    expect(planRollout(rolling(1), 'v2', [old, pod('new', 'v2', { ready: true })])).toEqual({ create: 0, remove: ['old'] });
  });

  it('deletes old pods that are not ready at once: they serve nobody', () => {
    expect(planRollout(rolling(1), 'v2', [pod('old', 'v1')])).toEqual({ create: 1, remove: ['old'] });
  });

  it('does not count terminating pods, and scales down the not-ready and newest first', () => {
    const pods = [pod('a', 'v1', { ready: true }), pod('b', 'v1', { ready: true }), pod('c', 'v1'), pod('gone', 'v1', { terminating: true })];
    expect(planRollout(rolling(1), 'v1', pods)).toEqual({ create: 0, remove: ['c', 'b'] });
  });

  it('honours explicit surge and unavailability, as numbers or percentages', () => {
    expect(surgeAndUnavailable(rolling(4))).toEqual({ surge: 1, unavailable: 1 });
    expect(surgeAndUnavailable(rolling(10, { maxSurge: '50%', maxUnavailable: 0 }))).toEqual({ surge: 5, unavailable: 0 });
    expect(surgeAndUnavailable(rolling(2, { maxSurge: 0, maxUnavailable: '0%' }))).toEqual({ surge: 0, unavailable: 1 });
    const pods = [pod('a', 'v1', { ready: true }), pod('b', 'v1', { ready: true })];
    // surge 0, unavailable 1: one old pod goes before any new pod starts.
    expect(planRollout(rolling(2, { maxSurge: 0, maxUnavailable: 1 }), 'v2', pods)).toEqual({ create: 0, remove: ['b'] });
  });

  it('Recreate: deletes every old pod, and starts new ones only after the old ones are gone', () => {
    const recreate = rolling(2, { strategy: 'Recreate' });
    expect(planRollout(recreate, 'v2', [pod('a', 'v1', { ready: true }), pod('b', 'v1', { ready: true })])).toEqual({ create: 0, remove: ['a', 'b'] });
    expect(planRollout(recreate, 'v2', [pod('a', 'v1', { terminating: true })])).toEqual({ create: 0, remove: [] });
    expect(planRollout(recreate, 'v2', [])).toEqual({ create: 2, remove: [] });
  });
});

describe('deploymentStatus', () => {
  it('counts active, updated and ready pods, and keeps condition times while nothing changes', () => {
    const clock = new ConditionClock();
    const pods = [pod('old', 'v1', { ready: true }), pod('new', 'v2'), pod('going', 'v1', { terminating: true })];
    const status = deploymentStatus('web', 3, rolling(1), 'v2', pods, clock);
    expect(status).toMatchObject({
      observedGeneration: 3,
      replicas: 2,
      updatedReplicas: 1,
      readyReplicas: 1,
      availableReplicas: 1,
      unavailableReplicas: 0,
      terminatingReplicas: 1,
    });
    expect(status.conditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ['Available', 'True', 'MinimumReplicasAvailable'],
      ['Progressing', 'True', 'ReplicaSetUpdated'],
    ]);
    expect(deploymentStatus('web', 3, rolling(1), 'v2', pods, clock)).toEqual(status);

    const done = deploymentStatus('web', 3, rolling(1), 'v2', [pod('new', 'v2', { ready: true })], clock);
    expect(done.conditions[1]).toMatchObject({ reason: 'NewReplicaSetAvailable' });
    expect(done.conditions[0]!.lastTransitionTime).toBe(status.conditions[0]!.lastTransitionTime);
  });
});
