// The drain token: what the admin port's /drain asks of whoever would drain the replica. The admin port
// listens on the pod IP (the kubelet probes it there, Prometheus scrapes it there), so any pod of the
// cluster can reach it; only the pod's own preStop hook, which the operator renders with the token in its
// path, may drain. In the path rather than a header: kubelets before 1.26 send no httpHeaders on hooks.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** The token's environment variable: the operator sets it on the sidecar container (render/sidecar-container.ts). */
export const DRAIN_TOKEN_ENV = 'RUNLET_DRAIN_TOKEN';
/** The admin port's drain route; with a token configured, `/drain/<token>`. */
export const DRAIN_PATH = '/drain';

const MIN_TOKEN_LENGTH = 32;
const TOKEN_SHAPE = /^[A-Za-z0-9_-]+$/;

/** A new token: 32 random bytes, base64url (safe in a URL path as it is). */
export function newDrainToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Checks a configured token; throws naming the variable when it is too short or not path-safe. */
export function checkDrainToken(token: string): string {
  if (token.length < MIN_TOKEN_LENGTH || !TOKEN_SHAPE.test(token)) {
    throw new Error(`${DRAIN_TOKEN_ENV} must be at least ${MIN_TOKEN_LENGTH} characters of A-Z, a-z, 0-9, "-" and "_" (got ${token.length} characters)`);
  }
  return token;
}

/**
 * Whether `given` is the token, in time that does not depend on where they differ: both are hashed first,
 * so the comparison is of equal lengths whatever was sent.
 */
export function drainTokenMatches(given: string, token: string): boolean {
  return timingSafeEqual(digest(given), digest(token));
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
