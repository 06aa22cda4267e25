// Everything one App owns, as the reconciler applies it: the Deployment, the Service, (when it scales to zero)
// the headless Service listing its ready replicas for the activator, (when the operator has an ingress) the
// Ingress and (when it has a network policy) the NetworkPolicy; and what must go because the configuration no
// longer wants it. The replicas Service of an App that stops scaling to zero stays (the operator may not delete
// Services) until the App goes: it lists the same pods as the App's own Service then.
import type { App } from '../../crds/app-schema.ts';
import type { RenderConfig } from '../config.ts';
import type { KubeObject, ObjectRef } from '../../kube/objects.ts';
import { renderDeployment, type PodInputs } from './deployment.ts';
import { renderIngress } from './ingress.ts';
import { renderNetworkPolicy } from './network-policy.ts';
import { childName, namespaceOf } from './names.ts';
import { renderReplicasService, renderService } from './service.ts';
import { scalesToZero } from '../autoscaling/endpoints.ts';

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
      ...(scalesToZero(app) ? [renderReplicasService(app)] : []),
      ...(config.ingress === null ? [] : [renderIngress(app, config.ingress)]),
      ...(config.networkPolicy === null ? [] : [renderNetworkPolicy(app, config.networkPolicy)]),
    ],
    remove: [...(config.ingress === null ? [ref('Ingress')] : []), ...(config.networkPolicy === null ? [ref('NetworkPolicy')] : [])],
  };
}
