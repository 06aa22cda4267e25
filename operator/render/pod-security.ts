// What makes an App's pod pass the Pod Security Standards' `restricted` profile, and more: no root, the
// runtime's default seccomp profile, no capabilities, no privilege escalation, and a read-only root
// filesystem (each container writes only to its emptyDirs: /tmp, and the sidecar's data directory).
//
// runAsUser is explicit, so the kubelet never has to trust the image's USER (a name such as `node` cannot be
// checked against runAsNonRoot): the sidecar runs as the Runlet image's user, the Python runtime as its
// image's (and `runlet dockerfile` images'), and a custom image, whose user the operator cannot know, as
// 65532 (the conventional `nonroot`; README "Custom images").
import type { V1PodSecurityContext, V1SecurityContext } from '@kubernetes/client-node';

/** The `node` user of the Runlet image (Dockerfile: USER 1000). */
export const SIDECAR_UID = 1000;
/** The `runlet` user of the Python runtime image (runtime/python/Dockerfile) and of `runlet dockerfile` images. */
export const PYTHON_RUNTIME_UID = 10001;
/** Custom images: a user that exists nowhere, so it owns nothing the image did not make world-readable. */
export const CUSTOM_IMAGE_UID = 65532;

export const POD_SECURITY_CONTEXT: V1PodSecurityContext = {
  runAsNonRoot: true,
  seccompProfile: { type: 'RuntimeDefault' },
};

export function containerSecurityContext(uid: number): V1SecurityContext {
  return {
    runAsUser: uid,
    runAsGroup: uid,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    readOnlyRootFilesystem: true,
  };
}
