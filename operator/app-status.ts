// App.status as the operator writes it: what the last reconcile observed, as conditions a user (and
// `kubectl wait --for=condition=Ready`) can read. Pure: the reconciler says what happened, this says what the
// status becomes; `runs` counters belong to the RunLog roll-up and are never touched here.
import { isDeepStrictEqual } from 'node:util';
import type { App, AppStatus, Condition, ConditionStatus } from '../crds/app-schema.ts';

export type Observation =
  /** The spec breaks the schema; nothing was applied. */
  | { kind: 'invalid'; problems: string[] }
  /** Applying a child failed; the reconcile is retried with backoff. */
  | { kind: 'apply-failed'; message: string }
  | {
      kind: 'applied';
      /** What was applied, for the message: `Deployment`, `Service`, … */
      children: string[];
      deployment: DeploymentReplicas | undefined;
      /** The code ConfigMap the pods wait for, when it does not exist. */
      missingCodeConfigMap?: string;
    };

export interface DeploymentReplicas {
  replicas?: number;
  readyReplicas?: number;
}

/** The part of the status the operator owns (merge-patched, so other writers' fields survive). */
export type OwnedStatus = Required<Pick<AppStatus, 'observedGeneration' | 'conditions' | 'url'>> & Pick<AppStatus, 'replicas' | 'readyReplicas'>;

export const READY = 'Ready';
export const AVAILABLE = 'Available';

const MAX_MESSAGE_LENGTH = 32768;

export function nextAppStatus(app: App, observation: Observation, url: string, now: Date): OwnedStatus {
  const current = app.status;
  const generation = app.metadata.generation ?? 0;
  const condition = (type: string, status: ConditionStatus, reason: string, message: string): Condition => {
    const previous = current?.conditions?.find((c) => c.type === type);
    return {
      type,
      status,
      reason,
      message: message.length > MAX_MESSAGE_LENGTH ? `${message.slice(0, MAX_MESSAGE_LENGTH - 1)}…` : message,
      observedGeneration: generation,
      // The time it last changed, not the time it was last confirmed.
      lastTransitionTime: previous?.status === status ? previous.lastTransitionTime : metaTime(now),
    };
  };
  const keptAvailable = current?.conditions?.filter((c) => c.type === AVAILABLE) ?? [];
  const kept = { replicas: current?.replicas, readyReplicas: current?.readyReplicas };

  switch (observation.kind) {
    case 'invalid':
      return {
        observedGeneration: generation,
        conditions: [condition(READY, 'False', 'InvalidSpec', observation.problems.join('; ')), ...keptAvailable],
        url,
        ...kept,
      };
    case 'apply-failed':
      return {
        observedGeneration: generation,
        conditions: [condition(READY, 'False', 'ApplyFailed', observation.message), ...keptAvailable],
        url,
        ...kept,
      };
    case 'applied': {
      const replicas = observation.deployment?.replicas ?? 0;
      const readyReplicas = observation.deployment?.readyReplicas ?? 0;
      const ready = observation.missingCodeConfigMap === undefined
        ? condition(READY, 'True', 'ChildrenApplied', `applied ${observation.children.join(', ')}`)
        : condition(READY, 'False', 'CodeConfigMapNotFound', `ConfigMap "${observation.missingCodeConfigMap}" with the app's code does not exist; its pods wait for it`);
      return {
        observedGeneration: generation,
        conditions: [ready, availability(app, readyReplicas, condition)],
        url,
        replicas,
        readyReplicas,
      };
    }
  }
}

function availability(
  app: App,
  readyReplicas: number,
  condition: (type: string, status: ConditionStatus, reason: string, message: string) => Condition,
): Condition {
  const wanted = app.spec.scaling.minReplicas;
  if (readyReplicas > 0) return condition(AVAILABLE, 'True', 'MinimumReplicasAvailable', `${readyReplicas} of ${wanted} replicas ready`);
  if (wanted === 0) return condition(AVAILABLE, 'False', 'ScaledToZero', 'minReplicas is 0: no replica runs');
  return condition(AVAILABLE, 'False', 'NoReplicasAvailable', `0 of ${wanted} replicas ready`);
}

/** Whether writing `next` would change the status: unchanged status is not written (no event, no write load). */
export function ownedStatusDiffers(current: AppStatus | undefined, next: OwnedStatus): boolean {
  const owned = {
    observedGeneration: current?.observedGeneration,
    conditions: current?.conditions,
    url: current?.url,
    replicas: current?.replicas,
    readyReplicas: current?.readyReplicas,
  };
  // Key order is not compared: a real API server returns object keys sorted.
  return !isDeepStrictEqual(withoutUndefined(owned), withoutUndefined({ ...owned, ...next }));
}

/** metav1.Time: RFC 3339 in whole seconds. */
function metaTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as Partial<T>;
}
