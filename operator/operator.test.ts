// The operator against the in-memory API server: what an App turns into, how changes roll out, what its
// status says, and what happens when it is invalid or deleted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { waitFor } from '../test/support/wait.ts';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import type { Operator } from './main.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import {
  STATE_TIMEOUT_MS,
  condition,
  createApp,
  createCodeConfigMap,
  createNamespace,
  gone,
  isReadyAtGeneration,
  paths,
  prepareCluster,
  testOperator,
  waitForApp,
  type TestCluster,
} from '../test/support/fake-cluster.ts';

interface Deployment extends KubeObject {
  spec: { replicas: number; template: { metadata: { annotations?: Record<string, string> }; spec: { initContainers?: { args: string[] }[]; containers: { name: string }[] } } };
  status?: Record<string, unknown>;
}

let cluster: TestCluster<KubeApiServer>;
let operator: Operator;
let api: KubeApi;

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  api = cluster.api;
  operator = testOperator(cluster, { ingress: { className: 'nginx', host: 'apps.example', tls: true } });
  operator.start();
});

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
});

/** A namespace of its own for each test, with the App's code. */
async function namespaceWithCode(namespace: string, app = 'hello'): Promise<void> {
  await createNamespace(api, namespace);
  await createCodeConfigMap(api, namespace, `${app}-code`, app, { 'main.py': 'def run():\n    return "hi"\n' });
}

const sidecarArgs = (deployment: Deployment) => deployment.spec.template.spec.initContainers![0]!.args;

