// Who sends a batch of run records to the collector (results/collector.ts): the pod whose projected
// ServiceAccount token it is. The API server says whose token it is (TokenReview, asked for the collector's
// audience alone, so an API-server token or one minted for anything else is refused), and, for a token the
// kubelet projected into a pod, which pod (`authentication.kubernetes.io/pod-name` and `pod-uid` in the user's
// extra: the token is bound to that pod and dies with it). The operator's pod cache then says whether that pod is
// an App's, and which App's (its runlet.dev/app label): the collector takes only that App's runs, run by that pod.
//
// Before a token not seen lately is reviewed, it is checked offline (service-account-token-check.ts): signed by
// the cluster's service-account issuer, for the collector's audience, not expired, bound to a pod. A token that
// fails is refused there, so junk and forged tokens never take a TokenReview from real ones (while the issuer's
// keys cannot be read, TokenReview alone decides, as it does for what passes). The reviews are cached by a hash
// of the token (no usable credential is kept), for at most `ttlMs` and never past the token's own expiry; a
// refused token for `deniedTtlMs`. Reviews of tokens not seen before are bounded (management/review-limiter.ts),
// so even unchecked made-up tokens cannot have the API server asked as fast as they come. The pod is looked up
// on every batch, not cached with the token: a pod gone is refused at once.
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { APP_LABEL } from '../crds/api-group.ts';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import { REVIEW_LIMITS, ReviewLimiter, type ReviewLimits } from '../management/review-limiter.ts';
import type { CallerRefusal, CollectorCaller } from '../results/collector.ts';
import { RESULTS_TOKEN_AUDIENCE } from '../results/results-token.ts';
import { SIDECAR_SERVICE_ACCOUNT } from './render/names.ts';
import type { PodObject } from './runlog-verdict.ts';
import type { ServiceAccountTokenCheck } from './service-account-token-check.ts';

const TOKEN_REVIEWS_PATH = KubePath.of({ group: 'authentication.k8s.io', version: 'v1', resource: 'tokenreviews' });
/** A JWS in compact form, as every ServiceAccount token is: nothing else is worth a review. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const SERVICE_ACCOUNT_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;
export const POD_NAME_EXTRA = 'authentication.kubernetes.io/pod-name';
export const POD_UID_EXTRA = 'authentication.kubernetes.io/pod-uid';
/**
 * One namespace's part of the reviews (of tokens whose signature names it): half of them. A tenant may mint valid
 * tokens of its own pods as fast as the API server gives them; each is worth a review, and without a part of its
 * own it would take every review, and other namespaces' new and rotated tokens would be refused 503 meanwhile.
 */
const NAMESPACE_REVIEW_LIMITS: ReviewLimits = {
  maxInFlight: Math.ceil(REVIEW_LIMITS.maxInFlight / 2),
  perSecond: REVIEW_LIMITS.perSecond / 2,
  burst: REVIEW_LIMITS.burst / 2,
};

export interface ResultsCallersOptions {
  /** The operator's client: its credentials need `create` on tokenreviews. */
  api: KubeApi;
  /** The operator's pod cache (App pods: those labelled runlet.dev/app). */
  pod(namespace: string, name: string): PodObject | undefined;
  logger: Pick<Logger, 'debug'>;
  /** The offline check a token not reviewed lately passes before its review; absent, every such token is reviewed. */
  tokenCheck?: Pick<ServiceAccountTokenCheck, 'check'>;
  /** Longest a token the API server authenticated is taken without asking again. Default 60 s. */
  ttlMs?: number;
  /** How long a refused token is refused without asking again. Default 5 s. */
  deniedTtlMs?: number;
  /** Tokens remembered at most (least recently used go first). Default 10,000. */
  maxEntries?: number;
}

/** A pod's token as the API server reviewed it. */
interface PodToken {
  namespace: string;
  serviceAccount: string;
  podName: string;
  podUid: string;
}

type Review = { ok: true; token: PodToken } | { ok: false; refusal: CallerRefusal };

interface TokenReview extends KubeObject {
  spec: { token: string; audiences: string[] };
  status?: { authenticated?: boolean; audiences?: string[]; error?: string; user?: { username?: string; extra?: Record<string, string[]> } };
}

export class ResultsCallers {
  readonly #options: ResultsCallersOptions;
  readonly #ttlMs: number;
  readonly #deniedTtlMs: number;
  readonly #reviews: LRUCache<string, Review>;
  /** Tokens the cluster authenticated lately: their reviews again are not held back by a flood of unknown ones. */
  readonly #known: LRUCache<string, true>;
  readonly #reviewing = new Map<string, Promise<Review>>();
  readonly #limiter = new ReviewLimiter(REVIEW_LIMITS, () => performance.now());
  /** Each namespace's part of the reviews, by the namespace a verified token names (so only real namespaces). */
  readonly #namespaceLimiters = new LRUCache<string, ReviewLimiter>({ max: 10_000 });

  constructor(options: ResultsCallersOptions) {
    this.#options = options;
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#deniedTtlMs = options.deniedTtlMs ?? 5_000;
    const max = options.maxEntries ?? 10_000;
    this.#reviews = new LRUCache({ max, ttl: this.#ttlMs, ttlResolution: 0 });
    this.#known = new LRUCache({ max, ttl: 2 * 60 * 60_000, ttlResolution: 0 });
  }

