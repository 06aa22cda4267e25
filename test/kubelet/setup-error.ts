// A pod that cannot be set up yet (a ConfigMap or Secret it needs is missing, an image has no local
// mapping): reported on the container's waiting state with the reason a real kubelet would give, and
// retried, since the missing object may still be created.

export type SetupErrorReason = 'CreateContainerConfigError' | 'ContainerCreating' | 'ErrImageNeverPull';

export class PodSetupError extends Error {
  readonly reason: SetupErrorReason;

  constructor(reason: SetupErrorReason, message: string) {
    super(message);
    this.name = 'PodSetupError';
    this.reason = reason;
  }
}
