// App.status as the operator writes it: what the last reconcile observed, as conditions that users, `kubectl
// wait`, kstatus and GitOps tools read. Pure: the reconciler says what happened, this says what the status
// becomes; `runs` counters belong to the RunLog roll-up and are never touched here.
//
//   ChildrenApplied  the operator's own work: children applied for this generation (or why not)
//   Available        at least minReplicas replicas are available (a Deployment's Available, for the App)
//   Ready            the summary: children applied AND the current template rolled out AND Available
// A pod whose image cannot be pulled makes both False with reason ImagePullBackOff and the kubelet's message.
import { isDeepStrictEqual } from 'node:util';
import type { App, AppStatus, Condition, ConditionStatus, ScalingDecisionRecord } from '../crds/app-schema.ts';
import { metaTime } from '../kube/objects.ts';
import { describeImagePullFailure, type PodImagePullFailure } from './image-pull.ts';
import { rolloutState, type DeploymentView, type RolloutState } from './rollout-state.ts';
import { NOT_ENROLLED_REASON } from './namespace-enrolment.ts';
import { autoscales, FIXED_SCALING_REASON } from './autoscaling/replicas-owner.ts';

export type Observation =
  /** The spec breaks the schema; nothing was applied. */
  | { kind: 'invalid'; problems: string[] }
  /** Applying a child failed; the reconcile is retried with backoff. */
  | { kind: 'apply-failed'; message: string }
  /** The namespace is not an App namespace (namespace-enrolment.ts): nothing may be applied there. */
  | { kind: 'not-enrolled'; message: string }
  | {
      kind: 'applied';
      /** What was applied, for the message: `Deployment`, `Service`, … */
      children: string[];
      /** The Deployment as the apply answered it. */
      deployment: DeploymentView | undefined;
      /** The code ConfigMap the pods wait for, when it does not exist. */
      missingCodeConfigMap?: string;
      /** A pod of the App whose image the kubelet cannot pull. */
      imagePull?: PodImagePullFailure;
    };

/**
 * The part of the status the operator owns (merge-patched, so other writers' fields survive). `desiredReplicas`
 * and `lastScaling` are the autoscaler's for an autoscaled App and this writer's for a fixed one.
 */
export type OwnedStatus = Required<Pick<AppStatus, 'observedGeneration' | 'conditions' | 'url'>> &
  Pick<AppStatus, 'replicas' | 'readyReplicas' | 'desiredReplicas' | 'lastScaling'>;


export const READY = 'Ready';
export const AVAILABLE = 'Available';
export const CHILDREN_APPLIED = 'ChildrenApplied';

/** Ready=False reasons that are failures to act on (Warning Events), not steps on the way. */
export const FAILURE_REASONS: ReadonlySet<string> = new Set(['InvalidSpec', 'ApplyFailed', NOT_ENROLLED_REASON, 'CodeConfigMapNotFound', 'PodsRefused', 'ImagePullBackOff', 'ProgressDeadlineExceeded']);
/** The reason of Ready and Available while a pod's image cannot be pulled, whichever of its tries the kubelet is at (the message says). */
export const IMAGE_PULL_BACK_OFF = 'ImagePullBackOff';

const MAX_MESSAGE_LENGTH = 32768;

type Verdict = [status: ConditionStatus, reason: string, message: string];