describe('reconciling an App', () => {
  it('applies its Deployment, Service and Ingress, owned by it, and the namespace’s sidecar RBAC; reports Ready', async () => {
    await namespaceWithCode('create');
    const created = await createApp(api, 'create', 'hello', pythonSpec());
    const app = await waitForApp(api, 'create', 'hello', isReadyAtGeneration, 'Ready');

    expect(condition(app, 'Ready')).toMatchObject({ status: 'True', reason: 'ChildrenApplied' });
    expect(condition(app, 'Available')).toMatchObject({ status: 'False', reason: 'NoReplicasAvailable' });
    expect(app.status).toMatchObject({ observedGeneration: 1, replicas: 0, readyReplicas: 0, url: 'https://apps.example/v4/create/hello' });

    for (const path of [paths.deployment('create', 'hello'), paths.service('create', 'hello'), paths.ingress('create', 'hello')]) {
      const child = await api.get(path);
      expect(child.metadata?.ownerReferences, path).toEqual([
        { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'hello', uid: created.metadata.uid, controller: true, blockOwnerDeletion: true },
      ]);
      expect(child.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('runlet');
      expect(child.metadata?.managedFields?.map((entry) => (entry as { manager: string }).manager)).toEqual(['runlet-operator']);
    }
    for (const path of [paths.serviceAccount('create', 'runlet-sidecar'), paths.role('create', 'runlet-sidecar'), paths.roleBinding('create', 'runlet-sidecar')]) {
      expect((await api.get(path)).metadata?.ownerReferences, path).toBeUndefined();
    }
    const deployment = await api.get<Deployment>(paths.deployment('create', 'hello'));
    expect(deployment.spec.template.metadata.annotations?.['runlet.dev/code-hash']).toMatch(/^[0-9a-f]{16}$/);
  });

  it('applies a Service deleted by someone else again at once (it is watched), not at the next resync', async () => {
    await namespaceWithCode('drift');
    await createApp(api, 'drift', 'hello', pythonSpec());
    await waitForApp(api, 'drift', 'hello', isReadyAtGeneration, 'Ready');
    const before = await api.get(paths.service('drift', 'hello'));

    await api.delete(paths.service('drift', 'hello'));
    const again = await waitFor(
      async () => {
        const service = await api.find(paths.service('drift', 'hello'));
        return service !== undefined && service.metadata?.uid !== before.metadata?.uid && service;
      },
      { timeoutMs: STATE_TIMEOUT_MS, what: 'the Service applied again' },
    );
    expect(again.metadata?.ownerReferences?.[0]?.kind).toBe('App');
  });

  it('rolls a spec change out to the Deployment and records the generation it observed', async () => {
    await namespaceWithCode('change');
    await createApp(api, 'change', 'hello', pythonSpec());
    await waitForApp(api, 'change', 'hello', isReadyAtGeneration, 'Ready at generation 1');

    await api.mergePatch(paths.app('change', 'hello'), { spec: { scaling: { minReplicas: 2, maxReplicas: 3, replicaConcurrency: 9 } } });
    const app = await waitForApp(api, 'change', 'hello', (a) => a.metadata.generation === 2 && isReadyAtGeneration(a), 'Ready at generation 2');
    expect(condition(app, 'Ready')).toMatchObject({ status: 'True' });
    const deployment = await api.get<Deployment>(paths.deployment('change', 'hello'));
    expect(deployment.spec.replicas).toBe(2);
    expect(sidecarArgs(deployment).join(' ')).toContain('--concurrency 9');
  });

  it('rolls the pods when the code ConfigMap changes', async () => {
    await namespaceWithCode('code');
    await createApp(api, 'code', 'hello', pythonSpec());
    await waitForApp(api, 'code', 'hello', isReadyAtGeneration, 'Ready');
    const hashOf = async () => (await api.get<Deployment>(paths.deployment('code', 'hello'))).spec.template.metadata.annotations?.['runlet.dev/code-hash'];
    const before = await hashOf();

    await api.mergePatch(paths.configMap('code', 'hello-code'), { data: { 'main.py': 'def run():\n    return "changed"\n' } });
    await waitFor(async () => (await hashOf()) !== before, { timeoutMs: STATE_TIMEOUT_MS, what: 'a new code hash on the pod template' });
  });

  it('waits for a code ConfigMap that does not exist yet, then rolls out when it appears', async () => {
    await createNamespace(api, 'late-code');
    await createApp(api, 'late-code', 'hello', pythonSpec());
    const waiting = await waitForApp(api, 'late-code', 'hello', (a) => condition(a, 'Ready')?.reason === 'CodeConfigMapNotFound', 'waiting for its code');
    expect(condition(waiting, 'Ready')?.message).toContain('hello-code');
    expect(await gone(api, paths.deployment('late-code', 'hello'))).toBe(false);

    await createCodeConfigMap(api, 'late-code', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
    await waitForApp(api, 'late-code', 'hello', isReadyAtGeneration, 'Ready once the code exists');
  });

  it('refuses an invalid spec with the reasons, keeps running, and recovers when it is fixed', async () => {
    await namespaceWithCode('invalid');
    // Both runtimes, and a grace period out of range: the test server, like an old cluster, does not enforce the CRD schema.
    await createApp(api, 'invalid', 'hello', {
      runtime: { python: { code: { configMap: { name: 'hello-code' } } }, custom: { image: 'web:1', port: 80 } },
      scaling: { responseGracePeriod: 0 },
    });
    const refused = await waitForApp(api, 'invalid', 'hello', (a) => condition(a, 'Ready')?.reason === 'InvalidSpec', 'InvalidSpec');
    expect(condition(refused, 'Ready')?.status).toBe('False');
    expect(condition(refused, 'Ready')?.message).toContain('spec.scaling.responseGracePeriod');
    expect(condition(refused, 'Ready')?.message).toContain('exactly one of');
    expect(await gone(api, paths.deployment('invalid', 'hello'))).toBe(true);

    // Still reconciling others; and the refused App was not retried in a loop.
    await namespaceWithCode('invalid-neighbour');
    await createApp(api, 'invalid-neighbour', 'hello', pythonSpec());
    await waitForApp(api, 'invalid-neighbour', 'hello', isReadyAtGeneration, 'a valid neighbour Ready');
    const statusWrites = cluster.server.countRequests({ method: 'PATCH', pathPattern: '/namespaces/invalid/apps/hello/status' });
    expect(statusWrites).toBe(1);

    await api.replace(paths.app('invalid', 'hello'), { ...refused, spec: pythonSpec() } as KubeObject);
    await waitForApp(api, 'invalid', 'hello', isReadyAtGeneration, 'Ready once fixed');
  });

  it('Available follows the Deployment’s ready replicas', async () => {
    await namespaceWithCode('available');
    await createApp(api, 'available', 'hello', pythonSpec());
    await waitForApp(api, 'available', 'hello', isReadyAtGeneration, 'Ready');

    // What the kubelet and the Deployment controller would report once a pod passes its readiness probe.
    await api.mergePatch(`${paths.deployment('available', 'hello')}/status`, { status: { replicas: 1, readyReplicas: 1, availableReplicas: 1 } });
    const available = await waitForApp(api, 'available', 'hello', (a) => condition(a, 'Available')?.status === 'True', 'Available');
    expect(condition(available, 'Available')?.reason).toBe('MinimumReplicasAvailable');
    expect(available.status).toMatchObject({ replicas: 1, readyReplicas: 1 });

    await api.mergePatch(`${paths.deployment('available', 'hello')}/status`, { status: { readyReplicas: 0, availableReplicas: 0 } });
    const lost = await waitForApp(api, 'available', 'hello', (a) => condition(a, 'Available')?.status === 'False', 'no longer Available');
    expect(condition(lost, 'Available')?.reason).toBe('NoReplicasAvailable');
  });

  it('says ScaledToZero for an App with minReplicas 0', async () => {
    await namespaceWithCode('zero');
    await createApp(api, 'zero', 'hello', pythonSpec({ scaling: { minReplicas: 0, maxReplicas: 1 } }));
    const app = await waitForApp(api, 'zero', 'hello', isReadyAtGeneration, 'Ready');
    expect(condition(app, 'Available')).toMatchObject({ status: 'False', reason: 'ScaledToZero' });
    // Not the operator's to apply: the scale subresource owns it (the holder wakes the app, the scaler puts it to sleep).
    expect((await api.get<Deployment>(paths.deployment('zero', 'hello'))).spec.replicas).toBeUndefined();
  });

  it('puts back a Deployment deleted by hand', async () => {
    await namespaceWithCode('repair');
    await createApp(api, 'repair', 'hello', pythonSpec());
    await waitForApp(api, 'repair', 'hello', isReadyAtGeneration, 'Ready');
    const first = await api.get(paths.deployment('repair', 'hello'));

    await api.delete(paths.deployment('repair', 'hello'));
    await waitFor(async () => {
      const again = await api.find(paths.deployment('repair', 'hello'));
      return again !== undefined && again.metadata?.uid !== first.metadata?.uid;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the Deployment to be re-created' });
  });

  it('deleting the App deletes its children (garbage collection) but not the shared sidecar RBAC', async () => {
    await namespaceWithCode('delete');
    await createApp(api, 'delete', 'hello', pythonSpec());
    await waitForApp(api, 'delete', 'hello', isReadyAtGeneration, 'Ready');

    await api.delete(paths.app('delete', 'hello'));
    await waitFor(async () => (await gone(api, paths.deployment('delete', 'hello'))) && (await gone(api, paths.service('delete', 'hello'))) && (await gone(api, paths.ingress('delete', 'hello'))), {
      timeoutMs: STATE_TIMEOUT_MS,
      what: 'the children to be gone',
    });
    expect(await gone(api, paths.serviceAccount('delete', 'runlet-sidecar'))).toBe(false);
    expect(await gone(api, paths.roleBinding('delete', 'runlet-sidecar'))).toBe(false);
  });
});

describe('the operator process', () => {
  it('serves readiness, liveness and metrics', async () => {
    const url = await operator.listen();
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${url}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', leader: true });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/runlet_operator_reconciles_total\{outcome="reconciled"\} [1-9]/);
    expect(metrics).toContain('runlet_operator_reconcile_duration_seconds_bucket');
    expect(metrics).toContain('runlet_operator_queue_depth');
    expect(metrics).toMatch(/runlet_operator_leader 1/);
  });

  it('knows the Apps without asking the API server (for the management API)', () => {
    expect(operator.apps.hasApp('create', 'hello')).toBe(true);
    expect(operator.apps.hasApp('create', 'nope')).toBe(false);
    expect(operator.apps.get('change', 'hello')?.spec.scaling.minReplicas).toBe(2);
  });
});
