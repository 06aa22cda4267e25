import {
  AppsV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1Deployment,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { BUILTIN_RESOURCES, apiVersionOf } from './resources.ts';
import { failureOf, serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ core: config.makeApiClient(CoreV1Api), apps: config.makeApiClient(AppsV1Api) }));

function deployment(name: string, replicas = 1): V1Deployment {
  return {
    metadata: { name, labels: { app: name } },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } },
    },
  };
}

describe('CRUD', () => {
  it('creates, reads, replaces and deletes with server-owned metadata', async () => {
    const created = await kube.core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'settings' }, data: { a: '1' } },
    });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.metadata?.namespace).toBe('default');
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(Number(created.metadata?.resourceVersion)).toBeGreaterThan(0);

    const read = await kube.core.readNamespacedConfigMap({ name: 'settings', namespace: 'default' });
    expect(read.data).toEqual({ a: '1' });

    const replaced = await kube.core.replaceNamespacedConfigMap({
      name: 'settings',
      namespace: 'default',
      body: { ...read, data: { a: '2' } },
    });
    expect(replaced.data).toEqual({ a: '2' });
    expect(replaced.metadata?.uid).toBe(created.metadata?.uid);
    expect(Number(replaced.metadata?.resourceVersion)).toBeGreaterThan(Number(read.metadata?.resourceVersion));

    await kube.core.deleteNamespacedConfigMap({ name: 'settings', namespace: 'default' });
    const gone = await failureOf(kube.core.readNamespacedConfigMap({ name: 'settings', namespace: 'default' }));
    expect(gone.code).toBe(404);
    expect(gone.status).toMatchObject({
      kind: 'Status',
      reason: 'NotFound',
      code: 404,
      message: 'configmaps "settings" not found',
      details: { name: 'settings', kind: 'configmaps' },
    });
  });

  it('serves every stored built-in kind through discovery-driven KubernetesObjectApi', async () => {
    const objects = KubernetesObjectApi.makeApiClient(kube.server.kubeConfig());
    const storedKinds = BUILTIN_RESOURCES.filter((t) => t.verbs.includes('get') && t.kind !== 'CustomResourceDefinition');
    // The fields a kind cannot be created without.
    const required: Record<string, object> = { EndpointSlice: { addressType: 'IPv4', endpoints: [] } };
    for (const type of storedKinds) {
      const name = `x-${type.singular}`;
      const spec = {
        apiVersion: apiVersionOf(type),
        kind: type.kind,
        metadata: { name, ...(type.namespaced ? { namespace: 'default' } : {}) },
        ...required[type.kind],
      };
      const created = await objects.create<KubernetesObject>(spec);
      expect(created.metadata?.uid, type.kind).toBeDefined();
      expect((await objects.read(spec)).metadata?.name).toBe(name);
      const list = await objects.list(apiVersionOf(type), type.kind, type.namespaced ? 'default' : undefined);
      expect(list.items.map((i) => i.metadata?.name)).toContain(name);
      await objects.delete(spec);
      expect((await failureOf(objects.read(spec))).code, type.kind).toBe(404);
    }
  });

  it('deletes collections by label selector', async () => {
    for (const [name, app] of [['a', 'x'], ['b', 'x'], ['c', 'y']]) {
      await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name, labels: { app } } } });
    }
    await kube.core.deleteCollectionNamespacedConfigMap({ namespace: 'default', labelSelector: 'app=x' });
    const left = await kube.core.listNamespacedConfigMap({ namespace: 'default' });
    expect(left.items.map((i) => i.metadata?.name)).toEqual(['c']);
  });

  it('answers 409 AlreadyExists for a duplicate name', async () => {
    await kube.core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 's' } } });
    const duplicate = await failureOf(kube.core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 's' } } }));
    expect(duplicate.code).toBe(409);
    expect(duplicate.status).toMatchObject({ reason: 'AlreadyExists', message: 'secrets "s" already exists' });
  });

  it('answers 409 Conflict for an update with a stale resourceVersion', async () => {
    const first = await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'c' } } });
    await kube.core.replaceNamespacedConfigMap({ name: 'c', namespace: 'default', body: { ...first, data: { x: '1' } } });
    const stale = await failureOf(
      kube.core.replaceNamespacedConfigMap({ name: 'c', namespace: 'default', body: { ...first, data: { x: '2' } } }),
    );
    expect(stale.code).toBe(409);
    expect(stale.status.reason).toBe('Conflict');
    expect(stale.status.message).toContain('the object has been modified');
  });

  it('does not bump resourceVersion for an update that changes nothing', async () => {
    const created = await kube.core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'same' }, data: { a: '1' } },
    });
    const again = await kube.core.replaceNamespacedConfigMap({ name: 'same', namespace: 'default', body: created });
    expect(again.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion);
  });

  it('refuses objects in namespaces that do not exist, and invalid names and labels', async () => {
    const missing = await failureOf(kube.core.createNamespacedConfigMap({ namespace: 'nope', body: { metadata: { name: 'c' } } }));
    expect(missing.code).toBe(404);
    expect(missing.status.message).toBe('namespaces "nope" not found');

    const badName = await failureOf(kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'Bad_Name' } } }));
    expect(badName.code).toBe(422);
    expect(badName.status.reason).toBe('Invalid');

    const longLabel = { app: 'x'.repeat(64) };
    const badLabel = await failureOf(
      kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'c', labels: longLabel } } }),
    );
    expect(badLabel.code).toBe(422);
  });

  it('refuses endpoint addresses no other node could reach (loopback, link-local, unspecified), in the real server’s words', async () => {
    const endpoints = (ip: string) => ({ metadata: { name: 'web' }, subsets: [{ addresses: [{ ip }], ports: [{ name: 'http', port: 8000 }] }] });
    const loopback = await failureOf(kube.core.createNamespacedEndpoints({ namespace: 'default', body: endpoints('127.0.0.1') }));
    expect(loopback.code).toBe(422);
    // What kube-apiserver 1.20 answers (test/operator/control-plane.test.ts asserts the same there).
    expect(loopback.status.message).toBe('Endpoints "web" is invalid: subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8)');
    for (const ip of ['::1', '169.254.1.1', '0.0.0.0', '224.0.0.5', 'fe80::1', 'not-an-ip']) {
      expect((await failureOf(kube.core.createNamespacedEndpoints({ namespace: 'default', body: endpoints(ip) }))).code, ip).toBe(422);
    }
    const created = await kube.core.createNamespacedEndpoints({ namespace: 'default', body: endpoints('192.0.2.1') });
    expect(created.subsets?.[0]?.addresses?.[0]?.ip).toBe('192.0.2.1');
  });

  it('refuses an EndpointSlice without an address type, or with an address not of its type', async () => {
    const slices = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices';
    const slice = (addressType: string | undefined, address: string) => ({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'web-1' }, addressType, endpoints: [{ addresses: [address] }], ports: [{ name: 'http', port: 8000 }] });
    const create = (body: object) => kube.server.fetch(slices, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await create(slice(undefined, '192.0.2.1'))).status).toBe(422);
    expect((await create(slice('IPv4', 'fd00::1'))).status).toBe(422);
    expect((await create(slice('IPv6', '192.0.2.1'))).status).toBe(422);
    expect((await create(slice('IPv4', 'not-an-ip'))).status).toBe(422);
    expect((await create({ ...slice('IPv4', '192.0.2.1'), endpoints: [{ addresses: [] }] })).status).toBe(422);
    expect((await create(slice('IPv4', '192.0.2.1'))).status).toBe(201);
  });

  it('generates names from generateName', async () => {
    const created = await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { generateName: 'run-' } } });
    expect(created.metadata?.name).toMatch(/^run-[a-z0-9]{5}$/);
  });

  it('turns secret stringData into base64 data', async () => {
    const secret = await kube.core.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 'token' }, stringData: { key: 'value' } },
    });
    expect(secret.data).toEqual({ key: Buffer.from('value').toString('base64') });
    expect(secret.stringData).toBeUndefined();
  });
});

