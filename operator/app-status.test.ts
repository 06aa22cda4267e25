import { describe, expect, it } from 'vitest';
import type { App, Condition } from '../crds/app-schema.ts';
import { appEvents } from './app-events.ts';
import { nextAppStatus, ownedStatusDiffers, type Observation } from './app-status.ts';
import type { DeploymentStatusView, DeploymentView } from './rollout-state.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';

const APP_URL = 'http://hello.team-a.svc.cluster.local/v4/team-a/hello';
const EARLIER = '2025-01-01T00:00:00Z';
const NOW = new Date('2025-02-02T12:34:56.789Z');
const QUOTA = 'pods "hello-7d9c-x2x" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0';

function app(minReplicas = 1, conditions?: Condition[], generation = 2): App {
  const stored = storedApp(pythonSpec({ scaling: { minReplicas, maxReplicas: Math.max(1, minReplicas) } }), { generation });
  return conditions === undefined ? stored : { ...stored, status: { conditions, replicas: 1, readyReplicas: 1 } };
}

/** A Deployment at generation 3 wanting `desired` replicas, its controller having reported `status`. */
function deployment(desired: number, status: DeploymentStatusView | undefined): DeploymentView {
  return { metadata: { generation: 3 }, spec: { replicas: desired }, status };
}

/** The Deployment controller's report of a rollout of generation 3 that is over: every replica of the current template. */
const rolledOut = (replicas: number, available: number, extra: DeploymentStatusView = {}): DeploymentStatusView => ({
  observedGeneration: 3,
  replicas,
  updatedReplicas: replicas,
  readyReplicas: available,
  availableReplicas: available,
  ...extra,
});

const applied = (view: DeploymentView | undefined, extra: Partial<Extract<Observation, { kind: 'applied' }>> = {}): Observation => ({
  kind: 'applied',
  children: ['Deployment', 'Service'],
  deployment: view,
  ...extra,
});

const refused = { conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: QUOTA }] };
const stalled = { conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'ReplicaSet "hello-7d9c" has timed out progressing.' }] };

const PULL = {
  pod: 'hello-7d9c-x2x',
  container: 'app',
  image: 'registry.example.com/hello:1',
  reason: 'ErrImagePull',
  message: 'rpc error: code = Unknown desc = failed to pull and unpack image "registry.example.com/hello:1": pull access denied',
};

const summary = (conditions: Condition[]) => conditions.map((c) => `${c.type}=${c.status}/${c.reason}`);

