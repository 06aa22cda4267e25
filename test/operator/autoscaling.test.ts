// Autoscaling end to end on the in-memory API server with the test kubelet: the shared suite
// (autoscaling-suite.ts: a burst within [min, max], back to min after the cooldown, a removed replica drains),
// and `kubectl scale` overridden with a Warning Event (control-plane.test.ts does that one with kubectl).
import { AppsV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { App } from '../../crds/app-schema.ts';
import { waitFor } from '../support/wait.ts';
import { AUTOSCALING_TEST_CONFIG, autoscalingSuite } from './autoscaling-suite.ts';
import { HelloApp } from './hello-app.ts';
import { startLocalCluster, type LocalCluster } from './local-cluster.ts';
import { availableAtGeneration, STATE_TIMEOUT_MS, SUITE_OPTIONS } from './operator-suite.ts';

let cluster: LocalCluster;

beforeAll(async () => {
  cluster = await startLocalCluster({ operatorConfig: AUTOSCALING_TEST_CONFIG });
}, 120_000);
afterAll(async () => {
  await cluster?.close();
}, 120_000);
beforeEach((context) => {
  context.onTestFailed(() => console.log(cluster.diagnostics()));
});

const wait = <T>(what: string, check: () => Promise<T | false | undefined>) => waitFor(check, { what, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 });

describe('autoscaling with the test kubelet', SUITE_OPTIONS, () => {
  autoscalingSuite(() => cluster);

  it('a kubectl scale of an autoscaled App is overridden, with a Warning Event that says why', async () => {
    const app = new HelloApp(cluster.kubeConfig, `runlet-scale-${Date.now().toString(36)}-override`, {
      scaling: { minReplicas: 1, maxReplicas: 3, replicaConcurrency: 2, scalingTarget: 100, cooldown: 3 },
    });
    await app.apply();
    await wait('the App Available', async () => availableAtGeneration(await app.read()));
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const name = (await app.deployment())!.metadata!.name!;
    await apps.patchNamespacedDeploymentScale(
      { namespace: app.namespace, name, body: { spec: { replicas: 7 } }, fieldManager: 'kubectl' },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await wait('set back within [1, 3]', async () => {
      const replicas = (await app.deployment())?.spec?.replicas;
      return replicas !== undefined && replicas <= 3;
    });
    const warning = await wait('the ScaleOverridden Event', async () => (await app.events()).find((event) => event.reason === 'ScaleOverridden'));
    expect(warning.type).toBe('Warning');
    expect(warning.message).toContain('set to 7 outside Runlet');
    const app2: App = await app.read();
    expect(app2.status?.desiredReplicas).toBeLessThanOrEqual(3);
  });
});
