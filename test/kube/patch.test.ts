import {
  AppsV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { failureOf, serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ core: config.makeApiClient(CoreV1Api), objects: KubernetesObjectApi.makeApiClient(config) }));

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

async function configMap(name: string, data: Record<string, string>): Promise<void> {
  await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name }, data } });
}

describe('merge-style patches', () => {
  it('applies a JSON merge patch: maps merge, null deletes', async () => {
    await configMap('m', { keep: '1', drop: '2' });
    const patched = await kube.core.patchNamespacedConfigMap(
      { name: 'm', namespace: 'default', body: { data: { drop: null, add: '3' }, metadata: { labels: { l: 'v' } } } },
      merge,
    );
    expect(patched.data).toEqual({ keep: '1', add: '3' });
    expect(patched.metadata?.labels).toEqual({ l: 'v' });
  });

  it('drops the nulls of objects inside a value a merge patch sets whole, as kube-apiserver does', async () => {
    await kube.core.createNamespacedPod({ namespace: 'default', body: { metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'i' }] } } });
    const containers = [{ name: 'c', image: 'i', workingDir: null, env: [{ name: 'A', value: null }] }];
    const patched = await kube.objects.patch(
      { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default' }, spec: { containers } } as unknown as KubernetesObject,
      undefined,
      undefined,
      undefined,
      undefined,
      PatchStrategy.MergePatch,
    );
    expect((patched as { spec: { containers: unknown[] } }).spec.containers).toEqual([{ name: 'c', image: 'i', env: [{ name: 'A' }] }]);
  });

  it('treats a strategic merge patch as a merge patch and refuses its directives', async () => {
    await configMap('s', { a: '1' });
    const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
    const patched = await kube.core.patchNamespacedConfigMap({ name: 's', namespace: 'default', body: { data: { b: '2' } } }, strategic);
    expect(patched.data).toEqual({ a: '1', b: '2' });
    const directive = await failureOf(
      kube.core.patchNamespacedConfigMap({ name: 's', namespace: 'default', body: { data: { $patch: 'replace' } } }, strategic),
    );
    expect(directive.code).toBe(400);
    expect(directive.status.message).toContain('$patch');
  });

  it('applies a JSON patch (client-node default content type), with test operations', async () => {
    await configMap('j', { a: '1' });
    const patched = await kube.core.patchNamespacedConfigMap({
      name: 'j',
      namespace: 'default',
      body: [
        { op: 'test', path: '/data/a', value: '1' },
        { op: 'add', path: '/data/b', value: '2' },
        { op: 'remove', path: '/data/a' },
      ],
    });
    expect(patched.data).toEqual({ b: '2' });
    const failedTest = await failureOf(
      kube.core.patchNamespacedConfigMap({ name: 'j', namespace: 'default', body: [{ op: 'test', path: '/data/b', value: 'x' }] }),
    );
    expect(failedTest.code).toBe(422);
  });

  it('treats a resourceVersion in a patch as a precondition', async () => {
    await configMap('p', { a: '1' });
    const stale = await failureOf(
      kube.core.patchNamespacedConfigMap({ name: 'p', namespace: 'default', body: { metadata: { resourceVersion: '1' } } }, merge),
    );
    expect(stale.code).toBe(409);
  });
});

describe('server-side apply', () => {
  const apply = (object: KubernetesObject, manager = 'runlet-operator', force = true) =>
    kube.objects.patch(object, undefined, undefined, manager, force, PatchStrategy.ServerSideApply);

  function desired(data: Record<string, string>): KubernetesObject & { data: Record<string, string> } {
    return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'applied', namespace: 'default' }, data };
  }

  it('creates, then updates, and an identical apply changes nothing', async () => {
    const created = await apply(desired({ a: '1' }));
    expect(created.metadata?.uid).toBeDefined();
    expect(created.metadata?.managedFields?.[0]).toMatchObject({ manager: 'runlet-operator', operation: 'Apply' });

    const updated = await apply(desired({ a: '2' }));
    expect((updated as { data?: object }).data).toEqual({ a: '2' });
    expect(updated.metadata?.uid).toBe(created.metadata?.uid);

    const again = await apply(desired({ a: '2' }));
    expect(again.metadata?.resourceVersion).toBe(updated.metadata?.resourceVersion);
  });

  it('removes fields the manager stopped applying, but keeps fields others set', async () => {
    await apply(desired({ a: '1', b: '2' }));
    await kube.core.patchNamespacedConfigMap({ name: 'applied', namespace: 'default', body: { data: { c: '3' } } }, merge);
    const after = await apply(desired({ a: '1' }));
    expect((after as { data?: object }).data).toEqual({ a: '1', c: '3' });
  });

  it('refuses to change another manager’s field without force, and takes it over with force', async () => {
    await apply(desired({ a: '1' }), 'first');
    const conflict = await failureOf(apply(desired({ a: '2' }), 'second', false));
    expect(conflict.code).toBe(409);
    expect(conflict.status.message).toContain('conflict with "first"');

    const forced = await apply(desired({ a: '2' }), 'second', true);
    expect((forced as { data?: object }).data).toEqual({ a: '2' });
    // "first" no longer owns data.a, so its next apply without it does not remove it.
    const firstLetsGo = await apply({ ...desired({}), data: undefined } as KubernetesObject, 'first', false);
    expect((firstLetsGo as { data?: object }).data).toEqual({ a: '2' });
  });

  it('requires a field manager and accepts YAML bodies', async () => {
    const response = await kube.server.fetch(`/api/v1/namespaces/default/configmaps/yaml-cm?fieldManager=test`, {
      method: 'PATCH',
      headers: { 'content-type': PatchStrategy.ServerSideApply },
      body: 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-cm\ndata:\n  k: v\n',
    });
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ metadata: { name: 'yaml-cm', namespace: 'default' }, data: { k: 'v' } });

    const noManager = await failureOf(kube.objects.patch(desired({ a: '1' }), undefined, undefined, undefined, undefined, PatchStrategy.ServerSideApply));
    expect(noManager.code).toBe(400);
  });

  it('applies to the status subresource without touching the spec', async () => {
    const apps = kube.server.kubeConfig().makeApiClient(AppsV1Api);
    await kube.objects.patch(
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'd', namespace: 'default' },
        spec: { replicas: 1, selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b' } } } },
      } as KubernetesObject,
      undefined,
      undefined,
      'op',
      true,
      PatchStrategy.ServerSideApply,
    );
    const status = await apps.patchNamespacedDeploymentStatus(
      {
        name: 'd',
        namespace: 'default',
        fieldManager: 'status-writer',
        body: { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd' }, status: { replicas: 1 } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    expect(status.status).toEqual({ replicas: 1 });
    expect(status.spec?.replicas).toBe(1);
    expect(status.metadata?.generation).toBe(1);
  });
});
