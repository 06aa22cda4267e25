import { AppsV1Api, CoreV1Api, type V1ObjectMeta, type V1OwnerReference } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from './index.ts';
import { failureOf } from './test-helpers.ts';

let server: KubeApiServer;
let core: CoreV1Api;
let apps: AppsV1Api;

beforeEach(async () => {
  server = await startKubeApiServer();
  core = server.kubeConfig().makeApiClient(CoreV1Api);
  apps = server.kubeConfig().makeApiClient(AppsV1Api);
});

afterEach(async () => {
  await server.close();
});

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
    const owner = await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'owner' } } });
    const deployment = await apps.createNamespacedDeployment({
      namespace: 'default',
      body: {
        metadata: { name: 'dep', ownerReferences: [ownedBy('ConfigMap', owner.metadata)] },
        spec: { selector: { matchLabels: { a: 'b' } }, template },
      },
    });
    await apps.createNamespacedReplicaSet({
      namespace: 'default',
      body: {
        metadata: { name: 'rs', ownerReferences: [ownedBy('Deployment', deployment.metadata, 'apps/v1')] },
        spec: { selector: { matchLabels: { a: 'b' } }, template },
      },
    });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'bystander' } } });

    await core.deleteNamespacedConfigMap({ name: 'owner', namespace: 'default' });
    expect(await exists(apps.readNamespacedDeployment({ name: 'dep', namespace: 'default' }))).toBe(false);
    expect(await exists(apps.readNamespacedReplicaSet({ name: 'rs', namespace: 'default' }))).toBe(false);
    expect(await exists(core.readNamespacedConfigMap({ name: 'bystander', namespace: 'default' }))).toBe(true);
  });

  it('keeps a dependent that still has a live owner, and orphans on request', async () => {
    const first = await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'first' } } });
    const second = await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'second' } } });
    await core.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 'shared', ownerReferences: [ownedBy('ConfigMap', first.metadata), ownedBy('ConfigMap', second.metadata)] } },
    });

    await core.deleteNamespacedConfigMap({ name: 'first', namespace: 'default' });
    const survivor = await core.readNamespacedSecret({ name: 'shared', namespace: 'default' });
    expect(survivor.metadata?.ownerReferences?.map((ref) => ref.name)).toEqual(['second']);

    await core.deleteNamespacedConfigMap({ name: 'second', namespace: 'default', propagationPolicy: 'Orphan' });
    const orphan = await core.readNamespacedSecret({ name: 'shared', namespace: 'default' });
    expect(orphan.metadata?.ownerReferences).toBeUndefined();
  });
});

describe('namespace deletion', () => {
  it('deletes the namespace’s objects, then the namespace; creation in a terminating namespace is forbidden', async () => {
    await core.createNamespace({ body: { metadata: { name: 'doomed' } } });
    await core.createNamespacedConfigMap({ namespace: 'doomed', body: { metadata: { name: 'plain' } } });
    await core.createNamespacedConfigMap({
      namespace: 'doomed',
      body: { metadata: { name: 'guarded', finalizers: ['runlet.dev/keep'] } },
    });

    const terminating = await core.deleteNamespace({ name: 'doomed' });
    expect((terminating as { status?: { phase?: string } }).status?.phase).toBe('Terminating');
    expect(await exists(core.readNamespacedConfigMap({ name: 'plain', namespace: 'doomed' }))).toBe(false);
    const refused = await failureOf(core.createNamespacedConfigMap({ namespace: 'doomed', body: { metadata: { name: 'new' } } }));
    expect(refused.code).toBe(403);

    await core.replaceNamespacedConfigMap({
      name: 'guarded',
      namespace: 'doomed',
      body: { ...(await core.readNamespacedConfigMap({ name: 'guarded', namespace: 'doomed' })), metadata: { name: 'guarded', finalizers: [] } },
    });
    expect(await exists(core.readNamespace({ name: 'doomed' }))).toBe(false);
  });
});
