// Autoscaling end to end on the in-memory API server with the test kubelet: the shared suite
// (autoscaling-suite.ts: a burst within [min, max], back to min after the cooldown, a removed replica drains),
// `kubectl scale` overridden with a Warning Event (control-plane.test.ts does that one with kubectl), and a
// burst scaled for while the API server refuses every RunLog write, or is down altogether (the load is
// scraped, not written).
import { AppsV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { App } from '../../crds/app-schema.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import { AUTOSCALING_TEST_CONFIG, autoscalingSuite } from './autoscaling-suite.ts';
import { HelloApp } from './hello-app.ts';
import { startLocalCluster, type LocalCluster } from './local-cluster.ts';
import { availableAtGeneration, isReady, STATE_TIMEOUT_MS, SUITE_OPTIONS } from './operator-suite.ts';

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

  it('a burst is scaled for while the API server refuses every RunLog write: the load does not ride on them', async () => {
    const app = new HelloApp(cluster.kubeConfig, `runlet-scale-${Date.now().toString(36)}-norunlog`, {
      scaling: { minReplicas: 1, maxReplicas: 3, replicaConcurrency: 2, scalingTarget: 100, cooldown: 3 },
    });
    await app.apply();
    await wait('the App Available', async () => availableAtGeneration(await app.read()));
    const [pod] = (await app.pods()).filter(isReady);
    // An etcd brownout for this App's RunLogs alone: every write (and read) of them is refused from now on.
    const runLogs = `/namespaces/${app.namespace}/runlogs`;
    const refusedBefore = cluster.server.counters.injectedFailures;
    cluster.server.failNext({ pathPattern: runLogs, status: 503, times: Infinity, message: 'etcdserver: request timed out' });
    const { runUrl } = await cluster.sidecar(pod!);
    const token = await cluster.token(app.namespace);
    // 8 stream calls of 6 s on one replica taking 2 at once: ceil(8 ÷ 2) = 4 replicas needed, capped at max 3.
    const burst = Array.from({ length: 8 }, async () => {
      const response = await fetch(`${runUrl}/v4/${app.namespace}/${app.name}/count`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${token}` },
        body: JSON.stringify({ n: 24, pause: 0.25 }),
      });
      expect(response.status).toBe(200);
      return (await new EventReader(response.body!).rest()).filter((event) => event.event !== 'end' && event.event !== 'error').length;
    });
    // The sidecar did try to write the burst's runs, and was refused.
    await wait('a RunLog write of the burst refused', async () => cluster.server.counters.injectedFailures > refusedBefore);
    await wait('3 replicas wanted', async () => (await app.deployment())?.spec?.replicas === 3);
    expect((await app.read()).status?.lastScaling).toMatchObject({ to: 3 });
    expect(await Promise.all(burst)).toEqual(Array(8).fill(24));
  });

  it('a burst is decided on while the API server is down altogether: the load still comes from the replicas, and the decision lands once it is back', async () => {
    const app = new HelloApp(cluster.kubeConfig, `runlet-scale-${Date.now().toString(36)}-apidown`, {
      scaling: { minReplicas: 1, maxReplicas: 3, replicaConcurrency: 2, scalingTarget: 100, cooldown: 3 },
    });
    await app.apply();
    await wait('the App Available', async () => availableAtGeneration(await app.read()));
    const [pod] = (await app.pods()).filter(isReady);
    const { runUrl } = await cluster.sidecar(pod!);
    const token = await cluster.token(app.namespace);
    const desired = async () => (await cluster.operator.metrics.desiredReplicas.get()).values.find((sample) => sample.labels.namespace === app.namespace && sample.labels.app === app.name)?.value;
    const written = cluster.server.countRequests({ method: 'PATCH', pathPattern: `/namespaces/${app.namespace}/deployments/` });
    // Every connection to the API server is reset from now on, watches and the leader's Lease included. Shorter
    // than the leader's renew deadline (10 s): past it, a leader that cannot renew steps down, by design.
    cluster.server.pause('refuse');
    let burst: Promise<number>[];
    try {
      // 8 stream calls of 6 s on one replica taking 2 at once: ceil(8 ÷ 2) = 4 replicas needed, capped at max 3.
      burst = Array.from({ length: 8 }, async () => {
        const response = await fetch(`${runUrl}/v4/${app.namespace}/${app.name}/count`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${token}` },
          body: JSON.stringify({ n: 24, pause: 0.25 }),
        });
        expect(response.status).toBe(200);
        return (await new EventReader(response.body!).rest()).filter((event) => event.event !== 'end' && event.event !== 'error').length;
      });
      // The signal follows the burst though no request reaches the API server: the leader scrapes the replica.
      await waitFor(() => cluster.operator.loads.get(app.namespace, app.name).averageConcurrency > 2, { what: 'the burst in the scraped load', timeoutMs: 8000, intervalMs: 20 });
      // And the scaler decides on it; its write to the scale subresource cannot land yet.
      await waitFor(async () => (await desired()) === 3, { what: 'the scaler deciding for 3 replicas', timeoutMs: 8000, intervalMs: 20 });
      expect(cluster.server.countRequests({ method: 'PATCH', pathPattern: `/namespaces/${app.namespace}/deployments/` })).toBe(written);
    } finally {
      cluster.server.resume();
    }
    // A later tick writes it as soon as the API server answers again.
    await wait('3 replicas written', async () => (await app.deployment())?.spec?.replicas === 3);
    expect(await Promise.all(burst)).toEqual(Array(8).fill(24));
  });
});
