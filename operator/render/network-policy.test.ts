import { describe, expect, it } from 'vitest';
import { defaultConfigLayer, resolveConfig, type NetworkPolicyConfig } from '../config.ts';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { kubernetesProblems } from '../../test/chart/kube-validate.ts';
import { renderNetworkPolicy } from './network-policy.ts';

const POLICY: NetworkPolicyConfig = {
  ingressController: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ingress-nginx' } } },
  runFromNamespaces: ['batch-jobs'],
  metricsFromNamespaces: ['monitoring'],
  operatorPods: { namespace: 'runlet-system', matchLabels: { 'app.kubernetes.io/component': 'operator', 'app.kubernetes.io/instance': 'runlet' } },
};

const OPERATOR_PEER = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'runlet-system' } }, podSelector: { matchLabels: { 'runlet.dev/app-peer': 'true' } } };

describe('renderNetworkPolicy', () => {
  const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a' });

  it('is rendered by default: the run port open to every pod, the admin port to the operator pods alone, and no other port (a custom app\'s own) to any pod', () => {
    // The operator's own default: its pods by their label, in the namespace it runs in (POD_NAMESPACE).
    const defaults = defaultConfigLayer({ POD_NAMESPACE: 'runlet-system' });
    const config = resolveConfig({ ...defaults, sidecarImage: 'runlet:1', pythonRuntimeImage: 'python:1' });
    const policy = renderNetworkPolicy(storedApp({ runtime: { custom: { image: 'web:1', port: 9000 } } }, { name: 'web', namespace: 'team-b' }), config.networkPolicy!);
    expect(kubernetesProblems(policy)).toEqual([]);
    expect(policy.spec).toEqual({
      podSelector: { matchLabels: { 'runlet.dev/app': 'web' } },
      policyTypes: ['Ingress'],
      ingress: [
        // No `from`: any source, as the API server reads a rule without one.
        { ports: [{ port: 8000, protocol: 'TCP' }] },
        { ports: [{ port: 8001, protocol: 'TCP' }], from: [OPERATOR_PEER] },
      ],
    });
  });

  it('restricts the run port to the operator pods and the named namespaces when no ingress controller is named but namespaces are', () => {
    const { ingressController: _none, ...withoutController } = POLICY;
    const policy = renderNetworkPolicy(app, withoutController);
    expect(policy.spec.ingress[0]!.from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'runlet-system' } }, podSelector: { matchLabels: POLICY.operatorPods.matchLabels } },
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'batch-jobs' } } },
    ]);
  });

  it('admits the run port from the ingress controller, the operator pods (holder) and the named namespaces, the admin port from the operator pods (load scrapes, cancels) and the metrics namespaces: nothing else', () => {
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

  it('admits the admin port from the operator pods alone without metrics namespaces (never a rule without peers: it would admit every pod)', () => {
    const policy = renderNetworkPolicy(app, { ...POLICY, metricsFromNamespaces: [], runFromNamespaces: [] });
    expect(policy.spec.ingress.map((rule) => rule.ports[0]!.port)).toEqual([8000, 8001]);
    expect(policy.spec.ingress[1]!.from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'runlet-system' } }, podSelector: { matchLabels: POLICY.operatorPods.matchLabels } },
    ]);
    for (const rule of policy.spec.ingress) expect(rule.from?.length).toBeGreaterThan(0);
  });

  it('takes the ingress controller by namespace alone when no pod selector is given', () => {
    const policy = renderNetworkPolicy(app, { ...POLICY, ingressController: { namespaceSelector: { matchLabels: { team: 'edge' } } } });
    expect(policy.spec.ingress[0]!.from![0]).toEqual({ namespaceSelector: { matchLabels: { team: 'edge' } } });
  });
});
