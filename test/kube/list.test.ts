import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { failureOf, serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ core: config.makeApiClient(CoreV1Api) }));

async function configMap(name: string, labels: Record<string, string> = {}, namespace = 'default'): Promise<void> {
  await kube.core.createNamespacedConfigMap({ namespace, body: { metadata: { name, labels } } });
}

async function names(labelSelector?: string, fieldSelector?: string): Promise<string[]> {
  const list = await kube.core.listNamespacedConfigMap({ namespace: 'default', labelSelector, fieldSelector });
  return list.items.map((item) => item.metadata!.name!);
}

describe('list', () => {
  it('filters by every label selector operator', async () => {
    await configMap('a', { app: 'web', tier: 'front' });
    await configMap('b', { app: 'web', tier: 'back' });
    await configMap('c', { app: 'db' });
    await configMap('d');

    expect(await names('app=web')).toEqual(['a', 'b']);
    expect(await names('app==db')).toEqual(['c']);
    expect(await names('app!=web')).toEqual(['c', 'd']);
    expect(await names('tier in (front, middle)')).toEqual(['a']);
    expect(await names('tier notin (front)')).toEqual(['b', 'c', 'd']);
    expect(await names('tier')).toEqual(['a', 'b']);
    expect(await names('!tier')).toEqual(['c', 'd']);
    expect(await names('app=web,tier!=front')).toEqual(['b']);
    expect((await failureOf(names('app in web'))).code).toBe(400);
  });

  it('filters by field selectors on metadata', async () => {
    await configMap('x');
    await configMap('y');
    expect(await names(undefined, 'metadata.name=y')).toEqual(['y']);
    expect(await names(undefined, 'metadata.name!=y,metadata.namespace=default')).toEqual(['x']);
  });

  it('lists across namespaces on the cluster-wide path, with the list resourceVersion', async () => {
    await kube.core.createNamespace({ body: { metadata: { name: 'other' } } });
    await configMap('one');
    await configMap('two', {}, 'other');
    const all = await kube.core.listConfigMapForAllNamespaces();
    expect(all.items.map((i) => `${i.metadata!.namespace}/${i.metadata!.name}`)).toEqual(['default/one', 'other/two']);
    expect(all.metadata?.resourceVersion).toBe(kube.server.resourceVersion);
    expect(all.items[0]).not.toHaveProperty('kind');
  });

  it('pages with limit/continue without gaps or duplicates while objects change', async () => {
    const original = Array.from({ length: 25 }, (_, i) => `cm-${String(i).padStart(2, '0')}`);
    for (const name of original) await configMap(name);

    const seen: string[] = [];
    let token: string | undefined;
    let firstVersion: string | undefined;
    let page = 0;
    do {
      const list = await kube.core.listNamespacedConfigMap({ namespace: 'default', limit: 7, _continue: token });
      firstVersion ??= list.metadata?.resourceVersion;
      expect(list.metadata?.resourceVersion).toBe(firstVersion);
      seen.push(...list.items.map((i) => i.metadata!.name!));
      token = list.metadata?._continue;
      // Concurrent writes between pages: new objects on both sides of the cursor, one deletion ahead.
      await configMap(`aa-new-${page}`);
      await configMap(`zz-new-${page}`);
      if (page === 0) await kube.core.deleteNamespacedConfigMap({ name: 'cm-20', namespace: 'default' });
      page += 1;
    } while (token !== undefined);

    expect(new Set(seen).size).toBe(seen.length);
    const survivors = original.filter((name) => name !== 'cm-20');
    expect(seen.filter((name) => name.startsWith('cm-'))).toEqual(survivors);
  });

  it('rejects a malformed continue token', async () => {
    const bad = await failureOf(kube.core.listNamespacedConfigMap({ namespace: 'default', limit: 1, _continue: '!!' }));
    expect(bad.code).toBe(400);
    expect(bad.status.message).toContain('continue');
  });
});
