// The NetworkPolicy of an App's pods (when the operator is configured with one): the run port admits the
// ingress controller, the operator's pods (the holder hands held calls over from them) and the namespaces
// named; the admin port admits the operator's pods (a cancel reaches the run there: operator/run-cancel.ts)
// and the metrics namespaces (Prometheus). Nothing else reaches the pods: not the
// app container's own port (a custom server would otherwise be callable around the sidecar's auth), not
// the admin port from any other pod. The kubelet's probes and preStop hook come from the node, which a
// NetworkPolicy always admits. Namespaces are selected by the label `kubernetes.io/metadata.name`, which the
// API server sets on every namespace from Kubernetes 1.21.
import type { V1LabelSelector, V1NetworkPolicyPeer, V1NetworkPolicyPort, V1ObjectMeta } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import type { NetworkPolicyConfig } from '../config.ts';
import { childMetadata, selectorLabels } from './labels.ts';
import { SIDECAR_ADMIN_PORT, SIDECAR_RUN_PORT, childName } from './names.ts';

/** A rule as the API server takes it: client-node's model calls `from` `_from`, which is not its JSON. */
export interface IngressRule {
  ports: V1NetworkPolicyPort[];
  from: V1NetworkPolicyPeer[];
}

export interface NetworkPolicy {
  apiVersion: 'networking.k8s.io/v1';
  kind: 'NetworkPolicy';
  metadata: V1ObjectMeta;
  spec: { podSelector: V1LabelSelector; policyTypes: string[]; ingress: IngressRule[] };
}

const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

const inNamespace = (name: string): V1NetworkPolicyPeer => ({ namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: name } } });

export function renderNetworkPolicy(app: App, policy: NetworkPolicyConfig): NetworkPolicy {
  const { ingressController, operatorPods } = policy;
  const operator: V1NetworkPolicyPeer = { ...inNamespace(operatorPods.namespace), podSelector: { matchLabels: operatorPods.matchLabels } };
  const runFrom: V1NetworkPolicyPeer[] = [
    { namespaceSelector: ingressController.namespaceSelector, ...(ingressController.podSelector === undefined ? {} : { podSelector: ingressController.podSelector }) },
    operator,
    ...policy.runFromNamespaces.map(inNamespace),
  ];
  const adminFrom = [operator, ...policy.metricsFromNamespaces.map(inNamespace)];
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: childMetadata(app, childName(app)),
    spec: {
      podSelector: { matchLabels: selectorLabels(app) },
      policyTypes: ['Ingress'],
      ingress: [rule(SIDECAR_RUN_PORT, runFrom), rule(SIDECAR_ADMIN_PORT, adminFrom)],
    },
  };
}

function rule(port: number, from: V1NetworkPolicyPeer[]): IngressRule {
  return { ports: [{ port, protocol: 'TCP' }], from };
}
