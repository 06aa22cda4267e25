// Everything one App owns, as the reconciler applies it: the Deployment, the Service, (when the operator
// has an ingress) the Ingress and (when it has a network policy) the NetworkPolicy; and what must go because
// the configuration no longer wants it.
import type { App } from '../../crds/app-schema.ts';
import type { RenderConfig } from '../config.ts';
import type { KubeObject, ObjectRef } from '../../kube/objects.ts';
import { renderDeployment, type PodInputs } from './deployment.ts';
import { renderIngress } from './ingress.ts';
import { renderNetworkPolicy } from './network-policy.ts';
import { childName, namespaceOf } from './names.ts';
import { renderService } from './service.ts';

export interface AppChildren {
  apply: KubeObject[];
  /** Children an earlier configuration created that this one does not: deleted when owned by the App. */
  remove: ObjectRef[];
}

/** `pod` and `replicas`: as renderDeployment takes them. */
export function renderAppChildren(app: App, config: RenderConfig, pod: PodInputs, replicas?: number | null): AppChildren {
  const ref = (kind: string): ObjectRef => ({ apiVersion: 'networking.k8s.io/v1', kind, namespace: namespaceOf(app), name: childName(app) });
  return {
    apply: [
      renderDeployment(app, config, pod, replicas),
      renderService(app),
      ...(config.ingress === null ? [] : [renderIngress(app, config.ingress)]),
      ...(config.networkPolicy === null ? [] : [renderNetworkPolicy(app, config.networkPolicy)]),
    ],
    remove: [...(config.ingress === null ? [ref('Ingress')] : []), ...(config.networkPolicy === null ? [ref('NetworkPolicy')] : [])],
  };
}
