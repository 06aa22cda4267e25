import { describe, expect, it } from 'vitest';
import type { NetworkPolicyConfig } from '../config.ts';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { kubernetesProblems } from '../../test/chart/kube-validate.ts';
import { renderNetworkPolicy } from './network-policy.ts';

const POLICY: NetworkPolicyConfig = {
  ingressController: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ingress-nginx' } } },
  runFromNamespaces: ['batch-jobs'],
  metricsFromNamespaces: ['monitoring'],
  operatorPods: { namespace: 'runlet-system', matchLabels: { 'app.kubernetes.io/component': 'operator', 'app.kubernetes.io/instance': 'runlet' } },
};

describe('renderNetworkPolicy', () => {
  const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a' });

  it('admits the run port from the ingress controller, the operator pods (holder) and the named namespaces, the admin port from the operator pods (cancels) and the metrics namespaces: nothing else', () => {
    const policy = renderNetworkPolicy(app, POLICY);
    expect(kubernetesProblems(policy)).toEqual([]);
    expect(policy.metadata).toMatchObject({ name: 'hello', namespace: 'team-a', ownerReferences: [expect.objectContaining({ kind: 'App', name: 'hello', controller: true })] });
    expect(policy.spec).toEqual({
      podSelector: { matchLabels: { 'runlet.dev/app': 'hello' } },
      policyTypes: ['Ingress'],
      ingress: [
        {
          ports: [{ port: 8000, protocol: 'TCP' }],
          from: [
            POLICY.ingressController,
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'runlet-system' } }, podSelector: { matchLabels: POLICY.operatorPods.matchLabels } },
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'batch-jobs' } } },
          ],
        },
        {
          ports: [{ port: 8001, protocol: 'TCP' }],
          from: [
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'runlet-system' } }, podSelector: { matchLabels: POLICY.operatorPods.matchLabels } },
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
          ],
        },
      ],
    });
  });

  it('admits the admin port from the operator pods alone without metrics namespaces: never a rule with no peers, which would admit every pod', () => {
    const policy = renderNetworkPolicy(app, { ...POLICY, metricsFromNamespaces: [], runFromNamespaces: [] });
    expect(policy.spec.ingress.map((rule) => rule.ports[0]!.port)).toEqual([8000, 8001]);
    expect(policy.spec.ingress[1]!.from).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'runlet-system' } }, podSelector: { matchLabels: POLICY.operatorPods.matchLabels } }]);
    for (const rule of policy.spec.ingress) expect(rule.from.length).toBeGreaterThan(0);
  });

  it('takes the ingress controller by namespace alone when no pod selector is given', () => {
    const policy = renderNetworkPolicy(app, { ...POLICY, ingressController: { namespaceSelector: { matchLabels: { team: 'edge' } } } });
    expect(policy.spec.ingress[0]!.from[0]).toEqual({ namespaceSelector: { matchLabels: { team: 'edge' } } });
  });
});
