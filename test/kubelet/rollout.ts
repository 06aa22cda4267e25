// The Deployment controller's decisions, as a pure function of the Deployment and its pods: how many pods
// of the current template to create and which pods to delete, honouring the strategy (RollingUpdate with
// maxSurge / maxUnavailable, or Recreate), and the status the Deployment should show. Pods are owned by
// the Deployment directly (there are no ReplicaSets here); `pod-template-hash` tells templates apart.
import type { ConditionClock, TimedCondition } from './conditions.ts';

export interface OwnedPod {
  name: string;
  templateHash: string | undefined;
  /** Deleted and waiting for its processes to stop. */
  terminating: boolean;
  ready: boolean;
  /** Creation time, ISO 8601; for choosing which pods go first. */
  createdAt: string;
}

export interface RolloutSpec {
  replicas: number;
  strategy: 'RollingUpdate' | 'Recreate';
  maxSurge: number | string | undefined;
  maxUnavailable: number | string | undefined;
}

export interface RolloutPlan {
  /** Pods of the current template to create. */
  create: number;
  /** Names of pods to delete. */
  remove: string[];
}

export interface DeploymentStatusView {
  observedGeneration: number;
  replicas: number;
  updatedReplicas: number;
  readyReplicas: number;
  availableReplicas: number;
  unavailableReplicas: number;
  terminatingReplicas: number;
  conditions: TimedCondition[];
}

const DEFAULT_SURGE_AND_UNAVAILABLE = '25%';

/** An int-or-percent of `replicas`; percentages round up for surge and down for unavailability, as Kubernetes does. */
function scaledValue(value: number | string | undefined, replicas: number, roundUp: boolean): number {
  const text = String(value ?? DEFAULT_SURGE_AND_UNAVAILABLE);
  const percent = /^(\d+)%$/.exec(text);
  if (percent === null) return Number(text);
  const exact = (Number(percent[1]) * replicas) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

export function surgeAndUnavailable(spec: RolloutSpec): { surge: number; unavailable: number } {
  const surge = scaledValue(spec.maxSurge, spec.replicas, true);
  const unavailable = scaledValue(spec.maxUnavailable, spec.replicas, false);
  // Both zero would block every rollout; Kubernetes then allows one unavailable pod.
  return surge === 0 && unavailable === 0 ? { surge, unavailable: 1 } : { surge, unavailable };
}

/** Pods in the order they should go: not ready before ready, then the newest first. */
function removalOrder(pods: OwnedPod[]): OwnedPod[] {
  return [...pods].sort((a, b) => Number(a.ready) - Number(b.ready) || b.createdAt.localeCompare(a.createdAt));
}

export function planRollout(spec: RolloutSpec, currentHash: string, pods: readonly OwnedPod[]): RolloutPlan {
  const active = pods.filter((pod) => !pod.terminating);
  const current = active.filter((pod) => pod.templateHash === currentHash);
  const old = active.filter((pod) => pod.templateHash !== currentHash);
  const excess = removalOrder(current).slice(0, Math.max(0, current.length - spec.replicas));
  const keptCurrent = current.length - excess.length;
  const remove = excess.map((pod) => pod.name);

  if (spec.strategy === 'Recreate') {
    // Every old pod goes, and the new ones start only once the old ones have stopped.
    if (old.length > 0) return { create: 0, remove: [...remove, ...old.map((pod) => pod.name)] };
    if (pods.some((pod) => pod.terminating && pod.templateHash !== currentHash)) return { create: 0, remove };
    return { create: Math.max(0, spec.replicas - keptCurrent), remove };
  }

  const { surge, unavailable } = surgeAndUnavailable(spec);
  const create = Math.max(0, Math.min(spec.replicas - keptCurrent, spec.replicas + surge - (active.length - excess.length)));
  const minAvailable = spec.replicas - unavailable;
  let available = active.filter((pod) => pod.ready && !remove.includes(pod.name)).length;
  for (const pod of removalOrder(old)) {
    // An old pod that is not ready serves nobody: it goes at once. A ready one only while enough stay available.
    if (!pod.ready) remove.push(pod.name);
    else if (available - 1 >= minAvailable) {
      remove.push(pod.name);
      available -= 1;
    }
  }
  return { create, remove };
}

export function deploymentStatus(
  name: string,
  generation: number,
  spec: RolloutSpec,
  currentHash: string,
  pods: readonly OwnedPod[],
  clock: ConditionClock,
  /** Why the API server refused the last pod created for it, until one is created again. */
  refusal?: string,
): DeploymentStatusView {
  const active = pods.filter((pod) => !pod.terminating);
  const updated = active.filter((pod) => pod.templateHash === currentHash).length;
  const ready = active.filter((pod) => pod.ready).length;
  const minAvailable = spec.strategy === 'Recreate' ? spec.replicas : spec.replicas - surgeAndUnavailable(spec).unavailable;
  const complete = updated === spec.replicas && active.length === spec.replicas && ready === spec.replicas;
  const available =
    ready >= minAvailable
      ? clock.condition('Available', 'True', 'MinimumReplicasAvailable', 'Deployment has minimum availability.')
      : clock.condition('Available', 'False', 'MinimumReplicasUnavailable', 'Deployment does not have minimum availability.');
  const progressing = complete
    ? clock.condition('Progressing', 'True', 'NewReplicaSetAvailable', `Deployment "${name}" has successfully progressed.`)
    : clock.condition('Progressing', 'True', 'ReplicaSetUpdated', `Deployment "${name}" is progressing.`);
  return {
    observedGeneration: generation,
    replicas: active.length,
    updatedReplicas: updated,
    readyReplicas: ready,
    availableReplicas: ready,
    unavailableReplicas: Math.max(0, spec.replicas - ready),
    terminatingReplicas: pods.length - active.length,
    // As the ReplicaSet controller reports a refused pod, and the Deployment controller copies it.
    conditions: refusal === undefined ? [available, progressing] : [available, progressing, clock.condition('ReplicaFailure', 'True', 'FailedCreate', refusal)],
  };
}
