// Writes the Endpoints of an App that scales to zero (endpoints.ts) from what is true now: its ready pods, or
// the holder's addresses, which are the Endpoints of the Service in front of the operator pods' holder port.
// Run by the reconcile of such an App, which follows its Deployment's ready replicas.
import type { V1Endpoints, V1Pod } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { APP_LABEL } from '../../crds/api-group.ts';
import type { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { namespaceOf } from '../render/names.ts';
import { endpointsTarget, renderAppEndpoints, type EndpointsTarget, type HolderAddress, type ReadyPod } from './endpoints.ts';

/** The Service whose Endpoints list the holder's replicas (the operator's pods, on the holder port). */
export interface HolderService {
  namespace: string;
  name: string;
}

/** A pod its App's Endpoints list: serving, with an address. */
export function isReadyPod(pod: V1Pod): boolean {
  return serves(pod) && pod.status?.podIP !== undefined;
}

export async function readyPodsOf(api: KubeApi, app: App): Promise<ReadyPod[]> {
  const pods = await api.list<V1Pod>(`/api/v1/namespaces/${encodeURIComponent(namespaceOf(app))}/pods`, { labelSelector: `${APP_LABEL}=${app.metadata.name}` });
  return pods.items.filter(isReadyPod).map((pod) => ({ name: pod.metadata!.name!, ip: pod.status!.podIP! }));
}

/** What of a pod tells whether it serves: a client-node V1Pod or the operator's trimmed cache entry. */
interface PodServing {
  metadata?: { deletionTimestamp?: unknown };
  status?: { conditions?: { type: string; status: string }[] };
}

/** Ready and not ending: all the operator's pod cache keeps of whether a pod belongs in its App's Endpoints. */
function serves(pod: PodServing): boolean {
  return pod.metadata?.deletionTimestamp === undefined && (pod.status?.conditions ?? []).some((condition) => condition.type === 'Ready' && condition.status === 'True');
}

/**
 * Whether a pod event changes what the Endpoints of its App should list: it started or stopped serving, or is
 * gone. The Deployment's ready count alone comes later than the pod's end, and not at all for a pod that
 * stops being ready while another becomes so.
 */
export function servingChanged(pod: PodServing, gone: boolean, previous: PodServing | undefined): boolean {
  if (gone) return true;
  return previous === undefined ? serves(pod) : serves(pod) !== serves(previous);
}

/** The ready addresses the Endpoints of the holder's Service list (none when they are absent). */
export function holderAddressesOf(endpoints: Pick<V1Endpoints, 'subsets'> | undefined): HolderAddress[] {
  return (endpoints?.subsets ?? []).flatMap((subset) => {
    const port = subset.ports?.[0]?.port;
    return port === undefined ? [] : (subset.addresses ?? []).map((address) => ({ ip: address.ip, port }));
  });
}

export async function holderAddresses(api: KubeApi, service: HolderService): Promise<HolderAddress[]> {
  return holderAddressesOf(await api.find<V1Endpoints & KubeObject>(`/api/v1/namespaces/${encodeURIComponent(service.namespace)}/endpoints/${encodeURIComponent(service.name)}`));
}

/** Points the App's Endpoints at its ready pods or at the holder (none when the operator runs without one); returns which. */
export async function switchEndpoints(api: KubeApi, app: App, holder: HolderService | null): Promise<EndpointsTarget> {
  const [pods, holders] = await Promise.all([readyPodsOf(api, app), holder === null ? [] : holderAddresses(api, holder)]);
  await api.apply(renderAppEndpoints(app, pods, holders) as V1Endpoints & KubeObject);
  return endpointsTarget(pods, holders);
}
