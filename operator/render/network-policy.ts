// The NetworkPolicy of an App's pods (on by default: the operator's `networkPolicy`, the chart's
// apps.networkPolicy): the run port admits any pod — callers are authenticated there, and the ingress controller
// and the activator (which hands held calls over) must reach it — unless the configuration names its peers (the
// ingress controller, runFromNamespaces: then those and the operator's pods only). The admin port admits the
// operator's pods (the autoscaler scrapes each replica's load there, and a cancel reaches the run there:
// operator/run-cancel.ts) and the metrics namespaces (Prometheus). Nothing else reaches the pods: not the app
// container's own port (a custom server that still listens on the pod IP would otherwise be callable around the
// sidecar's checks of callers), not the admin port from any other pod. The kubelet's probes and preStop hook come
// from the node, which the CNIs that enforce NetworkPolicies admit. Namespaces are selected by the label
// `kubernetes.io/metadata.name`, which the API server sets on every namespace from Kubernetes 1.21.
//
// A CNI that does not enforce NetworkPolicies (the bridge plugin, flannel alone) stores the object and lets
// everything through: the loopback binding (the app told to listen on 127.0.0.1, probes through the sidecar) is
// what keeps a custom app's server to its sidecar there, and the admin port stays open to every pod.
import type { V1LabelSelector, V1NetworkPolicyPeer, V1NetworkPolicyPort, V1ObjectMeta } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import type { NetworkPolicyConfig } from '../config.ts';
import { childMetadata, selectorLabels } from './labels.ts';
import { SIDECAR_ADMIN_PORT, SIDECAR_RUN_PORT, childName } from './names.ts';

/** A rule as the API server takes it: client-node's model calls `from` `_from`, which is not its JSON. No `from`: any source. */
export interface IngressRule {
  ports: V1NetworkPolicyPort[];
  from?: V1NetworkPolicyPeer[];
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
  const { ingressController, operatorPods, runFromNamespaces } = policy;
  const operator: V1NetworkPolicyPeer = { ...inNamespace(operatorPods.namespace), podSelector: { matchLabels: operatorPods.matchLabels } };
  const runPeersNamed = ingressController !== undefined || runFromNamespaces.length > 0;
  const runFrom: V1NetworkPolicyPeer[] | undefined = runPeersNamed
    ? [
        ...(ingressController === undefined
          ? []
          : [{ namespaceSelector: ingressController.namespaceSelector, ...(ingressController.podSelector === undefined ? {} : { podSelector: ingressController.podSelector }) }]),
        operator,
        ...runFromNamespaces.map(inNamespace),
      ]
    : undefined;
  const adminFrom = [operator, ...policy.metricsFromNamespaces.map(inNamespace)];
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: childMetadata(app, childName(app)),
    spec: {
      podSelector: { matchLabels: selectorLabels(app) },
      policyTypes: ['Ingress'],
      ingress: [
        rule(SIDECAR_RUN_PORT, runFrom),
        // Never without peers (the operator's are always there): a rule with none would admit every source.
        rule(SIDECAR_ADMIN_PORT, adminFrom),
      ],
    },
  };
}

function rule(port: number, from: V1NetworkPolicyPeer[] | undefined): IngressRule {
  return { ports: [{ port, protocol: 'TCP' }], ...(from === undefined ? {} : { from }) };
}
