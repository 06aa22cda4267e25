// Who may read (and cancel) runs through the management API in a cluster: the caller's bearer service-account
// token, judged by the Kubernetes API server itself — TokenReview (a valid token? whose?), then
// SubjectAccessReview (may that user `list` — for a cancel, `cancel` — `runs` of group `runlet.dev` in the
// project's namespace? — or the verb an API keys operation asks on `apikeys`, management/access.ts). Access is the cluster's RBAC: a Role
// in the project's namespace granting that verb on that resource (no such kind exists; RBAC checks it all the
// same), bound to the caller's service account.
//
//   authenticate: kubeAuthenticator({ api, logger })   // ManagementApiOptions.authenticate
//
// Decisions are cached briefly per token, verb and namespace, so a client paging through runs costs the API server
// two reviews per token every half minute, not two per request; a revoked grant takes effect within that TTL.
// When a review cannot be made the request is refused (503), never let through, and nothing is cached.
//
// API keys (operator/api-keys.ts) are tokens for Runlet's audience only, not the API server's: a token that names
// one of `keyAudiences` in its `aud` is reviewed for those audiences (the TokenReview's spec.audiences), any other
// for the API server's own (none asked). A token reviewed for Runlet's audience — a key — speaks for its own
// namespace only: on another project's routes it is refused (403) whatever RBAC grants it there, as the run
// interface refuses it on another project's apps. Its `aud` is read unverified only to choose which audience to
// ask: the TokenReview verifies the token, for that audience.
// A token that is not shaped as a service-account token (a JWT) is refused without a review, and the reviews
// the rest cost are bounded (review-limiter.ts): past the bound the request is refused (503) unreviewed.
import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { RUNLET_GROUP } from '../crds/api-group.ts';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { CANCEL_RUNS, LIST_RUNS, type ManagementAccess } from './access.ts';
import { REVIEW_LIMITS, ReviewLimiter } from './review-limiter.ts';
import type { KubeApi } from '../kube/client.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';

export interface KubeAuthOptions {
  /** The operator's client: its credentials need `create` on tokenreviews and subjectaccessreviews. */
  api: KubeApi;
  /** The audiences of API keys (the run interface's, `runlet`): such a token is reviewed for them. Default none. */
  keyAudiences?: readonly string[];
  /** Told why a token was refused (the TokenReview's error); callers only learn that it was. */
  logger?: Pick<Logger, 'debug'>;
  /** How long an allowed token is admitted without asking again. Default 30 s. */
  allowedTtlMs?: number;
  /** How long a refused token (401 or 403) is refused without asking again. Default 5 s. */
  deniedTtlMs?: number;
  /** Decisions remembered at most (least recently used go first); as many known tokens. Default 10,000. */
  maxEntries?: number;
  /** Milliseconds on a monotonic clock for cache ages; tests move it. Default `performance.now()`. */
  now?: () => number;
}

export type ManagementAuthenticate = (request: FastifyRequest, projectId: string, access: ManagementAccess) => Promise<void>;

/** What the SubjectAccessReview asks to read apps and runs, the namespace being the project. */
export const RUNS_ACCESS = { ...LIST_RUNS, group: RUNLET_GROUP } as const;
/** What it asks to cancel a run (the ClusterRole runlet-runs-operator grants it). */
export const RUNS_CANCEL_ACCESS = { ...CANCEL_RUNS, group: RUNLET_GROUP } as const;

const TOKEN_REVIEWS_PATH = KubePath.of({ group: 'authentication.k8s.io', version: 'v1', resource: 'tokenreviews' });
const SUBJECT_ACCESS_REVIEWS_PATH = KubePath.of({ group: 'authorization.k8s.io', version: 'v1', resource: 'subjectaccessreviews' });
const REALM = 'runlet-management';
/** RFC 6750 §2.1: the characters of a bearer token (token68). */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
/** A JWS in compact form, as every service-account token is: three base64url parts, unpadded. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const BEARER_SCHEME = /^bearer$/i;
const RETRY_AFTER_SECONDS = '5';

/**
 * How long a token the cluster allowed stays known once its decision has expired (review-limiter.ts): longer
 * than `kubectl create token` issues tokens for by default.
 */
const KNOWN_TTL_MS = 2 * 60 * 60_000;

const DEFAULTS = { allowedTtlMs: 30_000, deniedTtlMs: 5_000, maxEntries: 10_000 } as const;

type Decision =
  | { outcome: 'allowed' }
  | { outcome: 'unauthenticated' }
  | { outcome: 'forbidden'; username: string }
  /** A Runlet-audience token (an API key) of another namespace than the project's. */
  | { outcome: 'other-namespace'; username: string; namespace: string | null };