describe('generation', () => {
  it('is bumped by spec changes only, not by metadata or status changes', async () => {
    const created = await kube.apps.createNamespacedDeployment({ namespace: 'default', body: deployment('web') });
    expect(created.metadata?.generation).toBe(1);

    const labelled = await kube.apps.patchNamespacedDeployment(
      { name: 'web', namespace: 'default', body: { metadata: { labels: { tier: 'front' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(labelled.metadata?.generation).toBe(1);

    const withStatus = await kube.apps.replaceNamespacedDeploymentStatus({
      name: 'web',
      namespace: 'default',
      body: { ...labelled, status: { observedGeneration: 1, replicas: 1 } },
    });
    expect(withStatus.metadata?.generation).toBe(1);

    const scaled = await kube.apps.patchNamespacedDeployment(
      { name: 'web', namespace: 'default', body: { spec: { replicas: 3 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(scaled.metadata?.generation).toBe(2);
  });
});

describe('status subresource', () => {
  it('ignores status on main-resource writes and everything but status on /status writes', async () => {
    const created = await kube.apps.createNamespacedDeployment({
      namespace: 'default',
      body: { ...deployment('api'), status: { replicas: 9 } },
    });
    expect(created.status).toBeUndefined();

    const statusWrite = await kube.apps.replaceNamespacedDeploymentStatus({
      name: 'api',
      namespace: 'default',
      body: { ...created, spec: { ...created.spec!, replicas: 5 }, status: { readyReplicas: 1 } },
    });
    expect(statusWrite.status).toEqual({ readyReplicas: 1 });
    expect(statusWrite.spec?.replicas).toBe(1);

    const mainWrite = await kube.apps.replaceNamespacedDeployment({
      name: 'api',
      namespace: 'default',
      body: { ...statusWrite, spec: { ...statusWrite.spec!, replicas: 2 }, status: { readyReplicas: 7 } },
    });
    expect(mainWrite.spec?.replicas).toBe(2);
    expect(mainWrite.status).toEqual({ readyReplicas: 1 });

    const patched = await kube.apps.patchNamespacedDeploymentStatus(
      { name: 'api', namespace: 'default', body: { status: { availableReplicas: 1 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(patched.status).toEqual({ readyReplicas: 1, availableReplicas: 1 });
  });
});

describe('finalizers', () => {
  it('keeps a deleted object with finalizers until the last finalizer is removed', async () => {
    await kube.core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'held', finalizers: ['runlet.dev/cleanup'] } },
    });
    await kube.core.deleteNamespacedConfigMap({ name: 'held', namespace: 'default' });
    const marked = await kube.core.readNamespacedConfigMap({ name: 'held', namespace: 'default' });
    expect(marked.metadata?.deletionTimestamp).toBeInstanceOf(Date);

    const addFinalizer = await failureOf(
      kube.core.patchNamespacedConfigMap(
        { name: 'held', namespace: 'default', body: { metadata: { finalizers: ['runlet.dev/cleanup', 'other/x'] } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    expect(addFinalizer.code).toBe(422);

    await kube.core.patchNamespacedConfigMap(
      { name: 'held', namespace: 'default', body: { metadata: { finalizers: null } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect((await failureOf(kube.core.readNamespacedConfigMap({ name: 'held', namespace: 'default' }))).code).toBe(404);
  });
});
