import { describe, expect, it } from 'vitest';
import { pythonSpec, renderConfig, storedApp } from '../../test/support/operator-apps.ts';
import { renderAppChildren } from './app-children.ts';
import { replicasServiceName } from './names.ts';

describe('renderAppChildren', () => {
  const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a' });

  const networkPolicy = {
    ingressController: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
    runFromNamespaces: [],
    metricsFromNamespaces: [],
    operatorPods: { namespace: 'runlet-system', matchLabels: { 'app.kubernetes.io/component': 'operator' } },
  };

  it.each([
    ['ingress configured: Deployment, Service and Ingress', { className: 'nginx' }, null, ['Deployment', 'Service', 'Ingress'], ['NetworkPolicy']],
    ['no ingress, no network policy: neither, and old ones removed', null, null, ['Deployment', 'Service'], ['Ingress', 'NetworkPolicy']],
    ['network policy configured: a NetworkPolicy', null, networkPolicy, ['Deployment', 'Service', 'NetworkPolicy'], ['Ingress']],
  ])('%s', (_case, ingress, policy, applied, removed) => {
    const children = renderAppChildren(app, renderConfig({ ingress, networkPolicy: policy }), { codeHash: undefined });
    expect(children.apply.map((child) => child.kind)).toEqual(applied);
    expect(children.remove.map((ref) => ref.kind)).toEqual(removed);
    for (const ref of children.remove) expect(ref).toMatchObject({ namespace: 'team-a', name: 'hello' });
  });

  it('an App that scales to zero: a second, headless Service listing its ready replicas for the activator', () => {
    const atZero = storedApp({ ...pythonSpec(), scaling: { minReplicas: 0, maxReplicas: 2 } }, { name: 'hello', namespace: 'team-a' });
    const children = renderAppChildren(atZero, renderConfig({ ingress: null, networkPolicy: null }), { codeHash: undefined });
    expect(children.apply.map((child) => `${child.kind} ${child.metadata?.name}`)).toEqual(['Deployment hello', 'Service hello', `Service ${replicasServiceName('hello')}`]);
  });
});
