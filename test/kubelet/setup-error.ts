// A pod that cannot be set up yet (a ConfigMap or Secret it needs is missing, an image has no local
// mapping or cannot be pulled): reported on the container's waiting state with the reason a real kubelet
// would give, and retried, since the missing object may still be created.

export type SetupErrorReason = 'CreateContainerConfigError' | 'ContainerCreating' | 'ErrImageNeverPull' | 'ErrImagePull' | 'ImagePullBackOff';

export class PodSetupError extends Error {
  readonly reason: SetupErrorReason;
  /** The image a pull failed for (ErrImagePull), and the container it is for: only that container shows the error. */
  readonly pull: { image: string; container: string } | undefined;

  constructor(reason: SetupErrorReason, message: string, pull?: { image: string; container: string }) {
    super(message);
    this.name = 'PodSetupError';
    this.reason = reason;
    this.pull = pull;
  }
}
