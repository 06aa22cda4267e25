// The holder's view of app pods against the in-memory API server: a wait ends when a pod of the App becomes
// ready, at its bound, or at stop() — also a wait that begins after stop(), so closing the holder never waits
// out a cold-start limit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeApi } from '../kube/client.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { createNamespace, prepareCluster, type TestCluster } from '../test/support/fake-cluster.ts';
import { testLogger } from '../test/support/logger.ts';
import { createPod, podPath, setPodReady } from '../test/support/runlogs.ts';
import { ReadyPods } from './hold-pods.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const NAMESPACE = 'held';
const LIMIT_MS = 60_000;

let cluster: TestCluster<KubeApiServer>;
let api: KubeApi;

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  api = cluster.api;
  await createNamespace(api, NAMESPACE);
});

afterAll(async () => {
  await cluster?.close();
});

describe('the holder’s ready pods', () => {
  it('ends a wait when a pod of the App becomes ready (with an IP), and every wait at stop(), also one begun after it', async () => {
    const pods = new ReadyPods({ api, logger: testLogger(), watchdogMs: 60_000 });
    pods.start();
    await createPod(api, NAMESPACE, 'hello-1', 'hello');
    const waiting = pods.waitForReadyPod(NAMESPACE, 'hello', LIMIT_MS);
    await api.mergePatch(kubePathOf(`${podPath(NAMESPACE, 'hello-1')}/status`), { status: { podIP: '192.0.2.1' } });
    await setPodReady(api, NAMESPACE, 'hello-1', true);
    expect((await waiting)?.metadata?.name).toBe('hello-1');

    const pending = pods.waitForReadyPod(NAMESPACE, 'other', LIMIT_MS);
    const started = performance.now();
    await pods.stop();
    expect(await pending).toBeNull();
    expect(await pods.waitForReadyPod(NAMESPACE, 'other', LIMIT_MS)).toBeNull();
    expect(performance.now() - started, 'no wait lasted its limit').toBeLessThan(LIMIT_MS / 2);
  });
});