describe('nextAppStatus', () => {
  it.each<[string, App, Observation, string[]]>([
    ['rolled out, a replica available: serving', app(), applied(deployment(1, rolledOut(1, 1))), ['Ready=True/Serving', 'Available=True/MinimumReplicasAvailable', 'ChildrenApplied=True/Applied']],
    ['just applied, the Deployment controller has not reported', app(), applied(deployment(1, undefined)), ['Ready=False/RollingOut', 'Available=False/MinimumReplicasUnavailable', 'ChildrenApplied=True/Applied']],
    ['the controller is behind the template', app(), applied(deployment(1, { ...rolledOut(1, 1), observedGeneration: 2 })), ['Ready=False/RollingOut', 'Available=True/MinimumReplicasAvailable', 'ChildrenApplied=True/Applied']],
    ['an old replica serves while the new one starts', app(), applied(deployment(1, { ...rolledOut(2, 1), updatedReplicas: 1 })), ['Ready=False/RollingOut', 'Available=True/MinimumReplicasAvailable', 'ChildrenApplied=True/Applied']],
    ['rolled out, the pod not ready yet', app(), applied(deployment(1, rolledOut(1, 0))), ['Ready=False/MinimumReplicasUnavailable', 'Available=False/MinimumReplicasUnavailable', 'ChildrenApplied=True/Applied']],
    ['fewer than minReplicas available', app(3), applied(deployment(3, rolledOut(3, 2))), ['Ready=False/MinimumReplicasUnavailable', 'Available=False/MinimumReplicasUnavailable', 'ChildrenApplied=True/Applied']],
    ['minReplicas available while a scale-up goes on', app(1), applied(deployment(3, rolledOut(1, 1))), ['Ready=True/Serving', 'Available=True/MinimumReplicasAvailable', 'ChildrenApplied=True/Applied']],
    ['the namespace refuses the pods', app(), applied(deployment(1, { observedGeneration: 3, ...refused })), ['Ready=False/PodsRefused', 'Available=False/PodsRefused', 'ChildrenApplied=True/Applied']],
    ['a new template refused while the old replica serves', app(), applied(deployment(1, { ...rolledOut(1, 1), updatedReplicas: 0, ...refused })), ['Ready=False/PodsRefused', 'Available=True/MinimumReplicasAvailable', 'ChildrenApplied=True/Applied']],
    ['the rollout passed its deadline', app(), applied(deployment(1, { ...rolledOut(2, 1), updatedReplicas: 1, ...stalled })), ['Ready=False/ProgressDeadlineExceeded', 'Available=True/MinimumReplicasAvailable', 'ChildrenApplied=True/Applied']],
    ['minReplicas 0, nothing runs: serving as configured', app(0), applied(deployment(0, rolledOut(0, 0))), ['Ready=True/Serving', 'Available=True/ScaledToZero', 'ChildrenApplied=True/Applied']],
    ['a pod cannot pull its image', app(), applied(deployment(1, { observedGeneration: 3, replicas: 1, updatedReplicas: 1 }), { imagePull: PULL }), ['Ready=False/ImagePullBackOff', 'Available=False/ImagePullBackOff', 'ChildrenApplied=True/Applied']],
    ['a pod cannot pull its image past the deadline: the cause first', app(), applied(deployment(1, { ...rolledOut(1, 0), ...stalled }), { imagePull: PULL }), ['Ready=False/ImagePullBackOff', 'Available=False/ImagePullBackOff', 'ChildrenApplied=True/Applied']],
    ['a new pod cannot pull its image while the old replica serves', app(), applied(deployment(1, { ...rolledOut(2, 1), updatedReplicas: 1 }), { imagePull: PULL }), ['Ready=False/ImagePullBackOff', 'Available=True/MinimumReplicasAvailable', 'ChildrenApplied=True/Applied']],
    ['rolled out and serving: a scale-up pod that cannot pull leaves it Ready', app(), applied(deployment(2, rolledOut(2, 1)), { imagePull: PULL }), ['Ready=True/Serving', 'Available=True/MinimumReplicasAvailable', 'ChildrenApplied=True/Applied']],
    ['code ConfigMap missing', app(), applied(deployment(1, rolledOut(1, 0)), { missingCodeConfigMap: 'hello-code' }), ['Ready=False/CodeConfigMapNotFound', 'Available=False/MinimumReplicasUnavailable', 'ChildrenApplied=False/CodeConfigMapNotFound']],
    ['no Deployment', app(), applied(undefined), ['Ready=False/RollingOut', 'Available=False/MinimumReplicasUnavailable', 'ChildrenApplied=True/Applied']],
    ['invalid spec, first time: nothing known of replicas', app(), { kind: 'invalid', problems: ['a', 'b'] }, ['Ready=False/InvalidSpec', 'ChildrenApplied=False/InvalidSpec']],
    ['apply failed, first time: nothing known of replicas', app(), { kind: 'apply-failed', message: 'boom' }, ['Ready=False/ApplyFailed', 'ChildrenApplied=False/ApplyFailed']],
  ])('%s', (_case, subject, observation, expected) => {
    const status = nextAppStatus(subject, observation, APP_URL, NOW);
    expect(summary(status.conditions)).toEqual(expected);
    expect(status.observedGeneration).toBe(2);
    expect(status.url).toBe(APP_URL);
    for (const condition of status.conditions) expect(condition.observedGeneration).toBe(2);
  });

  it('puts the API server’s refusal in the message', () => {
    const status = nextAppStatus(app(), applied(deployment(1, { observedGeneration: 3, ...refused })), APP_URL, NOW);
    for (const type of ['Ready', 'Available']) expect(status.conditions.find((c) => c.type === type)?.message).toContain(QUOTA);
  });

  it('puts the pod, the container, the image and the kubelet’s reason and message in an image pull failure, and makes it a Warning Event', () => {
    const status = nextAppStatus(app(1, []), applied(deployment(1, { observedGeneration: 3, replicas: 1, updatedReplicas: 1 }), { imagePull: PULL }), APP_URL, NOW);
    const ready = status.conditions.find((c) => c.type === 'Ready')!;
    expect(ready.message).toBe(
      `pod hello-7d9c-x2x: container "app" cannot pull image "registry.example.com/hello:1": ErrImagePull: ${PULL.message}; check the image name, and that apps.imagePullSecrets names a Secret of this namespace that the registry accepts`,
    );
    expect(status.conditions.find((c) => c.type === 'Available')!.message).toBe(`0 of minReplicas 1 replicas available; ${ready.message}`);
    expect(appEvents(undefined, status)).toEqual([{ type: 'Warning', reason: 'ImagePullBackOff', message: ready.message }]);
  });

  it('says what is wrong with an invalid spec, and keeps what it knew of the replicas', () => {
    const available: Condition = { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: '1 replicas available, minReplicas 1', lastTransitionTime: EARLIER, observedGeneration: 1 };
    const status = nextAppStatus(app(1, [available]), { kind: 'invalid', problems: ['spec.scaling.minReplicas must be …', 'spec.env[0].name is required'] }, APP_URL, NOW);
    expect(status.conditions[0]!.message).toBe('spec.scaling.minReplicas must be …; spec.env[0].name is required');
    expect(status.conditions[1]).toEqual(available);
    expect(status).toMatchObject({ replicas: 1, readyReplicas: 1 });
  });

  it.each([
    ['keeps the transition time while the status stays', 'True', EARLIER],
    ['moves it when the status flips', 'False', '2025-02-02T12:34:56Z'],
  ])('%s', (_case, previousStatus, time) => {
    const previous: Condition = { type: 'Ready', status: previousStatus as 'True' | 'False', reason: 'Serving', message: '', lastTransitionTime: EARLIER };
    const status = nextAppStatus(app(1, [previous]), applied(deployment(1, rolledOut(1, 1))), APP_URL, NOW);
    expect(status.conditions[0]!.lastTransitionTime).toBe(time);
  });

  it('reports the Deployment replica counts', () => {
    expect(nextAppStatus(app(), applied(deployment(3, rolledOut(3, 2))), APP_URL, NOW)).toMatchObject({ replicas: 3, readyReplicas: 2 });
    expect(nextAppStatus(app(), applied(undefined), APP_URL, NOW)).toMatchObject({ replicas: 0, readyReplicas: 0 });
  });

  it('says of an App at zero that a call waits for a replica, not that calls fail', () => {
    const available = nextAppStatus(app(0), applied(deployment(0, rolledOut(0, 0))), APP_URL, NOW).conditions.find((c) => c.type === 'Available');
    expect(available?.message).toMatch(/waits for it at the activator/);
    expect(available?.message).not.toMatch(/fail/);
  });

  it('gives a fixed App (minReplicas = maxReplicas) its wanted replicas and a Fixed scaling, for DESIRED and SCALING', () => {
    const first = nextAppStatus(app(2), applied(deployment(2, rolledOut(2, 2))), APP_URL, NOW);
    expect(first).toMatchObject({ desiredReplicas: 2, lastScaling: { reason: 'Fixed', to: 2, time: NOW.toISOString().replace(/\.\d+Z$/, 'Z') } });
    // A later reconcile keeps the time the count was set: nothing to write.
    const later = nextAppStatus({ ...app(2), status: first }, applied(deployment(2, rolledOut(2, 2))), APP_URL, new Date(NOW.getTime() + 60_000));
    expect(later.lastScaling).toEqual(first.lastScaling);
    expect(ownedStatusDiffers(first, later)).toBe(false);
  });

  it('leaves an autoscaled App’s wanted replicas and scaling to the autoscaler', () => {
    const autoscaled = storedApp(pythonSpec({ scaling: { minReplicas: 1, maxReplicas: 4 } }));
    const written = { desiredReplicas: 3, lastScaling: { time: EARLIER, from: 1, to: 3, reason: 'ScaledUp', message: 'load' } };
    const next = nextAppStatus({ ...autoscaled, status: written }, applied(deployment(3, rolledOut(3, 3))), APP_URL, NOW);
    expect(next.desiredReplicas).toBeUndefined();
    expect(next.lastScaling).toBeUndefined();
    expect(ownedStatusDiffers({ ...next, ...written }, next)).toBe(false);
  });
});

