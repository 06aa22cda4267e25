// Who owns a Deployment's `spec.replicas`. A fixed-size App (minReplicas = maxReplicas) has the operator
// apply its size on every reconcile, as before. An autoscaled App's size is the autoscaler's: the operator's
// applies leave `spec.replicas` out, and scaling goes through the Deployment's scale subresource.
//
// Leaving a field out of a server-side apply deletes it when no other manager owns it (the Deployment would
// fall back to 1 replica), so ownership is handed over first: the autoscaler applies `spec.replicas` under its
// own field manager (both then own it), and only a later reconcile leaves it out. While the operator alone holds
// it (a new App, an App that starts autoscaling), the operator applies the live size clamped to [min, max],
// never its minimum: a handover never resizes a running app. Once anyone else holds it (the autoscaler, or a
// `kubectl scale` that took it), the operator leaves it out: a size set outside Runlet is the autoscaler's to
// correct, with an Event, not the reconcile's to overwrite silently.
import type { App } from '../../crds/app-schema.ts';
import type { KubeApi } from '../../kube/client.ts';
import type { KubeObject, ManagedFieldsEntry } from '../../kube/objects.ts';

export const AUTOSCALER_FIELD_MANAGER = 'runlet-autoscaler';
/** Who owns the fields of the objects the operator applies and patches (managedFields). */
export const OPERATOR_FIELD_MANAGER = 'runlet-operator';

export interface ScaledDeployment extends KubeObject {
  spec?: { replicas?: number };
  status?: { replicas?: number; readyReplicas?: number };
}

type Scaling = App['spec']['scaling'];

/** Replicas follow the load when the App leaves room between its minimum and maximum. */
/** `status.lastScaling.reason` of an App that does not autoscale (minReplicas = maxReplicas). */
export const FIXED_SCALING_REASON = 'Fixed';

export function autoscales(scaling: Scaling): boolean {
  return scaling.maxReplicas > scaling.minReplicas;
}

export function clampReplicas(replicas: number, scaling: Scaling): number {
  return Math.min(scaling.maxReplicas, Math.max(scaling.minReplicas, replicas));
}

/**
 * What the operator's apply says of `spec.replicas`: a count, or null when the autoscaler owns it. A new
 * autoscaled App starts with at least one replica, as Knative's initial scale: its first start shows that the
 * app works at all; an App with `minReplicas: 0` goes to zero once idle.
 */
export function replicasToApply(scaling: Scaling, live: ScaledDeployment | undefined): number | null {
  if (!autoscales(scaling)) return scaling.minReplicas;
  if (live === undefined) return Math.max(1, scaling.minReplicas);
  if (replicasOwners(live).some((entry) => entry.manager !== OPERATOR_FIELD_MANAGER)) return null;
  return clampReplicas(live.spec?.replicas ?? scaling.minReplicas, scaling);
}

/** Whether `manager` holds `spec.replicas` in the Deployment's managedFields (by apply or by update). */
export function ownsReplicas(deployment: KubeObject, manager: string): boolean {
  return replicasOwners(deployment).some((entry) => entry.manager === manager);
}

/** The managedFields entries holding `spec.replicas`, reduced to that field: all a watch cache needs to keep. */
export function replicasOwners(deployment: KubeObject): ManagedFieldsEntry[] {
  return (deployment.metadata?.managedFields ?? []).flatMap((entry) => {
    const spec = entry.fieldsV1?.['f:spec'];
    if (typeof spec !== 'object' || spec === null || !('f:replicas' in spec)) return [];
    return [{ manager: entry.manager, operation: entry.operation, fieldsV1: { 'f:spec': { 'f:replicas': {} } } }];
  });
}

/**
 * The autoscaler takes `spec.replicas` of the Deployment the operator just applied, at its current value, so
 * that the operator's next apply may leave it out. `autoscalerApi` applies as AUTOSCALER_FIELD_MANAGER.
 */
export async function takeReplicas(autoscalerApi: KubeApi, applied: ScaledDeployment): Promise<void> {
  if (ownsReplicas(applied, AUTOSCALER_FIELD_MANAGER)) return;
  const { name, namespace } = applied.metadata ?? {};
  await autoscalerApi.apply({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace },
    spec: { replicas: applied.spec?.replicas ?? 1 },
  });
}
