import { AppsV1Api, CoreV1Api, type V1ObjectMeta, type V1OwnerReference } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { failureOf, serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ core: config.makeApiClient(CoreV1Api), apps: config.makeApiClient(AppsV1Api) }));

function ownedBy(kind: string, meta: V1ObjectMeta | undefined, apiVersion = 'v1'): V1OwnerReference {
  return { apiVersion, kind, name: meta!.name!, uid: meta!.uid!, controller: true };
}

async function exists(read: Promise<unknown>): Promise<boolean> {
  try {
    await read;
    return true;
  } catch {
    return false;
  }
}

const template = { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'i' }] } };

describe('owner-reference garbage collection', () => {
  it('deletes dependents recursively when their owner goes', async () => {
    const owner = await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'owner' } } });
    const deployment = await kube.apps.createNamespacedDeployment({
      namespace: 'default',
      body: {
        metadata: { name: 'dep', ownerReferences: [ownedBy('ConfigMap', owner.metadata)] },
        spec: { selector: { matchLabels: { a: 'b' } }, template },
      },
    });
    await kube.apps.createNamespacedReplicaSet({
      namespace: 'default',
      body: {
        metadata: { name: 'rs', ownerReferences: [ownedBy('Deployment', deployment.metadata, 'apps/v1')] },
        spec: { selector: { matchLabels: { a: 'b' } }, template },
      },
    });
    await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'bystander' } } });

    await kube.core.deleteNamespacedConfigMap({ name: 'owner', namespace: 'default' });
    expect(await exists(kube.apps.readNamespacedDeployment({ name: 'dep', namespace: 'default' }))).toBe(false);
    expect(await exists(kube.apps.readNamespacedReplicaSet({ name: 'rs', namespace: 'default' }))).toBe(false);
    expect(await exists(kube.core.readNamespacedConfigMap({ name: 'bystander', namespace: 'default' }))).toBe(true);
  });

  it('keeps a dependent that still has a live owner, and orphans on request', async () => {
    const first = await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'first' } } });
    const second = await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'second' } } });
    await kube.core.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 'shared', ownerReferences: [ownedBy('ConfigMap', first.metadata), ownedBy('ConfigMap', second.metadata)] } },
    });

    await kube.core.deleteNamespacedConfigMap({ name: 'first', namespace: 'default' });
    const survivor = await kube.core.readNamespacedSecret({ name: 'shared', namespace: 'default' });
    expect(survivor.metadata?.ownerReferences?.map((ref) => ref.name)).toEqual(['second']);

    await kube.core.deleteNamespacedConfigMap({ name: 'second', namespace: 'default', propagationPolicy: 'Orphan' });
    const orphan = await kube.core.readNamespacedSecret({ name: 'shared', namespace: 'default' });
    expect(orphan.metadata?.ownerReferences).toBeUndefined();
  });
});

describe('namespace deletion', () => {
  it('deletes the namespace’s objects, then the namespace; creation in a terminating namespace is forbidden', async () => {
    await kube.core.createNamespace({ body: { metadata: { name: 'doomed' } } });
    await kube.core.createNamespacedConfigMap({ namespace: 'doomed', body: { metadata: { name: 'plain' } } });
    await kube.core.createNamespacedConfigMap({
      namespace: 'doomed',
      body: { metadata: { name: 'guarded', finalizers: ['runlet.dev/keep'] } },
    });

    const terminating = await kube.core.deleteNamespace({ name: 'doomed' });
    expect((terminating as { status?: { phase?: string } }).status?.phase).toBe('Terminating');
    expect(await exists(kube.core.readNamespacedConfigMap({ name: 'plain', namespace: 'doomed' }))).toBe(false);
    const refused = await failureOf(kube.core.createNamespacedConfigMap({ namespace: 'doomed', body: { metadata: { name: 'new' } } }));
    expect(refused.code).toBe(403);

    await kube.core.replaceNamespacedConfigMap({
      name: 'guarded',
      namespace: 'doomed',
      body: { ...(await kube.core.readNamespacedConfigMap({ name: 'guarded', namespace: 'doomed' })), metadata: { name: 'guarded', finalizers: [] } },
    });
    expect(await exists(kube.core.readNamespace({ name: 'doomed' }))).toBe(false);
  });
});