export function nextAppStatus(app: App, observation: Observation, url: string, now: Date): OwnedStatus {
  const current = app.status;
  const generation = app.metadata.generation ?? 0;
  const condition = (type: string, [status, reason, message]: Verdict): Condition => {
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

  if (observation.kind !== 'applied') {
    // Nothing new was applied: the pods of the last good spec still run, so what was known of them stays.
    const failure: Verdict =
      observation.kind === 'invalid'
        ? ['False', 'InvalidSpec', observation.problems.join('; ')]
        : ['False', observation.kind === 'not-enrolled' ? NOT_ENROLLED_REASON : 'ApplyFailed', observation.message];
    const keptAvailable = current?.conditions?.filter((c) => c.type === AVAILABLE) ?? [];
    return {
      observedGeneration: generation,
      conditions: [condition(READY, failure), ...keptAvailable, condition(CHILDREN_APPLIED, failure)],
      url,
      replicas: current?.replicas,
      readyReplicas: current?.readyReplicas,
    };
  }

  const rollout = rolloutState(observation.deployment);
  const minimum = app.spec.scaling.minReplicas;
  const applied: Verdict = observation.missingCodeConfigMap === undefined
    ? ['True', 'Applied', `applied ${observation.children.join(', ')}`]
    : ['False', 'CodeConfigMapNotFound', `ConfigMap "${observation.missingCodeConfigMap}" with the app's code does not exist; its pods wait for it`];
  const pullFailure = observation.imagePull === undefined ? undefined : describeImagePullFailure(observation.imagePull);
  const available = availability(rollout, minimum, pullFailure);
  return {
    observedGeneration: generation,
    conditions: [condition(READY, readiness(applied, available, rollout, pullFailure)), condition(AVAILABLE, available), condition(CHILDREN_APPLIED, applied)],
    url,
    replicas: rollout.replicas,
    readyReplicas: rollout.readyReplicas,
    ...fixedScaling(app, now),
  };
}

/**
 * A fixed App's wanted replicas, which no autoscaler writes: without them `kubectl get apps` shows DESIRED and
 * SCALING blank. The time is when the count was first set, so a reconcile that changes nothing writes nothing.
 */
function fixedScaling(app: App, now: Date): Pick<OwnedStatus, 'desiredReplicas' | 'lastScaling'> {
  const { minReplicas, maxReplicas } = app.spec.scaling;
  if (autoscales(app.spec.scaling)) return {};
  const previous = app.status?.lastScaling;
  if (previous?.reason === FIXED_SCALING_REASON && previous.to === minReplicas) return { desiredReplicas: minReplicas, lastScaling: previous };
  const lastScaling: ScalingDecisionRecord = {
    time: metaTime(now),
    from: app.status?.desiredReplicas ?? app.status?.replicas ?? 0,
    to: minReplicas,
    reason: FIXED_SCALING_REASON,
    message: `minReplicas and maxReplicas are both ${maxReplicas}: the App runs that many replicas and is not autoscaled`,
  };
  return { desiredReplicas: minReplicas, lastScaling };
}

/** At least `minimum` replicas available, whatever their template (during a rollout old ones serve too). */
function availability(rollout: RolloutState, minimum: number, pullFailure: string | undefined): Verdict {
  const { availableReplicas: available } = rollout;
  if (available >= minimum) {
    if (available === 0) return ['True', 'ScaledToZero', 'minReplicas is 0 and no replica runs: a call starts one and waits for it at the activator'];
    return ['True', 'MinimumReplicasAvailable', `${available} replicas available, minReplicas ${minimum}`];
  }
  const shortfall = `${available} of minReplicas ${minimum} replicas available`;
  if (rollout.refusal !== undefined) return ['False', 'PodsRefused', `${shortfall}; the API server refused a pod: ${rollout.refusal}`];
  if (pullFailure !== undefined) return ['False', IMAGE_PULL_BACK_OFF, `${shortfall}; ${pullFailure}`];
  return ['False', 'MinimumReplicasUnavailable', shortfall];
}

/** Serving this generation: applied, rolled out, and Available; otherwise the first thing in the way. */
function readiness(applied: Verdict, available: Verdict, rollout: RolloutState, pullFailure: string | undefined): Verdict {
  if (applied[0] !== 'True') return applied;
  if (rollout.rolledOut && available[0] === 'True') {
    return ['True', 'Serving', `${rollout.availableReplicas} of ${rollout.desiredReplicas} replicas available, all of the current template`];
  }
  if (rollout.refusal !== undefined) return ['False', 'PodsRefused', `the API server refused a pod: ${rollout.refusal}`];
  // Before the deadline: the rollout cannot progress, and this says why (the deadline only that it did not).
  if (pullFailure !== undefined) return ['False', IMAGE_PULL_BACK_OFF, pullFailure];
  if (rollout.stalled !== undefined) return ['False', 'ProgressDeadlineExceeded', rollout.stalled];
  if (!rollout.observed) return ['False', 'RollingOut', 'waiting for the Deployment controller to take up the current template'];
  if (!rollout.rolledOut) {
    return ['False', 'RollingOut', `${rollout.updatedReplicas} of ${rollout.desiredReplicas} replicas of the current template, ${rollout.replicas - rollout.updatedReplicas} of older ones left`];
  }
  return available;
}

/** Whether writing `next` would change the status: unchanged status is not written (no event, no write load). */
export function ownedStatusDiffers(current: AppStatus | undefined, next: OwnedStatus): boolean {
  const owned = {
    observedGeneration: current?.observedGeneration,
    conditions: current?.conditions,
    url: current?.url,
    replicas: current?.replicas,
    readyReplicas: current?.readyReplicas,
    desiredReplicas: current?.desiredReplicas,
    lastScaling: current?.lastScaling,
  };
  // Key order is not compared: a real API server returns object keys sorted.
  return !isDeepStrictEqual(withoutUndefined(owned), withoutUndefined({ ...owned, ...next }));
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as Partial<T>;
}
