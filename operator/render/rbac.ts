// The sidecar's identity in an app namespace, shared by every App there: a ServiceAccount and a RoleBinding
// of it to the chart's ClusterRole `runlet-sidecar` (RunLog create and status writes, App reads: nothing else).
//
// Both are owned by every App of the namespace (owner references without `controller`): the API server's
// garbage collector deletes a dependent once all its owners are gone, so they go with the last App — even
// while no operator runs — and stay as long as one is left (deleting one App only drops its reference).
// This is the Kubernetes-native clean-up; the alternative, the operator deleting them when its cache shows no
// App left, races with an App being created and needs a running operator.
// No `blockOwnerDeletion`: a foreground deletion of one App must not wait for objects the others still use.
import type { V1OwnerReference, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { APP_KIND, RUNLET_API_VERSION } from '../../crds/api-group.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from './labels.ts';
import { SIDECAR_CLUSTER_ROLE, SIDECAR_ROLE_BINDING, SIDECAR_SERVICE_ACCOUNT } from './names.ts';

export const SIDECAR_COMPONENT_LABEL = 'app.kubernetes.io/component';
export const SIDECAR_COMPONENT = 'sidecar';
/** Label selector of the per-namespace sidecar RBAC objects. */
export const SIDECAR_RBAC_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY},${SIDECAR_COMPONENT_LABEL}=${SIDECAR_COMPONENT}`;

export type SidecarRbac = [V1ServiceAccount, V1RoleBinding];

/** `owners`: the Apps of the namespace (stored: with a uid), in any order. */
export function renderSidecarRbac(namespace: string, owners: readonly App[]): SidecarRbac {
  const metadata = (name: string) => ({
    name,
    namespace,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [SIDECAR_COMPONENT_LABEL]: SIDECAR_COMPONENT },
    ownerReferences: sharedOwnerReferences(owners),
  });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: metadata(SIDECAR_SERVICE_ACCOUNT) },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: metadata(SIDECAR_ROLE_BINDING),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: SIDECAR_CLUSTER_ROLE },
      subjects: [{ kind: 'ServiceAccount', name: SIDECAR_SERVICE_ACCOUNT, namespace }],
    },
  ];
}

/** Every App of the namespace, sorted by uid, so that the same Apps always render the same list (no needless writes). */
export function sharedOwnerReferences(owners: readonly App[]): V1OwnerReference[] {
  return owners
    .map((app) => {
      const uid = app.metadata.uid;
      if (!uid) throw new Error(`App "${app.metadata.name}" has no uid; only stored Apps can own objects`);
      return { apiVersion: RUNLET_API_VERSION, kind: APP_KIND, name: app.metadata.name, uid };
    })
    .sort((a, b) => (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0));
}

/** What the watches keep of a sidecar ServiceAccount or RoleBinding. */
export interface ObservedSidecarRbac {
  metadata?: { labels?: Record<string, string>; ownerReferences?: V1OwnerReference[] };
  roleRef?: unknown;
  subjects?: unknown;
}

/**
 * Whether an object seen by the watch differs from what `renderSidecarRbac` made of the namespace's Apps in a
 * way that matters: a label the watch selects by, an App missing among the owners, the binding's role or
 * subjects. Extra owners are not drift: the garbage collector drops the reference of a deleted App itself.
 */
export function sidecarRbacDrifted(actual: ObservedSidecarRbac, wanted: V1ServiceAccount | V1RoleBinding): boolean {
  const labels = actual.metadata?.labels ?? {};
  const labelChanged = Object.entries(wanted.metadata?.labels ?? {}).some(([key, value]) => labels[key] !== value);
  const owners = new Set((actual.metadata?.ownerReferences ?? []).map((ref) => ref.uid));
  const ownerMissing = (wanted.metadata?.ownerReferences ?? []).some((ref) => !owners.has(ref.uid));
  const bindingChanged = 'roleRef' in wanted && (canonical(actual.roleRef) !== canonical(wanted.roleRef) || canonical(actual.subjects) !== canonical(wanted.subjects));
  return labelChanged || ownerMissing || bindingChanged;
}

/** JSON with every object's keys in order: the API server may answer fields in another order than we sent. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, field: unknown) =>
    typeof field === 'object' && field !== null && !Array.isArray(field) ? Object.fromEntries(Object.entries(field).sort(([a], [b]) => (a < b ? -1 : 1))) : field,
  );
}
