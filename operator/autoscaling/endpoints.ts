// Where an App that scales to zero is reached: its public Service has no selector, and the operator writes the
// Service's core v1 Endpoints itself — the app's ready pods when it has any (callers reach the sidecars
// directly, the warm path has no extra hop), else the holder, which keeps calls until a replica is up.
// Kubernetes 1.20's EndpointSlice mirroring controller copies these Endpoints into the EndpointSlices kube-proxy
// reads (docs/scale-to-zero.md).
import type { V1EndpointAddress, V1Endpoints } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { childMetadata } from '../render/labels.ts';
import { SERVICE_PORT_NAME, SIDECAR_RUN_PORT, childName, namespaceOf } from '../render/names.ts';

/** An App whose replicas may go to zero: its Service's endpoints are the operator's to write. */
export function scalesToZero(app: App): boolean {
  return app.spec.scaling?.minReplicas === 0;
}

export interface ReadyPod {
  name: string;
  ip: string;
}

/** One address of the holder: an operator pod's IP and the holder's port. */
export interface HolderAddress {
  ip: string;
  port: number;
}

/** What the Endpoints point at: `pods` (warm), `holder` (at zero), `none` (at zero, no holder known). */
export type EndpointsTarget = 'pods' | 'holder' | 'none';

export function endpointsTarget(readyPods: readonly ReadyPod[], holder: readonly HolderAddress[]): EndpointsTarget {
  if (readyPods.length > 0) return 'pods';
  return holder.length > 0 ? 'holder' : 'none';
}

export function renderAppEndpoints(app: App, readyPods: readonly ReadyPod[], holder: readonly HolderAddress[]): V1Endpoints {
  const namespace = namespaceOf(app);
  const target = endpointsTarget(readyPods, holder);
  const podSubset = () => ({
    addresses: [...readyPods]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((pod): V1EndpointAddress => ({ ip: pod.ip, targetRef: { kind: 'Pod', name: pod.name, namespace } })),
    ports: [{ name: SERVICE_PORT_NAME, port: SIDECAR_RUN_PORT, protocol: 'TCP' }],
  });
  // Holder replicas may listen on different ports; one subset per port, as the API server would group them.
  const holderSubsets = () =>
    [...new Set(holder.map((address) => address.port))].sort((a, b) => a - b).map((port) => ({
      addresses: holder.filter((address) => address.port === port).map((address) => ({ ip: address.ip })),
      ports: [{ name: SERVICE_PORT_NAME, port, protocol: 'TCP' }],
    }));
  return {
    apiVersion: 'v1',
    kind: 'Endpoints',
    metadata: childMetadata(app, childName(app)),
    subsets: target === 'pods' ? [podSubset()] : target === 'holder' ? holderSubsets() : [],
  };
}
