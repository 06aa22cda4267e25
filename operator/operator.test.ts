// The operator against the in-memory API server: what an App turns into, how changes roll out, what its
// status says, and what happens when it is invalid or deleted.
import type { V1EnvVar, V1Lifecycle } from '@kubernetes/client-node';
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
  isAppliedAtGeneration,
  paths,
  prepareCluster,
  testOperator,
  waitForApp,
  type TestCluster,
} from '../test/support/fake-cluster.ts';
import { kubePathOf } from '../test/support/kube-path.ts';
import type { KubePath } from '../kube/paths.ts';

interface Deployment extends KubeObject {
  spec: {
    replicas: number;
    template: {
      metadata: { annotations?: Record<string, string> };
      spec: { initContainers?: { args: string[]; env?: V1EnvVar[] }[]; containers: { name: string; lifecycle?: V1Lifecycle }[] };
    };
  };
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

/** The namespace's admin key (operator/admin-keys.ts): what signs cancels to its sidecars. */
async function adminKeyOf(namespace: string): Promise<string> {
  const secret = await api.get<{ data: Record<string, string>; metadata: { ownerReferences?: { name: string }[] } } & KubeObject>(kubePathOf(`/api/v1/namespaces/${namespace}/secrets/runlet-admin-key`));
  expect(secret.metadata.ownerReferences?.map((ref) => ref.name)).toEqual(['hello']);
  return Buffer.from(secret.data.current!, 'base64').toString('utf8');
}

describe('reconciling an App', () => {
  it('applies its Deployment, Service, Ingress and NetworkPolicy (on by default), owned by it, and the namespace’s sidecar RBAC; reports ChildrenApplied', async () => {
    await namespaceWithCode('create');
    const created = await createApp(api, 'create', 'hello', pythonSpec());
    const app = await waitForApp(api, 'create', 'hello', isAppliedAtGeneration, 'ChildrenApplied');

    expect(condition(app, 'ChildrenApplied')).toMatchObject({ status: 'True', reason: 'Applied', message: 'applied Deployment, Service, Ingress, NetworkPolicy' });
    // No Deployment controller runs here: nothing rolls out.
    expect(condition(app, 'Ready')).toMatchObject({ status: 'False', reason: 'RollingOut' });
    expect(condition(app, 'Available')).toMatchObject({ status: 'False', reason: 'MinimumReplicasUnavailable' });
    expect(app.status).toMatchObject({ observedGeneration: 1, replicas: 0, readyReplicas: 0, url: 'https://apps.example/v4/create/hello' });

    for (const path of [paths.deployment('create', 'hello'), paths.service('create', 'hello'), paths.ingress('create', 'hello')]) {
      const child = await api.get(path);
      expect(child.metadata?.ownerReferences, path.toString()).toEqual([
        { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'hello', uid: created.metadata.uid, controller: true, blockOwnerDeletion: true },
      ]);
      expect(child.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('runlet');
      // The Deployment's spec.replicas is the autoscaler's (maxReplicas defaults to 10): handed over by its own apply.
      const managers = path.toString() === paths.deployment('create', 'hello').toString() ? ['runlet-operator', 'runlet-autoscaler'] : ['runlet-operator'];
      expect(child.metadata?.managedFields?.map((entry) => entry.manager)).toEqual(managers);
    }
    // Shared by the namespace's Apps: owned by each, controlled by none.
    for (const path of [paths.serviceAccount('create', 'runlet-sidecar'), paths.roleBinding('create', 'runlet-sidecar')]) {
      expect((await api.get(path)).metadata?.ownerReferences, path.toString()).toEqual([{ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'hello', uid: created.metadata.uid }]);
    }
    expect((await api.get<KubeObject & { roleRef: unknown }>(paths.roleBinding('create', 'runlet-sidecar'))).roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-sidecar' });
    expect(await gone(api, paths.role('create', 'runlet-sidecar')), 'no Role of its own').toBe(true);
    const deployment = await api.get<Deployment>(paths.deployment('create', 'hello'));
    expect(deployment.spec.template.metadata.annotations?.['runlet.dev/code-hash']).toMatch(/^[0-9a-f]{16}$/);
  });

  it('applies a Service deleted by someone else again at once (it is watched), not at the next resync', async () => {
    await namespaceWithCode('drift');
    await createApp(api, 'drift', 'hello', pythonSpec());
    await waitForApp(api, 'drift', 'hello', isAppliedAtGeneration, 'applied');
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

  it('applies an Ingress deleted or edited by someone else again at once (it is watched)', async () => {
    await namespaceWithCode('ingress-drift');
    await createApp(api, 'ingress-drift', 'hello', pythonSpec());
    await waitForApp(api, 'ingress-drift', 'hello', isAppliedAtGeneration, 'applied');
    const path = paths.ingress('ingress-drift', 'hello');
    const before = await api.get<KubeObject & { spec: { rules: { host: string }[] } }>(path);

    await api.mergePatch(path, { spec: { rules: [{ host: 'elsewhere.example' }] } });
    await waitFor(async () => (await api.get<typeof before>(path)).spec.rules[0]?.host === 'apps.example', { timeoutMs: STATE_TIMEOUT_MS, what: 'the Ingress host applied again' });

    await api.delete(path);
    await waitFor(async () => {
      const ingress = await api.find(path);
      return ingress !== undefined && ingress.metadata?.uid !== before.metadata?.uid;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the Ingress applied again' });
  });

  it('applies the sidecar RoleBinding and ServiceAccount deleted or edited by someone else again at once (they are watched)', async () => {
    await namespaceWithCode('rbac-drift');
    await createApp(api, 'rbac-drift', 'hello', pythonSpec());
    await waitForApp(api, 'rbac-drift', 'hello', isAppliedAtGeneration, 'applied');
    const bindingPath = paths.roleBinding('rbac-drift', 'runlet-sidecar');
    type Binding = KubeObject & { subjects: { name: string }[] };
    const binding = await api.get<Binding>(bindingPath);

    await api.mergePatch(bindingPath, { subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: 'rbac-drift' }] });
    await waitFor(async () => (await api.get<Binding>(bindingPath)).subjects[0]?.name === 'runlet-sidecar', { timeoutMs: STATE_TIMEOUT_MS, what: 'the RoleBinding subject applied again' });

    await api.delete(bindingPath);
    await waitFor(async () => {
      const again = await api.find(bindingPath);
      return again !== undefined && again.metadata?.uid !== binding.metadata?.uid;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the RoleBinding applied again' });

    const accountPath = paths.serviceAccount('rbac-drift', 'runlet-sidecar');
    const account = await api.get(accountPath);
    await api.delete(accountPath);
    await waitFor(async () => {
      const again = await api.find(accountPath);
      return again !== undefined && again.metadata?.uid !== account.metadata?.uid;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the ServiceAccount applied again' });
  });

  it('rolls a spec change out to the Deployment and records the generation it observed', async () => {
    await namespaceWithCode('change');
    await createApp(api, 'change', 'hello', pythonSpec());
    await waitForApp(api, 'change', 'hello', isAppliedAtGeneration, 'applied at generation 1');

    await api.mergePatch(paths.app('change', 'hello'), { spec: { scaling: { minReplicas: 2, maxReplicas: 2, replicaConcurrency: 9 } } });
    const app = await waitForApp(api, 'change', 'hello', (a) => a.metadata.generation === 2 && isAppliedAtGeneration(a), 'applied at generation 2');
    expect(condition(app, 'ChildrenApplied')).toMatchObject({ status: 'True', observedGeneration: 2 });
    const deployment = await api.get<Deployment>(paths.deployment('change', 'hello'));
    expect(deployment.spec.replicas).toBe(2);
    expect(sidecarArgs(deployment).join(' ')).toContain('--concurrency 9');
  });

  it('puts no secret in the pod template (preStop GET /drain); makes each namespace a random admin key Secret, owned by its Apps, kept across spec changes and a new operator', async () => {
    await namespaceWithCode('admin-key');
    await namespaceWithCode('admin-key-b');
    await createApp(api, 'admin-key', 'hello', pythonSpec());
    await createApp(api, 'admin-key-b', 'hello', pythonSpec());
    await waitForApp(api, 'admin-key', 'hello', isAppliedAtGeneration, 'applied at generation 1');
    await waitForApp(api, 'admin-key-b', 'hello', isAppliedAtGeneration, 'applied at generation 1');
    const template = (await api.get<Deployment>(paths.deployment('admin-key', 'hello'))).spec.template;
    expect(JSON.stringify(template)).not.toMatch(/RUNLET_DRAIN_TOKEN|\/drain\//);
    expect(template.spec.containers.find((container) => container.name === 'app')?.lifecycle?.preStop?.httpGet?.path).toBe('/drain');
    const first = await adminKeyOf('admin-key');
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(await adminKeyOf('admin-key-b'), 'another namespace’s key').not.toBe(first);

    // A new operator (a restart, another leader) keeps the key the namespace has.
    await operator.stop();
    operator = testOperator(cluster, { ingress: { className: 'nginx', host: 'apps.example', tls: true } });
    operator.start();
    await api.mergePatch(paths.app('admin-key', 'hello'), { spec: { scaling: { replicaConcurrency: 8 } } });
    await waitForApp(api, 'admin-key', 'hello', (a) => a.metadata.generation === 2 && isAppliedAtGeneration(a), 'applied at generation 2');
    expect(sidecarArgs(await api.get<Deployment>(paths.deployment('admin-key', 'hello'))).join(' ')).toContain('--concurrency 8');
    expect(await adminKeyOf('admin-key')).toBe(first);
  });

  it('rolls the pods when the code ConfigMap changes', async () => {
    await namespaceWithCode('code');
    await createApp(api, 'code', 'hello', pythonSpec());
    await waitForApp(api, 'code', 'hello', isAppliedAtGeneration, 'applied');
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
    await waitForApp(api, 'late-code', 'hello', isAppliedAtGeneration, 'applied once the code exists');
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
    await waitForApp(api, 'invalid-neighbour', 'hello', isAppliedAtGeneration, 'a valid neighbour applied');
    const statusWrites = cluster.server.countRequests({ method: 'PATCH', pathPattern: '/namespaces/invalid/apps/hello/status' });
    expect(statusWrites).toBe(1);

    await api.replace(paths.app('invalid', 'hello'), { ...refused, spec: pythonSpec() } as KubeObject);
    await waitForApp(api, 'invalid', 'hello', isAppliedAtGeneration, 'applied once fixed');
  });

  it('refuses a scaling target outside the range of its metric, naming the field', async () => {
    await namespaceWithCode('invalid-target');
    await createApp(api, 'invalid-target', 'hello', pythonSpec({ scaling: { scalingMetric: 'concurrency_utilization', scalingTarget: 150 } }));
    const refused = await waitForApp(api, 'invalid-target', 'hello', (a) => condition(a, 'Ready')?.reason === 'InvalidSpec', 'InvalidSpec');
    expect(condition(refused, 'Ready')?.message).toBe(
      'spec.scaling.scalingTarget (150) must be a percentage from 1 to 100 when spec.scaling.scalingMetric is concurrency_utilization',
    );
    expect(await gone(api, paths.deployment('invalid-target', 'hello'))).toBe(true);
  });

  it('Ready and Available follow the Deployment controller’s report', async () => {
    await namespaceWithCode('available');
    await createApp(api, 'available', 'hello', pythonSpec());
    await waitForApp(api, 'available', 'hello', isAppliedAtGeneration, 'ChildrenApplied');
    const reportStatus = (status: Record<string, unknown>) => api.mergePatch(paths.deployment('available', 'hello').subresource('status'), { status });

    // What the Deployment controller would report once the pod passes its readiness probe.
    await reportStatus({ observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 });
    const serving = await waitForApp(api, 'available', 'hello', (a) => condition(a, 'Ready')?.status === 'True', 'Ready');
    expect(condition(serving, 'Ready')?.reason).toBe('Serving');
    expect(condition(serving, 'Available')?.reason).toBe('MinimumReplicasAvailable');
    expect(serving.status).toMatchObject({ replicas: 1, readyReplicas: 1 });

    await reportStatus({ readyReplicas: 0, availableReplicas: 0 });
    const lost = await waitForApp(api, 'available', 'hello', (a) => condition(a, 'Available')?.status === 'False', 'no longer Available');
    expect(condition(lost, 'Available')?.reason).toBe('MinimumReplicasUnavailable');
    expect(condition(lost, 'Ready')).toMatchObject({ status: 'False', reason: 'MinimumReplicasUnavailable' });

    // Only a condition changes, no count: the namespace's quota refuses the replacement pod.
    const refusal = 'pods "hello-6b7f-x" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0';
    await reportStatus({ conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: refusal }] });
    const refused = await waitForApp(api, 'available', 'hello', (a) => condition(a, 'Ready')?.reason === 'PodsRefused', 'PodsRefused');
    expect(condition(refused, 'Ready')?.message).toContain(refusal);
    expect(condition(refused, 'Available')).toMatchObject({ status: 'False', reason: 'PodsRefused' });
  });

  it('records Events on the App: its failures, counted, and when it starts serving', async () => {
    await namespaceWithCode('events');
    await createApp(api, 'events', 'hello', { ...pythonSpec(), scaling: { responseGracePeriod: 0 } });
    await waitForApp(api, 'events', 'hello', (a) => condition(a, 'Ready')?.reason === 'InvalidSpec', 'InvalidSpec');
    const events = async () =>
      (await api.list<KubeObject & { reason: string; type: string; message: string; count: number }>(kubePathOf('/api/v1/namespaces/events/events'), { fieldSelector: 'involvedObject.name=hello' })).items;
    const warning = await waitFor(async () => (await events()).find((e) => e.reason === 'InvalidSpec'), { timeoutMs: STATE_TIMEOUT_MS, what: 'an InvalidSpec Event' });
    expect(warning).toMatchObject({ type: 'Warning', count: 1, involvedObject: { kind: 'App', name: 'hello', namespace: 'events' } });
    expect(warning.message).toContain('spec.scaling.responseGracePeriod');

    await api.mergePatch(paths.app('events', 'hello'), { spec: { scaling: { responseGracePeriod: 60 } } });
    await waitForApp(api, 'events', 'hello', isAppliedAtGeneration, 'ChildrenApplied once fixed');
    await api.mergePatch(paths.deployment('events', 'hello').subresource('status'), { status: { observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 } });
    const ready = await waitFor(async () => (await events()).find((e) => e.reason === 'Ready'), { timeoutMs: STATE_TIMEOUT_MS, what: 'a Ready Event' });
    expect(ready).toMatchObject({ type: 'Normal', count: 1 });
  });

  it('starts an App with minReplicas 0 at one replica: its first start shows it works (the autoscaler takes it to zero when idle)', async () => {
    await namespaceWithCode('zero');
    await createApp(api, 'zero', 'hello', pythonSpec({ scaling: { minReplicas: 0, maxReplicas: 1 } }));
    await waitForApp(api, 'zero', 'hello', isAppliedAtGeneration, 'ChildrenApplied');
    expect((await api.get<Deployment>(paths.deployment('zero', 'hello'))).spec.replicas).toBe(1);
  });

  it('points the EndpointSlices of an App with minReplicas 0 at its pods as their readiness changes, though no Deployment count does', async () => {
    await namespaceWithCode('follow');
    await createApp(api, 'follow', 'hello', pythonSpec({ scaling: { minReplicas: 0, maxReplicas: 2 } }));
    await waitForApp(api, 'follow', 'hello', isAppliedAtGeneration, 'ChildrenApplied');
    // No Deployment controller runs here: the pod is made by hand, and the Deployment's status never moves.
    const podsPath = '/api/v1/namespaces/follow/pods';
    const container = { name: 'app', image: 'app:1' };
    const pod = await api.create(kubePathOf(podsPath), { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'hello-1', labels: { 'runlet.dev/app': 'hello' } }, spec: { containers: [container] } } as KubeObject);
    // An address of a documentation range: an object only, never dialled.
    const withReady = (ready: boolean) => ({ ...pod, status: { podIP: '198.51.100.7', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] } }) as KubeObject;
    // The App's EndpointSlices (what kube-proxy routes by): the addresses of the endpoints they call ready.
    const addresses = async () =>
      (
        await api.list<KubeObject & { endpoints?: { addresses: string[]; conditions?: { ready?: boolean } }[] }>(kubePathOf('/apis/discovery.k8s.io/v1/namespaces/follow/endpointslices'), {
          labelSelector: 'kubernetes.io/service-name=hello',
        })
      ).items.flatMap((slice) => (slice.endpoints ?? []).filter((endpoint) => endpoint.conditions?.ready !== false).flatMap((endpoint) => endpoint.addresses));
    const pending = await api.replace<KubeObject>(kubePathOf(`${podsPath}/hello-1/status`), withReady(true));
    await waitFor(async () => (await addresses()).includes('198.51.100.7'), { what: 'the EndpointSlices listing the ready pod', timeoutMs: STATE_TIMEOUT_MS });
    await api.replace(kubePathOf(`${podsPath}/hello-1/status`), { ...withReady(false), metadata: pending.metadata });
    await waitFor(async () => (await addresses()).length === 0, { what: 'the EndpointSlices without the pod no longer ready', timeoutMs: STATE_TIMEOUT_MS });
  });

  it('puts back a Deployment deleted by hand', async () => {
    await namespaceWithCode('repair');
    await createApp(api, 'repair', 'hello', pythonSpec());
    await waitForApp(api, 'repair', 'hello', isAppliedAtGeneration, 'applied');
    const first = await api.get(paths.deployment('repair', 'hello'));

    await api.delete(paths.deployment('repair', 'hello'));
    await waitFor(async () => {
      const again = await api.find(paths.deployment('repair', 'hello'));
      return again !== undefined && again.metadata?.uid !== first.metadata?.uid;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the Deployment to be re-created' });
  });

  it('deleting the App deletes its children (garbage collection), and the shared sidecar RBAC with the last App of the namespace', async () => {
    await namespaceWithCode('delete');
    await createCodeConfigMap(api, 'delete', 'other-code', 'other', { 'main.py': 'def run():\n    return "hi"\n' });
    await createApp(api, 'delete', 'hello', pythonSpec());
    const other = await createApp(api, 'delete', 'other', pythonSpec({}, 'other-code'));
    await waitForApp(api, 'delete', 'hello', isAppliedAtGeneration, 'applied');
    await waitForApp(api, 'delete', 'other', isAppliedAtGeneration, 'applied');
    const rbac = [paths.serviceAccount('delete', 'runlet-sidecar'), paths.roleBinding('delete', 'runlet-sidecar')];
    const owners = async (path: KubePath) => (await api.find(path))?.metadata?.ownerReferences?.map((ref) => ref.name).sort();
    await waitFor(async () => (await Promise.all(rbac.map(owners))).every((names) => names?.join() === 'hello,other'), { timeoutMs: STATE_TIMEOUT_MS, what: 'the sidecar RBAC owned by both Apps' });

    await api.delete(paths.app('delete', 'hello'));
    await waitFor(async () => (await gone(api, paths.deployment('delete', 'hello'))) && (await gone(api, paths.service('delete', 'hello'))) && (await gone(api, paths.ingress('delete', 'hello'))), {
      timeoutMs: STATE_TIMEOUT_MS,
      what: 'the children to be gone',
    });
    for (const path of rbac) expect(await owners(path), `${path} stays for the other App`).toEqual(['other']);

    await api.delete(paths.app('delete', 'other'));
    await waitFor(async () => (await Promise.all(rbac.map((path) => gone(api, path)))).every(Boolean), { timeoutMs: STATE_TIMEOUT_MS, what: 'the sidecar RBAC gone with the last App' });

    const again = await createApp(api, 'delete', 'other', pythonSpec({}, 'other-code'));
    expect(again.metadata.uid).not.toBe(other.metadata.uid);
    await waitFor(async () => (await Promise.all(rbac.map(owners))).every((names) => names?.join() === 'other'), { timeoutMs: STATE_TIMEOUT_MS, what: 'the sidecar RBAC back for a new App' });
  });
});

describe('the operator process', () => {
  it('serves readiness and liveness on the management API port, and metrics only on a port of their own', async () => {
    const url = await operator.listen();
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${url}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', leader: true });
    // Metrics name every namespace's Apps: tenants reach the API port, and a NetworkPolicy can close only a port.
    expect((await fetch(`${url}/metrics`)).status).toBe(404);
    expect(operator.metricsUrl).not.toBe(url);
    expect((await fetch(`${operator.metricsUrl}/ready`)).status).toBe(200);
    const metrics = await (await fetch(`${operator.metricsUrl}/metrics`)).text();
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
