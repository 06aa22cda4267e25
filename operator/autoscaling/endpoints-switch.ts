// Writes the EndpointSlices of an App that scales to zero (endpoints.ts) from what is true now: its ready pods,
// or the holder's addresses, which are the Endpoints of the Service in front of the operator pods' holder port
// (kept by Kubernetes' endpoints controller: that Service has a selector). Run by the reconcile of such an App,
// which follows its Deployment's ready replicas.
import type { V1Endpoints, V1Pod } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { APP_LABEL } from '../../crds/api-group.ts';
import type { KubeApi } from '../../kube/client.ts';
import { isNotFound } from '../../kube/errors.ts';
import { resourcePath, type KubeObject } from '../../kube/objects.ts';
import { KubePath } from '../../kube/paths.ts';
import { childName, namespaceOf } from '../render/names.ts';
import { endpointsTarget, renderAppEndpointSlices, slicesSelector, type EndpointSlice, type EndpointsTarget, type HolderAddress, type ReadyPod, type SliceApiVersion } from './endpoints.ts';

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
  const pods = await api.list<V1Pod>(KubePath.of({ version: 'v1', namespace: namespaceOf(app), resource: 'pods' }), { labelSelector: `${APP_LABEL}=${app.metadata.name}` });
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
  return holderAddressesOf(await api.find<V1Endpoints & KubeObject>(endpointsPath(service.namespace, service.name)));
}

const SLICE_VERSIONS: readonly SliceApiVersion[] = ['discovery.k8s.io/v1', 'discovery.k8s.io/v1beta1'];

/** The EndpointSlice version the API server serves, v1 preferred: asked of its discovery document. */
export async function servedSliceVersion(api: KubeApi): Promise<SliceApiVersion> {
  const group = (await api.get(KubePath.group('discovery.k8s.io'))) as { versions?: { groupVersion?: string }[] };
  const served = new Set((group.versions ?? []).map((version) => version.groupVersion));
  const chosen = SLICE_VERSIONS.find((version) => served.has(version));
  if (chosen === undefined) throw new Error(`the API server serves no EndpointSlice version the operator writes (${SLICE_VERSIONS.join(' or ')}); it serves ${[...served].join(', ') || 'none'}`);
  return chosen;
}

/**
 * Points the EndpointSlices of an App that scales to zero at its ready pods or at the holder (none when the
 * operator runs without one); returns which. The slices wanted are applied first, then those no longer wanted
 * deleted, so the Service is never without the addresses it should have. The core v1 Endpoints an earlier
 * version wrote for the same Service are deleted once per App and process: Kubernetes' mirroring controller would
 * otherwise copy their stale addresses into slices of its own.
 */
export function createEndpointsSwitch(api: KubeApi, holder: HolderService | null): (app: App) => Promise<EndpointsTarget> {
  // Asked once per process; a failure is asked again by the next switch.
  let version: Promise<SliceApiVersion> | undefined;
  const legacyGone = new Set<string>();
  return async (app) => {
    version ??= servedSliceVersion(api).catch((error: unknown) => {
      version = undefined;
      throw error;
    });
    const namespace = namespaceOf(app);
    const apiVersion = await version;
    const collection = resourcePath({ apiVersion, kind: 'EndpointSlice', namespace });
    const [pods, holders, existing] = await Promise.all([readyPodsOf(api, app), holder === null ? [] : holderAddresses(api, holder), api.list<EndpointSlice>(collection, { labelSelector: slicesSelector(app) })]);
    const wanted = renderAppEndpointSlices(app, pods, holders, apiVersion);
    for (const slice of wanted) await api.apply(slice);
    const names = new Set(wanted.map((slice) => slice.metadata!.name));
    for (const stale of existing.items.filter((slice) => !names.has(slice.metadata!.name))) {
      await api.delete(collection.named(stale.metadata!.name!)).catch(ignoreNotFound);
    }
    const key = `${namespace}/${app.metadata.name}`;
    if (!legacyGone.has(key)) {
      await api.delete(endpointsPath(namespace, childName(app))).catch(ignoreNotFound);
      legacyGone.add(key);
    }
    return endpointsTarget(pods, holders);
  };
}

function endpointsPath(namespace: string, name: string): KubePath {
  return KubePath.of({ version: 'v1', namespace, resource: 'endpoints', name });
}

function ignoreNotFound(error: unknown): void {
  if (!isNotFound(error)) throw error;
}
