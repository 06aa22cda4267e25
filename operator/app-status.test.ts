import { describe, expect, it } from 'vitest';
import type { App, Condition } from '../crds/app-schema.ts';
import { nextAppStatus, ownedStatusDiffers, type Observation } from './app-status.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';

const APP_URL = 'http://hello.team-a.svc.cluster.local/v4/team-a/hello';
const EARLIER = '2025-01-01T00:00:00Z';
const NOW = new Date('2025-02-02T12:34:56.789Z');

function app(minReplicas = 1, conditions?: Condition[], generation = 2): App {
  const stored = storedApp(pythonSpec({ scaling: { minReplicas, maxReplicas: Math.max(1, minReplicas) } }), { generation });
  return conditions === undefined ? stored : { ...stored, status: { conditions, replicas: 1, readyReplicas: 1 } };
}

const applied = (readyReplicas: number, extra: Partial<Extract<Observation, { kind: 'applied' }>> = {}): Observation => ({
  kind: 'applied',
  children: ['Deployment', 'Service'],
  deployment: { replicas: 1, readyReplicas },
  ...extra,
});

const summary = (conditions: Condition[]) => conditions.map((c) => `${c.type}=${c.status}/${c.reason}`);

describe('nextAppStatus', () => {
  it.each<[string, App, Observation, string[]]>([
    ['children applied, a replica ready', app(), applied(1), ['Ready=True/ChildrenApplied', 'Available=True/MinimumReplicasAvailable']],
    ['children applied, no replica ready yet', app(), applied(0), ['Ready=True/ChildrenApplied', 'Available=False/NoReplicasAvailable']],
    ['scaled to zero', app(0), applied(0), ['Ready=True/ChildrenApplied', 'Available=False/ScaledToZero']],
    ['code ConfigMap missing', app(), applied(0, { missingCodeConfigMap: 'hello-code' }), ['Ready=False/CodeConfigMapNotFound', 'Available=False/NoReplicasAvailable']],
    ['invalid spec, first time: Ready only', app(), { kind: 'invalid', problems: ['a', 'b'] }, ['Ready=False/InvalidSpec']],
    ['apply failed, first time: Ready only', app(), { kind: 'apply-failed', message: 'boom' }, ['Ready=False/ApplyFailed']],
  ])('%s', (_case, subject, observation, expected) => {
    const status = nextAppStatus(subject, observation, APP_URL, NOW);
    expect(summary(status.conditions)).toEqual(expected);
    expect(status.observedGeneration).toBe(2);
    expect(status.url).toBe(APP_URL);
    for (const condition of status.conditions) expect(condition.observedGeneration).toBe(2);
  });

  it('says what is wrong with an invalid spec, and keeps what it knew of the replicas', () => {
    const available: Condition = { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: '1 of 1 replicas ready', lastTransitionTime: EARLIER, observedGeneration: 1 };
    const status = nextAppStatus(app(1, [available]), { kind: 'invalid', problems: ['spec.scaling.minReplicas must be …', 'spec.env[0].name is required'] }, APP_URL, NOW);
    expect(status.conditions[0]!.message).toBe('spec.scaling.minReplicas must be …; spec.env[0].name is required');
    expect(status.conditions[1]).toEqual(available);
    expect(status).toMatchObject({ replicas: 1, readyReplicas: 1 });
  });

  it.each([
    ['keeps the transition time while the status stays', 'True', EARLIER],
    ['moves it when the status flips', 'False', '2025-02-02T12:34:56Z'],
  ])('%s', (_case, previousStatus, time) => {
    const previous: Condition = { type: 'Ready', status: previousStatus as 'True' | 'False', reason: 'ChildrenApplied', message: '', lastTransitionTime: EARLIER };
    const status = nextAppStatus(app(1, [previous]), applied(1), APP_URL, NOW);
    expect(status.conditions[0]!.lastTransitionTime).toBe(time);
  });

  it('reports the Deployment replica counts', () => {
    expect(nextAppStatus(app(), { kind: 'applied', children: [], deployment: { replicas: 3, readyReplicas: 2 } }, APP_URL, NOW)).toMatchObject({ replicas: 3, readyReplicas: 2 });
    expect(nextAppStatus(app(), { kind: 'applied', children: [], deployment: undefined }, APP_URL, NOW)).toMatchObject({ replicas: 0, readyReplicas: 0 });
  });
});

describe('ownedStatusDiffers', () => {
  const subject = app();
  const next = nextAppStatus(subject, applied(1), APP_URL, NOW);

  it('is false for the status just written, whatever the key order and whatever else is there', () => {
    const reordered = { ...next, conditions: next.conditions.map((c) => Object.fromEntries(Object.entries(c).reverse()) as Condition) };
    expect(ownedStatusDiffers({ ...reordered, runs: { total: 1, success: 1, failure: 0, inFlight: 0 } }, next)).toBe(false);
  });

  it('is true when any owned field changed', () => {
    expect(ownedStatusDiffers(undefined, next)).toBe(true);
    expect(ownedStatusDiffers({ ...next, readyReplicas: 0 }, next)).toBe(true);
    expect(ownedStatusDiffers({ ...next, observedGeneration: 1 }, next)).toBe(true);
  });
});
