// The TokenRequest API (POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token), as the real server answers
// it for a bound service-account token: a JWT-shaped token for the audiences asked (the API server's own when
// none), expiring after expirationSeconds (at least 600), whose TokenReview fails once its ServiceAccount is
// deleted or replaced (another uid). The token's claims carry its namespace, name and uid, as a real one does,
// but it is signed by nothing: only this server's TokenReview accepts it.
import { randomBytes } from 'node:crypto';
import { API_SERVER_AUDIENCE, type AuthReviews } from './auth-reviews.ts';
import { KubeError } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

export { API_SERVER_AUDIENCE };
const MIN_EXPIRATION_SECONDS = 600;
const DEFAULT_EXPIRATION_SECONDS = 3600;

export function answerTokenRequest(reviews: AuthReviews, serviceAccount: KubeObject, body: unknown, now = Date.now()): object {
  const spec = isPlainObject(body) && isPlainObject(body.spec) ? body.spec : {};
  const expirationSeconds = spec.expirationSeconds === undefined ? DEFAULT_EXPIRATION_SECONDS : Number(spec.expirationSeconds);
  if (!Number.isInteger(expirationSeconds) || expirationSeconds < MIN_EXPIRATION_SECONDS) {
    throw new KubeError(422, 'Invalid', `TokenRequest.authentication.k8s.io is invalid: spec.expirationSeconds: Invalid value: ${String(spec.expirationSeconds)}: may not specify a duration less than 10 minutes`);
  }
  const audiences = Array.isArray(spec.audiences) && spec.audiences.length > 0 ? spec.audiences.map(String) : [API_SERVER_AUDIENCE];
  const { namespace, name, uid } = serviceAccount.metadata as { namespace: string; name: string; uid: string };
  const exp = Math.floor(now / 1000) + expirationSeconds;
  const claims = { aud: audiences, exp, iat: Math.floor(now / 1000), sub: `system:serviceaccount:${namespace}:${name}`, 'kubernetes.io': { namespace, serviceaccount: { name, uid } } };
  const part = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const token = `${part({ alg: 'RS256', kid: 'fake' })}.${part(claims)}.${randomBytes(32).toString('base64url')}`;
  reviews.tokens.set(token, {
    username: `system:serviceaccount:${namespace}:${name}`,
    uid,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
    audiences,
    boundTo: { namespace, name, uid },
    expiresAtMs: exp * 1000,
  });
  return {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    metadata: { name, namespace, creationTimestamp: null },
    spec: { audiences, expirationSeconds },
    status: { token, expirationTimestamp: new Date(exp * 1000).toISOString() },
  };
}
