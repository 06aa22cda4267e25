// A pod's token for the collector, checked offline before the API server is asked about it: its signature
// against the API server's service-account issuer keys (ServiceAccountIssuerDiscovery: the issuer from
// `/.well-known/openid-configuration`, the keys from `/openid/v1/jwks`, read through the operator's own client;
// Kubernetes binds `system:service-account-issuer-discovery` to every ServiceAccount from 1.20), its issuer, its
// audience (the collector's alone), its expiry, and that it is bound to a pod. Only a token that passes is worth
// a TokenReview (operator/results-callers.ts), which stays the authority: it also knows whether the pod and its
// ServiceAccount still exist. So a flood of made-up, forged, expired or other-audience tokens costs a signature
// check each, and never takes a review from the pods' real tokens.
//
// The keys are cached: read again after `maxAgeMs`, and on a token naming a key not among them (a rotation) at
// most once per `refreshCooldownMs`. While they cannot be read (discovery off, the role unbound, the API server
// down), keys read before still check tokens that name them, and every other token is left to TokenReview alone,
// as before this check (never refused for it): logged once, and counted (`unchecked`).
import { createLocalJWKSet, errors, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import type { Logger } from 'pino';
import type { KubeApi } from '../kube/client.ts';
import { KubePath } from '../kube/paths.ts';

/** What the offline check says of a token. */
export type TokenCheck =
  | { outcome: 'verified'; namespace: string }
  | { outcome: 'refused'; status: 401 | 403; detail: string; namespace?: string }
  /** The issuer's keys could not be had: TokenReview alone decides. */
  | { outcome: 'unchecked' };

export interface ServiceAccountTokenCheckOptions {
  /** The operator's client: the discovery and key-set GETs go to its API server, with its credentials. */
  api: Pick<KubeApi, 'request'>;
  /** The audience a token must carry: the collector's. */
  audience: string;
  logger: Pick<Logger, 'warn' | 'info'>;
  /** Told of every outcome, for the metric. */
  onOutcome?(outcome: TokenCheck['outcome']): void;
  /** Keys older than this are read again before use. Default 10 min. */
  maxAgeMs?: number;
  /** Reads of the keys (on an unknown kid, or after a failure) at most once per this. Default 30 s. */
  refreshCooldownMs?: number;
  /** Leeway for `exp` and `nbf` against clock skew with the API server. Default 5 s. */
  clockToleranceSeconds?: number;
}

/** Bound on one read of the discovery document or the keys: a hung API server holds no batch longer. */
const READ_TIMEOUT_MS = 5_000;
/** Kubernetes signs service-account tokens RS256 or ES256 (its key's kind); never a shared secret, never none. */
const ALGORITHMS = ['RS256', 'ES256'];

interface IssuerKeys {
  issuer: string;
  keySet: ReturnType<typeof createLocalJWKSet>;
  readAt: number;
}

export class ServiceAccountTokenCheck {
  readonly #options: ServiceAccountTokenCheckOptions;
  readonly #maxAgeMs: number;
  readonly #cooldownMs: number;
  #keys: IssuerKeys | undefined;
  /** Whether the last read of the keys failed: then a token naming a key not read before is left unchecked. */
  #unavailable = false;
  #lastReadAt = Number.NEGATIVE_INFINITY;
  #reading: Promise<void> | undefined;

  constructor(options: ServiceAccountTokenCheckOptions) {
    this.#options = options;
    this.#maxAgeMs = options.maxAgeMs ?? 10 * 60_000;
    this.#cooldownMs = options.refreshCooldownMs ?? 30_000;
  }

  async check(token: string): Promise<TokenCheck> {
    const result = await this.#check(token);
    this.#options.onOutcome?.(result.outcome);
    return result;
  }

  async #check(token: string): Promise<TokenCheck> {
    if (this.#keys === undefined || performance.now() - this.#keys.readAt > this.#maxAgeMs) await this.#readKeys();
    // Keys read before and not readable now still tell a forgery: only a token naming none of them is left unchecked.
    const keys = this.#keys;
    if (keys === undefined) return { outcome: 'unchecked' };
    try {
      return this.#verdict(await this.#verify(token, keys));
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) return refusal(error, this.#options.audience);
      // A key not among those read: perhaps one rotated in since. Read again, at most once per cooldown.
      const readNow = await this.#readKeys();
      if (this.#unavailable) return { outcome: 'unchecked' };
      if (!readNow || this.#keys === keys) return refusal(error, this.#options.audience);
      try {
        return this.#verdict(await this.#verify(token, this.#keys!));
      } catch (again) {
        return refusal(again, this.#options.audience);
      }
    }
  }

  #verify(token: string, keys: IssuerKeys): Promise<JWTPayload> {
    return jwtVerify(token, keys.keySet, {
      issuer: keys.issuer,
      audience: this.#options.audience,
      algorithms: ALGORITHMS,
      requiredClaims: ['exp'],
      clockTolerance: this.#options.clockToleranceSeconds ?? 5,
    }).then(({ payload }) => payload);
  }

  /** A verified token's verdict: bound to a pod, as only the kubelet's projected tokens are (and `kubectl create token --bound-object-kind Pod`). */
  #verdict(claims: JWTPayload): TokenCheck {
    const kubernetes = (claims['kubernetes.io'] ?? {}) as { namespace?: unknown; pod?: { name?: unknown; uid?: unknown } };
    const namespace = typeof kubernetes.namespace === 'string' ? kubernetes.namespace : undefined;
    if (namespace === undefined) return { outcome: 'refused', status: 401, detail: 'the bearer token is not a ServiceAccount\'s (no kubernetes.io namespace)' };
    if (typeof kubernetes.pod?.name !== 'string' || typeof kubernetes.pod.uid !== 'string') {
      return { outcome: 'refused', status: 403, namespace, detail: 'the bearer token is not bound to a pod: a batch is sent with the token the kubelet projects into the sidecar' };
    }
    return { outcome: 'verified', namespace };
  }

  /** Reads the issuer and its keys, once per cooldown (concurrent callers share one read); whether it read them now. */
  async #readKeys(): Promise<boolean> {
    if (this.#reading !== undefined) {
      await this.#reading;
      return true;
    }
    if (performance.now() - this.#lastReadAt < this.#cooldownMs) return false;
    this.#lastReadAt = performance.now();
    this.#reading = this.#fetchKeys().finally(() => {
      this.#reading = undefined;
    });
    await this.#reading;
    return true;
  }

  async #fetchKeys(): Promise<void> {
    const { api, logger } = this.#options;
    try {
      const discovery = (await api.request('GET', KubePath.openIdConfiguration, { timeoutMs: READ_TIMEOUT_MS })) as { issuer?: unknown } | undefined;
      if (typeof discovery?.issuer !== 'string' || discovery.issuer === '') throw new Error(`${KubePath.openIdConfiguration.toString()} names no issuer`);
      const keySet = (await api.request('GET', KubePath.openIdKeySet, { timeoutMs: READ_TIMEOUT_MS })) as JSONWebKeySet | undefined;
      if (!Array.isArray(keySet?.keys) || keySet.keys.length === 0) throw new Error(`${KubePath.openIdKeySet.toString()} holds no keys`);
      this.#keys = { issuer: discovery.issuer, keySet: createLocalJWKSet(keySet), readAt: performance.now() };
      if (this.#unavailable) logger.info({ issuer: discovery.issuer }, 'results collector: the service-account issuer\'s keys are read again; tokens are checked offline before a TokenReview');
      this.#unavailable = false;
    } catch (error) {
      if (!this.#unavailable) {
        logger.warn(
          { err: error },
          'results collector: the service-account issuer\'s keys (/.well-known/openid-configuration, /openid/v1/jwks) cannot be read: every token is left to TokenReview alone until they can (runlet_results_token_checks_total{outcome="unchecked"})',
        );
      }
      this.#unavailable = true;
    }
  }
}

/** Why a token that did not verify is refused: a 401, saying which check failed, never echoing the token. */
function refusal(error: unknown, audience: string): TokenCheck {
  const detail = (what: string): TokenCheck => ({ outcome: 'refused', status: 401, detail: `the bearer token is not a valid token for audience ${audience}: ${what}` });
  if (error instanceof errors.JWTExpired) return detail('it has expired');
  if (error instanceof errors.JWTClaimValidationFailed) return detail(`its ${error.claim} claim is not what the collector takes`);
  if (error instanceof errors.JWSSignatureVerificationFailed) return detail('its signature does not verify with the cluster\'s service-account keys');
  if (error instanceof errors.JWKSNoMatchingKey) return detail('no service-account key of the cluster matches its kid');
  if (error instanceof errors.JOSEError) return detail(`it is malformed (${error.code})`);
  throw error;
}
