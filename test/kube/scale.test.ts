import { AppsV1Api, PatchStrategy, setHeaderOptions, type V1Deployment } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { failureOf, serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ apps: config.makeApiClient(AppsV1Api) }));

function deployment(name: string, replicas: number): V1Deployment {
  return {
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name, tier: 'web' } },
      template: { metadata: { labels: { app: name, tier: 'web' } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } },
    },
  };
}

describe('the scale subresource', () => {
  it('reads a Deployment as a Scale and changes only its replicas, by PUT and by merge patch', async () => {
    const created = await kube.apps.createNamespacedDeployment({ namespace: 'default', body: deployment('web', 2) });
    const scale = await kube.apps.readNamespacedDeploymentScale({ namespace: 'default', name: 'web' });
    expect(scale).toMatchObject({ kind: 'Scale', spec: { replicas: 2 }, status: { replicas: 0, selector: 'app=web,tier=web' } });

    await kube.apps.replaceNamespacedDeploymentScale({ namespace: 'default', name: 'web', body: { ...scale, spec: { replicas: 5 } } });
    const put = await kube.apps.readNamespacedDeployment({ namespace: 'default', name: 'web' });
    expect(put.spec?.replicas).toBe(5);
    expect(put.metadata?.generation).toBe((created.metadata?.generation ?? 1) + 1);
    expect(put.spec?.template).toEqual(created.spec?.template);

    await kube.apps.patchNamespacedDeploymentScale(
      { namespace: 'default', name: 'web', body: { spec: { replicas: 0 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect((await kube.apps.readNamespacedDeployment({ namespace: 'default', name: 'web' })).spec?.replicas).toBe(0);
  });

  it('refuses a stale resourceVersion and a negative count, and 404s for a missing Deployment', async () => {
    await kube.apps.createNamespacedDeployment({ namespace: 'default', body: deployment('web', 1) });
    const scale = await kube.apps.readNamespacedDeploymentScale({ namespace: 'default', name: 'web' });
    await kube.apps.replaceNamespacedDeploymentScale({ namespace: 'default', name: 'web', body: { ...scale, spec: { replicas: 3 } } });
    const stale = await failureOf(kube.apps.replaceNamespacedDeploymentScale({ namespace: 'default', name: 'web', body: { ...scale, spec: { replicas: 4 } } }));
    expect(stale.code).toBe(409);
    const negative = await failureOf(
      kube.apps.patchNamespacedDeploymentScale(
        { namespace: 'default', name: 'web', body: { spec: { replicas: -1 } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    expect(negative.code).toBe(422);
    expect((await failureOf(kube.apps.readNamespacedDeploymentScale({ namespace: 'default', name: 'absent' }))).code).toBe(404);
    expect((await kube.apps.readNamespacedDeployment({ namespace: 'default', name: 'web' })).spec?.replicas).toBe(3);
  });
});