  /** The collector's `identify`: the App pod this token is, or why it is not taken. */
  readonly identify = async (token: string): Promise<CollectorCaller | CallerRefusal> => {
    if (!JWT_SHAPE.test(token)) return { status: 401, detail: 'the bearer token is not a ServiceAccount token (a JWT)' };
    const key = createHash('sha256').update(token).digest('base64url');
    let review = this.#reviews.get(key);
    if (review === undefined) {
      // Not remembered: refused offline if it can be, so that only tokens worth it are reviewed (and remembered).
      const checked = await this.#options.tokenCheck?.check(token);
      if (checked?.outcome === 'refused') return { status: checked.status, detail: checked.detail, namespace: checked.namespace };
      review = await this.#reviewOnce(key, token, checked?.outcome === 'verified' ? checked.namespace : undefined);
    }
    if (!review.ok) return review.refusal;
    return this.#appPod(review.token);
  };

  /** The pod of a valid token, as the operator's caches know it: an App's, the very pod the token was bound to. */
  #appPod({ namespace, serviceAccount, podName, podUid }: PodToken): CollectorCaller | CallerRefusal {
    const pod = this.#options.pod(namespace, podName);
    // Not in the cache of App pods: no App's pod (or one the watch has not shown yet: the sender tries again).
    if (pod === undefined || pod.metadata?.uid !== podUid) {
      return { status: 403, namespace, detail: `pod ${namespace}/${podName} is not a pod of an App (or not known to the operator yet)` };
    }
    const appName = pod.metadata?.labels?.[APP_LABEL];
    if (appName === undefined || serviceAccount !== SIDECAR_SERVICE_ACCOUNT) {
      return { status: 403, namespace, detail: `pod ${namespace}/${podName} (service account ${serviceAccount}) is not the sidecar of an App` };
    }
    return { namespace, appName, podName };
  }

  /** `namespace`: the one the token's verified signature names, whose part of the reviews it takes; undefined when unchecked. */
  #reviewOnce(key: string, token: string, namespace: string | undefined): Promise<Review> {
    const joined = this.#reviewing.get(key);
    if (joined !== undefined) return joined;
    const known = this.#known.has(key);
    const ofNamespace = namespace === undefined ? undefined : this.#namespaceLimiter(namespace);
    const refusal = (admission: { retryAfterSeconds: number }, whose: string): Promise<Review> =>
      Promise.resolve({ ok: false, refusal: { status: 503, reason: 'review-rate', namespace, detail: `too many tokens ${whose} are being reviewed at once; retry in ${admission.retryAfterSeconds} s` } });
    const namespaceAdmission = ofNamespace?.tryStart(known);
    if (namespaceAdmission !== undefined && !namespaceAdmission.admitted) return refusal(namespaceAdmission, `of namespace ${namespace}`);
    const admission = this.#limiter.tryStart(known);
    if (!admission.admitted) {
      ofNamespace?.finish();
      return refusal(admission, 'of all namespaces');
    }
    const pending = this.#review(token)
      .then((review) => {
        // Only answers are remembered: a review that failed is asked again by the next batch.
        const ttl = review.ok ? Math.min(this.#ttlMs, expiresInMs(token)) : this.#deniedTtlMs;
        if (ttl > 0) this.#reviews.set(key, review, { ttl });
        if (review.ok) this.#known.set(key, true);
        return review;
      })
      .finally(() => {
        this.#reviewing.delete(key);
        this.#limiter.finish();
        ofNamespace?.finish();
      });
    this.#reviewing.set(key, pending);
    return pending;
  }

  #namespaceLimiter(namespace: string): ReviewLimiter {
    let limiter = this.#namespaceLimiters.get(namespace);
    if (limiter === undefined) this.#namespaceLimiters.set(namespace, (limiter = new ReviewLimiter(NAMESPACE_REVIEW_LIMITS, () => performance.now())));
    return limiter;
  }

  async #review(token: string): Promise<Review> {
    const review = await this.#options.api.create<TokenReview>(TOKEN_REVIEWS_PATH, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token, audiences: [RESULTS_TOKEN_AUDIENCE] },
    });
    const status = review.status ?? {};
    const refused = (detail: string): Review => ({ ok: false, refusal: { status: 401, detail } });
    if (status.authenticated !== true) {
      this.#options.logger.debug({ reason: status.error }, 'results collector: a token was not authenticated by TokenReview');
      return refused(`the bearer token is not a valid token for audience ${RESULTS_TOKEN_AUDIENCE}: expired, revoked, of a pod gone, or minted for another audience`);
    }
    // The API server answers the audiences the token is valid for among those asked: ours must be one.
    if (!(status.audiences ?? []).includes(RESULTS_TOKEN_AUDIENCE)) return refused(`the bearer token is not for audience ${RESULTS_TOKEN_AUDIENCE}`);
    const user = SERVICE_ACCOUNT_USER.exec(status.user?.username ?? '');
    if (user === null) return refused('the bearer token is not a ServiceAccount\'s');
    const podName = status.user?.extra?.[POD_NAME_EXTRA]?.[0];
    const podUid = status.user?.extra?.[POD_UID_EXTRA]?.[0];
    if (podName === undefined || podUid === undefined) {
      return { ok: false, refusal: { status: 403, namespace: user[1], detail: 'the bearer token is not bound to a pod: a batch is sent with the token the kubelet projects into the sidecar' } };
    }
    return { ok: true, token: { namespace: user[1]!, serviceAccount: user[2]!, podName, podUid } };
  }
}

/**
 * Milliseconds until the token's `exp`. The token was just authenticated, so its claims are the issuer's: read
 * only to cache it no longer than it lives. Without a readable `exp`, no bound beyond the cache's own.
 */
function expiresInMs(token: string): number {
  try {
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof claims.exp === 'number' ? claims.exp * 1000 - Date.now() : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}