interface UserInfo {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

interface TokenReview extends KubeObject {
  spec: { token: string; audiences?: string[] };
  status?: { authenticated?: boolean; user?: UserInfo; error?: string };
}

interface SubjectAccessReview extends KubeObject {
  spec: Omit<UserInfo, 'username'> & { user: string; resourceAttributes: ManagementAccess & { group: string; namespace: string } };
  status?: { allowed?: boolean; denied?: boolean };
}

/** The `authenticate` hook of the management API for cluster mode. */
export function kubeAuthenticator(options: KubeAuthOptions): ManagementAuthenticate {
  const { api, logger } = options;
  const keyAudiences = [...(options.keyAudiences ?? [])];
  const allowedTtlMs = options.allowedTtlMs ?? DEFAULTS.allowedTtlMs;
  const deniedTtlMs = options.deniedTtlMs ?? DEFAULTS.deniedTtlMs;
  const now = options.now;
  const maxEntries = options.maxEntries ?? DEFAULTS.maxEntries;
  // Read the clock on every lookup rather than reuse a reading for 1 ms (and arm a timer to forget it).
  const clock = { ttlResolution: 0, perf: now === undefined ? undefined : { now } };
  const decisions = new LRUCache<string, Decision>({ max: maxEntries, ttl: allowedTtlMs, ...clock });
  /** Cache keys the cluster allowed lately: their reviews are not held back by a flood of unknown tokens. */
  const known = new LRUCache<string, true>({ max: maxEntries, ttl: KNOWN_TTL_MS, ...clock });
  const limiter = new ReviewLimiter(REVIEW_LIMITS, now ?? (() => performance.now()));
  /** Reviews in flight by cache key, so a burst of requests with one new token is reviewed once. */
  const reviewing = new Map<string, Promise<Decision>>();

  async function review(token: string, namespace: string, access: ManagementAccess): Promise<Decision> {
    const forKeys = namesAnyAudience(token, keyAudiences);
    const tokenReview = await create<TokenReview>(api, TOKEN_REVIEWS_PATH, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: forKeys ? { token, audiences: keyAudiences } : { token },
    });
    const user = tokenReview.status?.user;
    if (tokenReview.status?.authenticated !== true || !user?.username) {
      logger?.debug({ reason: tokenReview.status?.error }, 'management API: bearer token not authenticated by TokenReview');
      return { outcome: 'unauthenticated' };
    }
    if (forKeys) {
      const own = serviceAccountNamespace(user.username);
      if (own !== namespace) return { outcome: 'other-namespace', username: user.username, namespace: own };
    }
    const accessReview = await create<SubjectAccessReview>(api, SUBJECT_ACCESS_REVIEWS_PATH, {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: user.username,
        uid: user.uid,
        groups: user.groups,
        extra: user.extra,
        resourceAttributes: { ...access, group: RUNLET_GROUP, namespace },
      },
    });
    const { allowed, denied } = accessReview.status ?? {};
    return allowed === true && denied !== true ? { outcome: 'allowed' } : { outcome: 'forbidden', username: user.username };
  }

  function reviewOnce(key: string, token: string, namespace: string, access: ManagementAccess): Promise<Decision> {
    const joined = reviewing.get(key);
    if (joined !== undefined) return joined;
    const admission = limiter.tryStart(known.has(key));
    if (!admission.admitted) throw tooManyReviews(admission.retryAfterSeconds);
    const pending = review(token, namespace, access)
      .then((decision) => {
        // Only answers are remembered: a failed review throws past this, and the next request asks again.
        decisions.set(key, decision, { ttl: decision.outcome === 'allowed' ? allowedTtlMs : deniedTtlMs });
        if (decision.outcome === 'allowed') known.set(key, true);
        return decision;
      })
      .finally(() => {
        reviewing.delete(key);
        limiter.finish();
      });
    reviewing.set(key, pending);
    return pending;
  }

  return async (request, projectId, access) => {
    const token = bearerToken(request.headers.authorization);
    const key = cacheKey(token, projectId, access);
    const decision = decisions.get(key) ?? (await reviewOnce(key, token, projectId, access));
    if (decision.outcome === 'unauthenticated') {
      throw invalidToken('The bearer token was not accepted by the cluster: expired, revoked, or not a token of this cluster');
    }
    if (decision.outcome === 'other-namespace') {
      const own = decision.namespace === null ? 'no namespace' : `namespace "${decision.namespace}"`;
      throw new ProblemError(
        Problems.forbidden,
        `User "${decision.username}" may not ${access.verb} ${access.resource} in project "${projectId}": its token is a Runlet API key of ${own}, and a key speaks for its own namespace only`,
        { headers: { 'www-authenticate': `Bearer realm="${REALM}", error="insufficient_scope"` } },
      );
    }
    if (decision.outcome === 'forbidden') {
      throw new ProblemError(
        Problems.forbidden,
        `User "${decision.username}" may not ${access.verb} ${access.resource} in project "${projectId}": it needs verb "${access.verb}" ` +
          `on resource "${access.resource}" of API group "${RUNLET_GROUP}" in namespace "${projectId}" (a Role or ` +
          `ClusterRole bound there${access.verb === 'cancel' ? ', such as runlet-runs-operator' : ''})`,
        { headers: { 'www-authenticate': `Bearer realm="${REALM}", error="insufficient_scope"` } },
      );
    }
  };
}

