import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { failureOf, serverPerTest } from './test-helpers.ts';

const GROUP = 'runlet.dev';
const VERSION = 'v1alpha1';
const kube = serverPerTest((config) => ({ extensions: config.makeApiClient(ApiextensionsV1Api), custom: config.makeApiClient(CustomObjectsApi) }));

function crd(kind: string, plural: string, scope: 'Namespaced' | 'Cluster', withStatus: boolean): V1CustomResourceDefinition {
  return {
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: { kind, plural, singular: kind.toLowerCase() },
      scope,
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } },
          ...(withStatus ? { subresources: { status: {} } } : {}),
        },
      ],
    },
  };
}

const app = (name: string, spec: object) => ({ apiVersion: `${GROUP}/${VERSION}`, kind: 'App', metadata: { name }, spec });

describe('custom resources', () => {
  it('serves a namespaced kind once its CRD exists: discovery, CRUD, status subresource', async () => {
    const missing = await failureOf(
      kube.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: 'apps' }),
    );
    expect(missing.code).toBe(404);

    const created = await kube.extensions.createCustomResourceDefinition({ body: crd('App', 'apps', 'Namespaced', true) });
    expect(created.status?.conditions?.find((c) => c.type === 'Established')?.status).toBe('True');

    const discovery = (await (await kube.server.fetch(`/apis/${GROUP}/${VERSION}`)).json()) as {
      resources: { name: string; namespaced: boolean; kind: string }[];
    };
    expect(discovery.resources.map((r) => r.name)).toEqual(['apps', 'apps/status']);

    const object = await kube.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: 'default',
      plural: 'apps',
      body: { ...app('hello', { image: 'hello:1' }), status: { ignored: true } },
    });
    expect(object.metadata.generation).toBe(1);
    expect(object.status).toBeUndefined();

    const withStatus = await kube.custom.patchNamespacedCustomObjectStatus(
      { group: GROUP, version: VERSION, namespace: 'default', plural: 'apps', name: 'hello', body: { status: { phase: 'Ready' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(withStatus.status).toEqual({ phase: 'Ready' });
    expect(withStatus.metadata.generation).toBe(1);

    const respec = await kube.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: 'default', plural: 'apps', name: 'hello', body: { spec: { image: 'hello:2' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(respec.metadata.generation).toBe(2);
    expect(respec.status).toEqual({ phase: 'Ready' });

    const listed = await kube.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: 'apps' });
    expect(listed.items.map((i: KubernetesObject) => [i.kind, i.metadata?.name])).toEqual([['App', 'hello']]);

    await kube.custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: 'apps', name: 'hello' });
    const gone = await failureOf(
      kube.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: 'apps', name: 'hello' }),
    );
    expect(gone.status).toMatchObject({ reason: 'NotFound', message: `apps.${GROUP} "hello" not found` });
  });

  it('serves cluster-scoped kinds, and server-side apply of custom kinds through KubernetesObjectApi', async () => {
    await kube.extensions.createCustomResourceDefinition({ body: crd('Tenant', 'tenants', 'Cluster', false) });
    const objects = KubernetesObjectApi.makeApiClient(kube.server.kubeConfig());
    const tenant: KubernetesObject & { spec: object } = { apiVersion: `${GROUP}/${VERSION}`, kind: 'Tenant', metadata: { name: 'acme' }, spec: { tier: 'gold' } };
    const applied = await objects.patch(tenant, undefined, undefined, 'test', true, PatchStrategy.ServerSideApply);
    expect(applied.metadata?.namespace).toBeUndefined();
    const read = await kube.custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: 'tenants', name: 'acme' });
    expect(read.spec).toEqual({ tier: 'gold' });
  });

  it('removes the custom objects and stops serving the kind when the CRD is deleted', async () => {
    await kube.extensions.createCustomResourceDefinition({ body: crd('App', 'apps', 'Namespaced', true) });
    await kube.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: 'default',
      plural: 'apps',
      body: app('a', {}),
    });
    await kube.extensions.deleteCustomResourceDefinition({ name: `apps.${GROUP}` });
    const after = await failureOf(
      kube.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: 'apps' }),
    );
    expect(after.code).toBe(404);
    await kube.extensions.createCustomResourceDefinition({ body: crd('App', 'apps', 'Namespaced', true) });
    const empty = await kube.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: 'apps' });
    expect(empty.items).toEqual([]);
  });

  it('rejects a CRD whose name is not plural.group', async () => {
    const bad = crd('App', 'apps', 'Namespaced', false);
    bad.metadata!.name = 'wrong.name';
    const refused = await failureOf(kube.extensions.createCustomResourceDefinition({ body: bad }));
    expect(refused.code).toBe(422);
  });
});
