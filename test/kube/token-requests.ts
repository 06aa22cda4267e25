// The TokenRequest API (POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token), as the real server answers
// it for a bound service-account token: a JWT-shaped token for the audiences asked (the API server's own when
// none), expiring after expirationSeconds (at least 600), whose TokenReview fails once its ServiceAccount is
// deleted or replaced (another uid). The token is a JWT signed RS256 by the server's issuer key, with the claims
// a real one carries (iss, sub, aud, exp, iat, nbf, jti, and `kubernetes.io` with the namespace, the
// ServiceAccount's name and uid and the bound pod's): verifiable offline against the key set the server serves
// (service-account-issuer.ts), as a real cluster's.
//
// Bound to a pod (`spec.boundObjectRef` of kind Pod, as the kubelet asks for a projected token): the pod must
// exist with that uid and run as that ServiceAccount, the review's user carries the pod's name and uid in its
// extra (`authentication.kubernetes.io/pod-name`, `pod-uid`), and the token fails review once the pod is gone.
import { randomUUID } from 'node:crypto';
import { API_SERVER_AUDIENCE, type AuthReviews } from './auth-reviews.ts';
import { signServiceAccountToken } from './service-account-issuer.ts';
import { KubeError } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

export { API_SERVER_AUDIENCE };
const MIN_EXPIRATION_SECONDS = 600;
const DEFAULT_EXPIRATION_SECONDS = 3600;

/** The pods of the server, for a token bound to one: undefined when there is none of that name. */
export type PodLookup = (namespace: string, name: string) => KubeObject | undefined;

export const POD_NAME_EXTRA = 'authentication.kubernetes.io/pod-name';
export const POD_UID_EXTRA = 'authentication.kubernetes.io/pod-uid';

export function answerTokenRequest(reviews: AuthReviews, serviceAccount: KubeObject, body: unknown, pod: PodLookup, now = Date.now()): object {
  const spec = isPlainObject(body) && isPlainObject(body.spec) ? body.spec : {};
  const expirationSeconds = spec.expirationSeconds === undefined ? DEFAULT_EXPIRATION_SECONDS : Number(spec.expirationSeconds);
  if (!Number.isInteger(expirationSeconds) || expirationSeconds < MIN_EXPIRATION_SECONDS) {
    throw new KubeError(422, 'Invalid', `TokenRequest.authentication.k8s.io is invalid: spec.expirationSeconds: Invalid value: ${String(spec.expirationSeconds)}: may not specify a duration less than 10 minutes`);
  }
  const audiences = Array.isArray(spec.audiences) && spec.audiences.length > 0 ? spec.audiences.map(String) : [API_SERVER_AUDIENCE];
  const { namespace, name, uid } = serviceAccount.metadata as { namespace: string; name: string; uid: string };
  const boundPod = boundPodOf(spec.boundObjectRef, namespace, name, pod);
  const exp = Math.floor(now / 1000) + expirationSeconds;
  const podClaim = boundPod === undefined ? {} : { pod: boundPod };
  const iat = Math.floor(now / 1000);
  // jti, as servers from 1.29 set it: two tokens asked for in the same second differ.
  const claims = { aud: audiences, exp, iat, nbf: iat, jti: randomUUID(), sub: `system:serviceaccount:${namespace}:${name}`, 'kubernetes.io': { namespace, serviceaccount: { name, uid }, ...podClaim } };
  const token = signServiceAccountToken(claims);
  reviews.tokens.set(token, {
    username: `system:serviceaccount:${namespace}:${name}`,
    uid,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
    ...(boundPod === undefined ? {} : { extra: { [POD_NAME_EXTRA]: [boundPod.name], [POD_UID_EXTRA]: [boundPod.uid] } }),
    audiences,
    boundTo: { namespace, name, uid },
    ...(boundPod === undefined ? {} : { boundPod: { namespace, ...boundPod } }),
    expiresAtMs: exp * 1000,
  });
  return {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    metadata: { name, namespace, creationTimestamp: null },
    spec: { audiences, expirationSeconds, ...(spec.boundObjectRef === undefined ? {} : { boundObjectRef: spec.boundObjectRef }) },
    status: { token, expirationTimestamp: new Date(exp * 1000).toISOString() },
  };
}

/** The pod a token is bound to, checked as the real server checks it; undefined when it is bound to none. */
function boundPodOf(ref: unknown, namespace: string, serviceAccount: string, pod: PodLookup): { name: string; uid: string } | undefined {
  if (ref === undefined || ref === null) return undefined;
  if (!isPlainObject(ref) || ref.kind !== 'Pod' || typeof ref.name !== 'string') {
    throw new KubeError(422, 'Invalid', `TokenRequest.authentication.k8s.io is invalid: spec.boundObjectRef: only a Pod (kind Pod, name, uid) is supported by the fake API server`);
  }
  const bound = pod(namespace, ref.name);
  if (bound === undefined) throw new KubeError(404, 'NotFound', `pods "${ref.name}" not found`);
  const uid = bound.metadata.uid as string;
  if (ref.uid !== undefined && ref.uid !== uid) {
    throw new KubeError(409, 'Conflict', `the UID in the bound object reference (${String(ref.uid)}) does not match the UID in record. The object might have been deleted and then recreated`);
  }
  const podAccount = (bound as { spec?: { serviceAccountName?: string } }).spec?.serviceAccountName ?? 'default';
  if (podAccount !== serviceAccount) {
    throw new KubeError(400, 'BadRequest', `cannot bind token for serviceaccount "${serviceAccount}" to pod running with different serviceaccount name.`);
  }
  return { name: ref.name, uid };
}
