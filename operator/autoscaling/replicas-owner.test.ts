// Who owns spec.replicas: the operator for a fixed-size App, the autoscaler (through a server-side apply
// handover) for an autoscaled one, so that a reconcile never undoes a scaling decision.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../../test/kube/index.ts';
import { pythonSpec } from '../../test/support/operator-apps.ts';
import { createApp, createCodeConfigMap, createNamespace, paths, prepareCluster, testOperator, waitForApp, isAppliedAtGeneration, type TestCluster } from '../../test/support/fake-cluster.ts';
import { waitFor } from '../../test/support/wait.ts';
import { KubeApi } from '../../kube/client.ts';
import type { App } from '../../crds/app-schema.ts';
import type { Operator } from '../main.ts';
import { AUTOSCALER_FIELD_MANAGER, ownsReplicas, replicasToApply, type ScaledDeployment } from './replicas-owner.ts';

let cluster: TestCluster<KubeApiServer>;
let operator: Operator;
let api: KubeApi;

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  api = cluster.api;
  operator = testOperator(cluster);
  operator.start();
});

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
});

async function appWithCode(namespace: string, scaling: Record<string, number>): Promise<App> {
  await createNamespace(api, namespace);
  await createCodeConfigMap(api, namespace, 'hello-code', 'hello', { 'main.py': 'def run():\n    return "hi"\n' });
  return createApp(api, namespace, 'hello', { ...pythonSpec(), scaling });
}

const deployment = (namespace: string) => api.get<ScaledDeployment>(paths.deployment(namespace, 'hello'));

/** A spec change the operator must reconcile (a new generation), and the reconcile of it done. */
async function touch(namespace: string, value: string): Promise<void> {
  const app = await api.get<App>(paths.app(namespace, 'hello'));
  const patched = await api.mergePatch<App>(paths.app(namespace, 'hello'), { spec: { env: [{ name: 'TOUCH', value }] } });
  expect(patched.metadata.generation).toBeGreaterThan(app.metadata.generation!);
  await waitForApp(api, namespace, 'hello', isAppliedAtGeneration, `reconciled at generation ${patched.metadata.generation}`);
}

describe('spec.replicas', () => {
  it('of an autoscaled App is the autoscaler’s after the first reconcile: a reconcile never undoes a scale', async () => {
    await appWithCode('scaled', { minReplicas: 1, maxReplicas: 5 });
    await waitFor(async () => ownsReplicas(await deployment('scaled'), AUTOSCALER_FIELD_MANAGER), { what: 'the autoscaler owns spec.replicas' });
    expect((await deployment('scaled')).spec?.replicas).toBe(1);

    const autoscaler = new KubeApi(api.credentials, { fieldManager: AUTOSCALER_FIELD_MANAGER });
    await autoscaler.mergePatch(paths.deployment('scaled', 'hello').subresource('scale'), { spec: { replicas: 4 } });
    await touch('scaled', 'one');
    await touch('scaled', 'two');
    const live = await deployment('scaled');
    expect(live.spec?.replicas).toBe(4);
    expect(ownsReplicas(live, 'runlet-operator')).toBe(false);
    await autoscaler.close();
  });

  it('of a fixed-size App that starts autoscaling keeps its running size through the handover', async () => {
    await appWithCode('handover', { minReplicas: 3, maxReplicas: 3 });
    await waitFor(async () => (await deployment('handover')).spec?.replicas === 3 && true, { what: 'the fixed size applied' });
    expect(ownsReplicas(await deployment('handover'), 'runlet-operator')).toBe(true);

    await api.mergePatch(paths.app('handover', 'hello'), { spec: { scaling: { minReplicas: 1, maxReplicas: 6 } } });
    await waitFor(async () => ownsReplicas(await deployment('handover'), AUTOSCALER_FIELD_MANAGER), { what: 'the autoscaler owns spec.replicas' });
    await touch('handover', 'after');
    const live = await deployment('handover');
    expect(live.spec?.replicas).toBe(3);
    expect(ownsReplicas(live, 'runlet-operator')).toBe(false);
  });

  it('is applied by the operator as the live size clamped to the range until the autoscaler owns it', () => {
    const scaling: App['spec']['scaling'] = { minReplicas: 2, maxReplicas: 4, replicaConcurrency: 1, responseGracePeriod: 900, cooldown: 60, scalingMetric: 'concurrency_utilization', coldStartTimeout: 60 };
    expect(replicasToApply(scaling, undefined)).toBe(2);
    expect(replicasToApply({ ...scaling, minReplicas: 0 }, undefined), 'a new App that scales to zero starts with one').toBe(1);
    expect(replicasToApply(scaling, { spec: { replicas: 9 } })).toBe(4);
    expect(replicasToApply(scaling, { spec: { replicas: 0 } })).toBe(2);
    const owned = { spec: { replicas: 3 }, metadata: { managedFields: [{ manager: AUTOSCALER_FIELD_MANAGER, operation: 'Apply', fieldsV1: { 'f:spec': { 'f:replicas': {} } } }] } };
    expect(replicasToApply(scaling, owned)).toBeNull();
    const scaledByKubectl = { spec: { replicas: 7 }, metadata: { managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:spec': { 'f:replicas': {} } } }] } };
    expect(replicasToApply(scaling, scaledByKubectl), 'left to the autoscaler to correct, with an Event').toBeNull();
    const operatorAlone = { spec: { replicas: 3 }, metadata: { managedFields: [{ manager: 'runlet-operator', operation: 'Apply', fieldsV1: { 'f:spec': { 'f:replicas': {} } } }] } };
    expect(replicasToApply(scaling, operatorAlone)).toBe(3);
    expect(replicasToApply({ ...scaling, maxReplicas: 2 }, owned)).toBe(2);
  });
});