describe('appEvents', () => {
  const statusOf = (observation: Observation, previous?: Condition[]) => nextAppStatus(app(1, previous), observation, APP_URL, NOW);
  const ready = (status: 'True' | 'False', reason: string): Condition[] => [{ type: 'Ready', status, reason, message: '', lastTransitionTime: EARLIER }];
  const notes = (previous: Condition[] | undefined, observation: Observation) => appEvents(app(1, previous).status, statusOf(observation, previous)).map((n) => `${n.type}/${n.reason}`);

  it.each<[string, Condition[] | undefined, Observation, string[]]>([
    ['a failure, every time it is seen', ready('False', 'ApplyFailed'), { kind: 'apply-failed', message: 'boom' }, ['Warning/ApplyFailed']],
    ['an invalid spec', undefined, { kind: 'invalid', problems: ['a'] }, ['Warning/InvalidSpec']],
    ['pods refused', ready('False', 'RollingOut'), applied(deployment(1, { observedGeneration: 3, ...refused })), ['Warning/PodsRefused']],
    ['a stuck rollout', ready('True', 'Serving'), applied(deployment(1, { ...rolledOut(2, 1), updatedReplicas: 1, ...stalled })), ['Warning/ProgressDeadlineExceeded']],
    ['the code missing', undefined, applied(deployment(1, undefined), { missingCodeConfigMap: 'hello-code' }), ['Warning/CodeConfigMapNotFound']],
    ['starting to serve', ready('False', 'RollingOut'), applied(deployment(1, rolledOut(1, 1))), ['Normal/Ready']],
    ['still serving: no news', ready('True', 'Serving'), applied(deployment(1, rolledOut(1, 1))), []],
    ['a new App on its way: no news', undefined, applied(deployment(1, undefined)), []],
    ['a rollout begins', ready('True', 'Serving'), applied(deployment(1, { ...rolledOut(2, 1), updatedReplicas: 1 })), ['Normal/RollingOut']],
    ['the replicas are lost', ready('True', 'Serving'), applied(deployment(1, rolledOut(1, 0))), ['Warning/MinimumReplicasUnavailable']],
  ])('%s', (_case, previous, observation, expected) => {
    expect(notes(previous, observation)).toEqual(expected);
  });
});

describe('ownedStatusDiffers', () => {
  const subject = app();
  const next = nextAppStatus(subject, applied(deployment(1, rolledOut(1, 1))), APP_URL, NOW);

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
