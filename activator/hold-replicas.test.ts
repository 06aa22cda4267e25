// The holder's view of an App's replicas against the in-memory API server and its endpoints controller: the
// Endpoints of the App's replicas Service (as the operator renders it) tell a wait when a pod becomes ready; a
// wait ends at its bound or at stop() — also one that begins after stop(), so closing the holder never waits out
// a cold-start limit; Endpoints of another name (another Service's, one a tenant wrote) are not the App's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { renderReplicasService } from '../operator/render/service.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { createNamespace, prepareCluster, type TestCluster } from '../test/support/fake-cluster.ts';
import { kubePathOf } from '../test/support/kube-path.ts';
import { testLogger } from '../test/support/logger.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';
import { createPod, podPath, setPodReady } from '../test/support/runlogs.ts';
import { ReadyReplicas, replicasView } from './hold-replicas.ts';
import { replicasServiceName } from '../operator/render/names.ts';

const NAMESPACE = 'held';
const LIMIT_MS = 60_000;

let cluster: TestCluster<KubeApiServer>;
let api: KubeApi;

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  api = cluster.api;
  await createNamespace(api, NAMESPACE);
  for (const name of ['hello', 'other']) {
    const service = renderReplicasService(storedApp(pythonSpec({ scaling: { minReplicas: 0 } }), { name, namespace: NAMESPACE }));
    await api.create(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/services`), service as KubeObject);
  }
});

afterAll(async () => {
  await cluster?.close();
});

describe('the holder’s ready replicas', () => {
  it('ends a wait when a pod of the App becomes ready (with an IP), and every wait at stop(), also one begun after it', async () => {
    const replicas = new ReadyReplicas({ api, logger: testLogger(), watchdogMs: 60_000 });
    await createPod(api, NAMESPACE, 'hello-1', 'hello');
    const waiting = replicas.waitForReadyReplica(NAMESPACE, 'hello', LIMIT_MS);
    await api.mergePatch(kubePathOf(`${podPath(NAMESPACE, 'hello-1')}/status`), { status: { podIP: '192.0.2.1' } });
    await setPodReady(api, NAMESPACE, 'hello-1', true);
    expect(await waiting).toEqual({ name: 'hello-1', ip: '192.0.2.1' });
    expect(replicas.readyReplicas(NAMESPACE, 'hello')).toEqual([{ name: 'hello-1', ip: '192.0.2.1' }]);

    // Not ready again: no longer a replica to hand calls to.
    await setPodReady(api, NAMESPACE, 'hello-1', false);
    await expect.poll(() => replicas.readyReplicas(NAMESPACE, 'hello')).toEqual([]);

    const pending = replicas.waitForReadyReplica(NAMESPACE, 'other', LIMIT_MS);
    const started = performance.now();
    await replicas.stop();
    expect(await pending).toBeNull();
    expect(await replicas.waitForReadyReplica(NAMESPACE, 'other', LIMIT_MS)).toBeNull();
    expect(performance.now() - started, 'no wait lasted its limit').toBeLessThan(LIMIT_MS / 2);
  });

  it('ends at stop() a wait for a namespace whose Endpoints never arrive, not at its call’s limit', async () => {
    await createNamespace(api, 'stuck');
    cluster.server.hangNext({ pathPattern: '/namespaces/stuck/endpoints', times: Infinity });
    const replicas = new ReadyReplicas({ api, logger: testLogger(), watchdogMs: 60_000 });
    const waiting = replicas.waitForReadyReplica('stuck', 'hello', LIMIT_MS);
    await cluster.server.waitForRequest({ pathPattern: '/namespaces/stuck/endpoints' });
    const started = performance.now();
    await replicas.stop();
    expect(await waiting).toBeNull();
    // Not its limit (60 s), nor the API client's timeout for the list that never answers (30 s).
    expect(performance.now() - started, 'the wait and the list ended with stop()').toBeLessThan(10_000);
  });

  it('takes no Endpoints but those of the App’s replicas Service: not the App’s own Service’s, not one named as the App', async () => {
    const replicas = new ReadyReplicas({ api, logger: testLogger(), watchdogMs: 60_000 });
    try {
      // Endpoints a tenant wrote under the App's own name (and its Service's), listing an address of its choosing.
      await api.create(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/endpoints`), {
        apiVersion: 'v1',
        kind: 'Endpoints',
        metadata: { name: 'other', labels: { 'runlet.dev/app': 'other' } },
        subsets: [{ addresses: [{ ip: '192.0.2.99', targetRef: { kind: 'Pod', name: 'other-1', namespace: NAMESPACE } }], ports: [{ port: 8000 }] }],
      } as KubeObject);
      expect(await replicas.whenSynced(NAMESPACE, LIMIT_MS)).toBe(true);
      expect(replicas.readyReplicas(NAMESPACE, 'other')).toEqual([]);
      expect(await replicas.waitForReadyReplica(NAMESPACE, 'other', 200)).toBeNull();
    } finally {
      await replicas.stop();
    }
  });
});

describe('what the holder keeps of an Endpoints', () => {
  const addresses = (count: number) => Array.from({ length: count }, (_, index) => ({ ip: `10.0.${index >> 8}.${index & 255}`, targetRef: { kind: 'Pod', name: `p-${index}`, namespace: NAMESPACE, uid: 'u' } }));
  const endpoints = (name: string, count: number) => ({ metadata: { name, namespace: NAMESPACE, labels: { a: 'b' } }, subsets: [{ addresses: addresses(count), ports: [{ port: 8000 }] }] });

  it('keeps only the names of another Service’s Endpoints, and at most 1,000 addresses of a replicas Service’s', () => {
    expect(replicasView(endpoints('web', 5_000)).subsets).toEqual([]);
    const kept = replicasView(endpoints(replicasServiceName('hello'), 5_000));
    expect(kept.subsets!.flatMap((subset) => subset.addresses ?? [])).toHaveLength(1_000);
    expect(kept.subsets![0]!.addresses![0]).toEqual({ ip: '10.0.0.0', targetRef: { kind: 'Pod', name: 'p-0' } });
    expect(kept.metadata).toEqual({ name: replicasServiceName('hello'), namespace: NAMESPACE, resourceVersion: undefined });
  });
});
