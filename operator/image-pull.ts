// An App's pod whose image cannot be pulled: the kubelet says so only on the pod (a container waiting with
// reason ErrImagePull, then ImagePullBackOff between tries), never on the Deployment, whose rollout just does
// not progress until its deadline. The operator's Pod watch keeps that waiting state, so the App's status can
// say what is wrong (app-status.ts) instead of `RollingOut` for ten minutes.
import type { V1ContainerStatus, V1PodStatus } from '@kubernetes/client-node';

/** A container's image the kubelet could not pull, as its waiting state says it. */
export interface ImagePullFailure {
  container: string;
  image: string;
  /** The kubelet's reason: ErrImagePull, ImagePullBackOff, InvalidImageName or ErrImageNeverPull. */
  reason: string;
  /** The kubelet's message (the registry's refusal on ErrImagePull; `Back-off pulling image "…"` between tries). */
  message: string;
  /**
   * The registry's refusal at the last pull of this image (ErrImagePull's message), kept through the back-offs
   * between pulls: what the App's status says, the same whichever of them the kubelet is at.
   */
  pullError?: string;
}

/** An image pull failure of one of the App's pods, with the pod's name. */
export type PodImagePullFailure = ImagePullFailure & { pod: string };

const PULL_REASONS: ReadonlySet<string> = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull']);

/**
 * The first container of the pod (init containers first) waiting for an image it cannot pull; `previous`: what
 * the pod showed before, whose registry refusal is kept while the kubelet backs off.
 */
export function imagePullFailureOf(status: V1PodStatus | undefined, previous: ImagePullFailure | undefined): ImagePullFailure | undefined {
  const statuses: V1ContainerStatus[] = [...(status?.initContainerStatuses ?? []), ...(status?.containerStatuses ?? [])];
  for (const container of statuses) {
    const waiting = container.state?.waiting;
    if (waiting?.reason === undefined || !PULL_REASONS.has(waiting.reason)) continue;
    const failure: ImagePullFailure = { container: container.name, image: container.image, reason: waiting.reason, message: waiting.message ?? '' };
    const pullError = waiting.reason === 'ErrImagePull' ? failure.message : previous?.image === failure.image ? previous.pullError : undefined;
    return pullError === undefined || pullError === '' ? failure : { ...failure, pullError };
  }
  return undefined;
}

/** What the App's status says of it: the pod, the container, the image, and the kubelet's words (the registry's refusal once known). */
export function describeImagePullFailure(failure: PodImagePullFailure): string {
  const { pod, container, image, reason, message, pullError } = failure;
  const said = pullError ?? (message === '' ? reason : `${reason}: ${message}`);
  return `pod ${pod}: container "${container}" cannot pull image "${image}": ${said}; check the image name, and that apps.imagePullSecrets names a Secret of this namespace that the registry accepts`;
}
