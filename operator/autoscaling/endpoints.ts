// Where an App that scales to zero is reached: its public Service has no selector, and the operator writes the
// Service's EndpointSlices itself — the app's ready pods when it has any (callers reach the sidecars directly,
// the warm path has no extra hop), else the holder, which keeps calls until a replica is up. Slices, not core v1
// Endpoints: they are what kube-proxy reads, and the `managed-by` label tells the EndpointSlice controllers they
// are ours (docs/scale-to-zero.md). The same objects in discovery.k8s.io v1 or v1beta1, whichever the API server
// serves (Kubernetes 1.20 serves only v1beta1): only fields both versions have.
import { isIPv6 } from 'node:net';
import type { App } from '../../crds/app-schema.ts';
import type { KubeObject } from '../../kube/objects.ts';
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

/** The label naming a slice's Service, and the one telling Kubernetes' EndpointSlice controllers a slice is not theirs. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
export const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';
export const SLICES_MANAGED_BY = 'operator.runlet.dev';

/** The served EndpointSlice API version: `discovery.k8s.io/v1`, or `discovery.k8s.io/v1beta1` on servers before 1.21. */
export type SliceApiVersion = 'discovery.k8s.io/v1' | 'discovery.k8s.io/v1beta1';

export interface SliceEndpoint {
  addresses: string[];
  conditions: { ready: boolean };
  targetRef?: { kind: 'Pod'; name: string; namespace: string };
}

export interface EndpointSlice extends KubeObject {
  addressType: 'IPv4' | 'IPv6';
  endpoints: SliceEndpoint[];
  ports: { name: string; port: number; protocol: 'TCP' }[];
}

/** The label selector of the slices the operator writes for the App's Service. */
export function slicesSelector(app: App): string {
  return `${SERVICE_NAME_LABEL}=${childName(app)},${MANAGED_BY_LABEL}=${SLICES_MANAGED_BY}`;
}

/**
 * The App's EndpointSlices: one per port and address family (a slice has one of each; holder replicas may listen
 * on different ports), named after the Service, the port and the family, so that the same target is the same
 * objects; none when there is nothing to point at (callers are refused rather than sent to a stale address).
 */
export function renderAppEndpointSlices(app: App, readyPods: readonly ReadyPod[], holder: readonly HolderAddress[], apiVersion: SliceApiVersion): EndpointSlice[] {
  const namespace = namespaceOf(app);
  const target = endpointsTarget(readyPods, holder);
  const endpoints: { ip: string; port: number; pod?: string }[] =
    target === 'pods'
      ? [...readyPods].sort((a, b) => a.name.localeCompare(b.name)).map((pod) => ({ ip: pod.ip, port: SIDECAR_RUN_PORT, pod: pod.name }))
      : [...holder].sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0)).map((address) => ({ ip: address.ip, port: address.port }));
  const groups = new Map<string, typeof endpoints>();
  for (const endpoint of endpoints) {
    const key = `${endpoint.port}-${isIPv6(endpoint.ip) ? 'IPv6' : 'IPv4'}`;
    groups.set(key, [...(groups.get(key) ?? []), endpoint]);
  }
  const base = childMetadata(app, childName(app));
  return [...groups].sort(([a], [b]) => a.localeCompare(b)).map(([key, members]) => {
    const addressType = key.endsWith('IPv6') ? 'IPv6' : 'IPv4';
    return {
      apiVersion,
      kind: 'EndpointSlice',
      metadata: { ...base, name: `${childName(app)}-${key.toLowerCase()}`, labels: { ...base.labels, [SERVICE_NAME_LABEL]: childName(app), [MANAGED_BY_LABEL]: SLICES_MANAGED_BY } },
      addressType,
      endpoints: members.map((member) => ({
        addresses: [member.ip],
        conditions: { ready: true },
        ...(member.pod === undefined ? {} : { targetRef: { kind: 'Pod' as const, name: member.pod, namespace } }),
      })),
      ports: [{ name: SERVICE_PORT_NAME, port: members[0]!.port, protocol: 'TCP' }],
    };
  });
}
