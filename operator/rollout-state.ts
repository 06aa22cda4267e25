// What an App's Deployment says about serving, read the way `kubectl rollout status` and kstatus read it: has
// the Deployment controller seen the current template, are replicas of an older one left, how many replicas
// are available, and did the namespace refuse pods (ReplicaFailure) or the rollout pass its deadline. Pure.

/** The parts of a Deployment the App's status is made from (what the operator's Deployment watch keeps). */
export interface DeploymentView {
  metadata?: { generation?: number };
  /** The replicas wanted now: `minReplicas` today, the autoscaler's choice once it exists. */
  spec?: { replicas?: number };
  status?: DeploymentStatusView;
}

export interface DeploymentStatusView {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
}

export interface RolloutState {
  desiredReplicas: number;
  /** Pods not being deleted, of any template. */
  replicas: number;
  readyReplicas: number;
  /** Ready for the Deployment's minReadySeconds: what serving is counted by. */
  availableReplicas: number;
  updatedReplicas: number;
  /** The Deployment controller has seen the current template (observedGeneration). */
  observed: boolean;
  /** The Deployment controller has seen the current template, and no replica of an older one is left. */
  rolledOut: boolean;
  /** The API server's refusal of a pod (ReplicaFailure, reason FailedCreate): quota, admission, a webhook. */
  refusal: string | undefined;
  /** The rollout passed its progressDeadlineSeconds (Progressing=False, ProgressDeadlineExceeded). */
  stalled: string | undefined;
}

export function rolloutState(deployment: DeploymentView | undefined): RolloutState {
  const status = deployment?.status ?? {};
  const replicas = status.replicas ?? 0;
  const updatedReplicas = status.updatedReplicas ?? 0;
  const observed = status.observedGeneration !== undefined && status.observedGeneration >= (deployment?.metadata?.generation ?? 0);
  const refused = status.conditions?.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
  const stalled = status.conditions?.find((c) => c.type === 'Progressing' && c.status === 'False' && c.reason === 'ProgressDeadlineExceeded');
  return {
    desiredReplicas: deployment?.spec?.replicas ?? 0,
    replicas,
    readyReplicas: status.readyReplicas ?? 0,
    availableReplicas: status.availableReplicas ?? 0,
    updatedReplicas,
    observed,
    rolledOut: deployment !== undefined && observed && replicas === updatedReplicas,
    refusal: refused === undefined ? undefined : (refused.message ?? refused.reason ?? 'a pod was refused'),
    stalled: stalled === undefined ? undefined : (stalled.message ?? 'the rollout passed its progress deadline'),
  };
}