/** The token of an `Authorization: Bearer <token>` value; throws the 401 to answer when there is none. */
function bearerToken(authorization: string | undefined): string {
  const value = authorization?.trim() ?? '';
  const space = value.indexOf(' ');
  const scheme = space === -1 ? value : value.slice(0, space);
  // RFC 6750 §3.1: a request without credentials (or with another scheme) gets the bare challenge, no error code.
  if (value === '' || !BEARER_SCHEME.test(scheme)) {
    throw new ProblemError(
      Problems.unauthorized,
      'The management API requires an Authorization: Bearer <service-account token> header',
      { headers: { 'www-authenticate': `Bearer realm="${REALM}"` } },
    );
  }
  const token = space === -1 ? '' : value.slice(space + 1).trimStart();
  if (!TOKEN68.test(token)) throw invalidToken('The bearer token is empty or has characters a bearer token cannot have');
  // The management API takes service-account tokens, which are JWTs: no other shape is worth a review.
  if (!JWT_SHAPE.test(token)) throw invalidToken('The bearer token is not a service-account token (a JWT: three base64url parts joined by dots)');
  return token;
}

/** 401 with RFC 6750's `invalid_token`. `detail` must never contain the token. */
function invalidToken(detail: string): ProblemError {
  const challenge = `Bearer realm="${REALM}", error="invalid_token", error_description="${detail}"`;
  return new ProblemError(Problems.unauthorized, detail, { headers: { 'www-authenticate': challenge } });
}

/** 503: more tokens are waiting to be checked than the API server is asked about; nothing is cached. */
function tooManyReviews(retryAfterSeconds: number): ProblemError {
  return new ProblemError(
    Problems.authOverloaded,
    `Too many bearer tokens are being checked with the Kubernetes API server at once; retry in ${retryAfterSeconds} s`,
    { headers: { 'retry-after': String(retryAfterSeconds) } },
  );
}

/** Whether the token's (unverified) `aud` names one of `audiences`: which audience to review it for, nothing more. */
function namesAnyAudience(token: string, audiences: readonly string[]): boolean {
  if (audiences.length === 0) return false;
  try {
    const { aud } = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { aud?: unknown };
    return [aud].flat().some((audience) => typeof audience === 'string' && audiences.includes(audience));
  } catch {
    return false;
  }
}

/** `ns` of `system:serviceaccount:ns:name`; null for any other user. */
function serviceAccountNamespace(username: string): string | null {
  const parts = username.split(':');
  return parts.length === 4 && parts[0] === 'system' && parts[1] === 'serviceaccount' && parts[2] !== '' ? parts[2]! : null;
}

/** The token is hashed: the cache holds no usable credential. One decision per token, namespace and access. */
function cacheKey(token: string, namespace: string, access: ManagementAccess): string {
  return `${createHash('sha256').update(token).digest('base64url')} ${namespace} ${access.verb} ${access.resource}`;
}

/** POSTs a review; any failure to get an answer becomes the 503 that refuses the request. */
async function create<T extends KubeObject>(api: KubeApi, path: KubePath, review: T): Promise<T> {
  try {
    return await api.create(path, review);
  } catch (error) {
    const answer =
      error instanceof KubeApiError && error.status !== 0 ? `answered ${error.status} ${error.reason ?? ''}`.trimEnd() : 'did not answer';
    throw new ProblemError(
      Problems.authUnavailable,
      `The bearer token could not be checked: the Kubernetes API server ${answer} to a ${review.kind}; retry shortly`,
      { headers: { 'retry-after': RETRY_AFTER_SECONDS }, cause: error },
    );
  }
}
