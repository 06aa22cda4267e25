import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { failureOf, serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ apps: config.makeApiClient(AppsV1Api), core: config.makeApiClient(CoreV1Api) }));

const web = {
  metadata: { name: 'web' },
  spec: {
    replicas: 0,
    selector: { matchLabels: { app: 'web' } },
    template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } },
  },
};

describe('deployments/scale', () => {
  it('reads and writes spec.replicas, refusing a stale resourceVersion', async () => {
    await kube.apps.createNamespacedDeployment({ namespace: 'default', body: web });
    const scale = await kube.apps.readNamespacedDeploymentScale({ name: 'web', namespace: 'default' });
    expect(scale.spec?.replicas).toBe(0);
    expect(scale.status?.selector).toBe('app=web');

    const written = await kube.apps.replaceNamespacedDeploymentScale({ name: 'web', namespace: 'default', body: { ...scale, spec: { replicas: 1 } } });
    expect(written.spec?.replicas).toBe(1);
    expect((await kube.apps.readNamespacedDeployment({ name: 'web', namespace: 'default' })).spec?.replicas).toBe(1);

    const stale = await failureOf(kube.apps.replaceNamespacedDeploymentScale({ name: 'web', namespace: 'default', body: { ...scale, spec: { replicas: 2 } } }));
    expect(stale.code).toBe(409);

    const patched = await kube.apps.patchNamespacedDeploymentScale(
      { name: 'web', namespace: 'default', body: { spec: { replicas: 0 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(patched.spec?.replicas).toBe(0);
  });

  it('serves core v1 Endpoints', async () => {
    const body = { metadata: { name: 'web' }, subsets: [{ addresses: [{ ip: '10.0.0.1' }], ports: [{ name: 'http', port: 8080 }] }] };
    await kube.core.createNamespacedEndpoints({ namespace: 'default', body });
    const read = await kube.core.readNamespacedEndpoints({ name: 'web', namespace: 'default' });
    expect(read.subsets?.[0]?.addresses?.[0]?.ip).toBe('10.0.0.1');
  });
});
