// Who may call the run interface: a bearer JWT, verified once and then remembered until it expires, whose
// project is the app's. The repeat caller's path is one cache lookup, synchronous and allocation-free; only a
// token not seen yet goes through signature verification.
import type { Logger } from 'pino';
import { ProblemError } from '../../crds/problem.ts';
import { bearerToken, otherProject } from './bearer.ts';
import type { RunAuthConfig } from './config.ts';
import { IssuerKeySet } from './jwks.ts';
import { TokenCache } from './token-cache.ts';
import type { VerifiedToken } from './token-cache.ts';
import { TokenVerifier, keySetUnavailable, type VerifiedClaims } from './verify.ts';
import { invalidToken } from './bearer.ts';
import { API_KEY_RECHECK_MS, type ServiceAccountCheck } from './service-account-check.ts';

export interface RunAuthenticatorOptions {
  /**
   * One clock in milliseconds for both token times and cache ages, replacing the defaults below; tests move it to
   * expire cached tokens.
   */
  now?: () => number;
  /** Told why the issuer's keys could not be fetched; callers only learn that they could not. */
  logger?: Pick<Logger, 'warn'>;
}

/** Counters since start, e.g. for metrics. */
export interface RunAuthStats {
  /** Requests admitted from the cache, without verification. */
  cacheHits: number;
  /** Tokens put through signature verification (concurrent requests with one new token count once). */
  verifications: number;
  /** Requests refused (401 / 403 / 503). */
  rejections: number;
}

const DEFAULTS = {
  jwksCooldownMs: 30_000,
  jwksMaxAgeMs: 10 * 60_000,
  jwksTimeoutMs: 5_000,
  clockToleranceSeconds: 5,
  cacheMaxEntries: 10_000,
  cacheMaxChars: 16 * 1024 * 1024,
  cacheMaxAgeMs: 10 * 60_000,
} as const;

export class RunAuthenticator {
  /** Epoch ms, for `exp` and `nbf`: read only when verifying. */
  readonly #wallNow: () => number;
  /**
   * Ms on a monotonic clock, for cache expiry: read on every call, and `performance.now()` (unlike `Date.now()`,
   * which boxes its result) allocates nothing; nor does it jump when the wall clock is stepped.
   */
  readonly #monotonicNow: () => number;
  readonly #logger: Pick<Logger, 'warn'> | undefined;
  readonly #keySet: IssuerKeySet | null;
  readonly #verifier: TokenVerifier;
  readonly #cache: TokenCache;
  readonly #cacheMaxAgeMs: number;
  /** Verifications in flight by credential, so a burst of requests with one new token verifies it once. */
  readonly #verifying = new Map<string, Promise<VerifiedToken>>();
  #serviceAccountCheck: ServiceAccountCheck | null = null;
  #cacheHits = 0;
  #verifications = 0;
  #rejections = 0;

  constructor(config: RunAuthConfig, options: RunAuthenticatorOptions = {}) {
    const hasIssuer = config.jwksUrl !== undefined || config.issuer !== undefined;
    const sharedKeys = new Map(Object.entries(config.hs256Keys ?? {}));
    if (!hasIssuer && sharedKeys.size === 0) throw new Error('run-interface auth needs a token issuer (jwksUrl or issuer) or a shared key (hs256Keys)');
    this.#wallNow = options.now ?? (() => Date.now());
    this.#monotonicNow = options.now ?? (() => performance.now());
    this.#logger = options.logger;
    this.#keySet = hasIssuer
      ? new IssuerKeySet({
          jwksUrl: config.jwksUrl,
          issuer: config.issuer,
          caFile: config.jwksCaFile,
          tokenFile: config.jwksTokenFile,
          cooldownMs: config.jwksCooldownMs ?? DEFAULTS.jwksCooldownMs,
          maxAgeMs: config.jwksMaxAgeMs ?? DEFAULTS.jwksMaxAgeMs,
          timeoutMs: config.jwksTimeoutMs ?? DEFAULTS.jwksTimeoutMs,
        })
      : null;
    this.#verifier = new TokenVerifier({
      audience: config.audience,
      issuer: config.issuer,
      keySet: this.#keySet,
      sharedKeys,
      clockToleranceSeconds: config.clockToleranceSeconds ?? DEFAULTS.clockToleranceSeconds,
      revokedTokenIds: config.revokedTokenIds,
    });
    this.#cache = new TokenCache({
      maxEntries: config.cacheMaxEntries ?? DEFAULTS.cacheMaxEntries,
      maxChars: config.cacheMaxChars ?? DEFAULTS.cacheMaxChars,
    });
    this.#cacheMaxAgeMs = config.cacheMaxAgeMs ?? DEFAULTS.cacheMaxAgeMs;
  }

  /**
   * Admits a call to an app of `projectId`, or throws a ProblemError: 401 `unauthorized` (with its
   * `WWW-Authenticate` challenge), 403 `forbidden` for another project's token, 503 when the issuer's keys are
   * unreachable. Returns nothing — synchronously — for a token verified before; a promise otherwise. Call it as
   * `const pending = auth.authenticate(header, projectId); if (pending) await pending;`.
   */
  authenticate(authorization: string | undefined, projectId: string): Promise<void> | void {
    if (authorization !== undefined) {
      const cached = this.#cache.get(authorization, this.#monotonicNow());
      if (cached !== undefined && cached.projectId === projectId && cached.keyUnchecked !== true) {
        this.#cacheHits++;
        return;
      }
    }
    // No closure may be created in this method: one capturing `this` would allocate a context on every call.
    return this.#authenticateAnew(authorization, projectId);
  }

  get stats(): RunAuthStats {
    return { cacheHits: this.#cacheHits, verifications: this.#verifications, rejections: this.#rejections };
  }

  /**
   * Fetches the issuer's keys ahead of the first caller; never throws. Without it a new replica's first call
   * — on a start from zero, the call that waited for it — pays for the fetch. A failure is logged, and the
   * first token tries again, as it would have anyway.
   */
  async prefetchKeys(): Promise<void> {
    try {
      await this.#keySet?.prefetch();
    } catch (err) {
      this.#logger?.warn({ err }, "could not fetch the token issuer's key set ahead of the first call; the first call will try again");
    }
  }

  /**
   * In a cluster: an API key's token (its ServiceAccount `runlet-key-…`) is admitted only while `check` finds its
   * ServiceAccount, and asked about again at least every minute, so that a revoked key stops working within one.
   */
  checkApiKeysWith(check: ServiceAccountCheck): void {
    this.#serviceAccountCheck = check;
  }

  /** Drops every verified token, so that each is verified again: a token just revoked is refused at once. */
  forgetVerified(): void {
    this.#cache.clear();
  }

  /** Releases the key-set connections. */
  async close(): Promise<void> {
    await this.#keySet?.close();
  }

  async #authenticateAnew(authorization: string | undefined, projectId: string): Promise<void> {
    try {
      const token = bearerToken(authorization);
      const credential = authorization!;
      const cached = this.#cache.get(credential, this.#monotonicNow());
      const usable = cached !== undefined && !(cached.keyUnchecked === true && cached.projectId === projectId);
      const verified = usable ? cached : await this.#verifyOnce(credential, token, projectId);
      if (verified.projectId !== projectId) throw otherProject(verified.projectId, projectId);
    } catch (err) {
      this.#rejections++;
      throw err;
    }
  }

  #verifyOnce(credential: string, token: string, projectId: string): Promise<VerifiedToken> {
    // Per project too: a verification refused as another project's must not answer a call to the token's own.
    const key = `${projectId} ${credential}`;
    let pending = this.#verifying.get(key);
    if (pending === undefined) {
      pending = this.#verify(credential, token, projectId).finally(() => this.#verifying.delete(key));
      this.#verifying.set(key, pending);
    }
    return pending;
  }

  async #verify(credential: string, token: string, projectId: string): Promise<VerifiedToken> {
    this.#verifications++;
    const verifiedAtWall = this.#wallNow();
    const verifiedAtMonotonic = this.#monotonicNow();
    let verified: VerifiedClaims;
    try {
      verified = await this.#verifier.verify(token, verifiedAtWall);
    } catch (err) {
      if (err instanceof ProblemError && err.spec === keySetUnavailable) {
        this.#logger?.warn({ err: err.cause }, 'run auth: the token issuer key set is unavailable');
      }
      throw err;
    }
    const account = verified.keyAccount;
    const checksKey = account !== null && this.#serviceAccountCheck !== null;
    // Another namespace's token is refused before its API key is looked up: the look-up is an API server call this
    // replica may not make there (503 where the answer is 403), one per call of a hostile tenant.
    if (checksKey && verified.projectId !== projectId) {
      const refusedForMs = Math.min(verified.expiresAtMs - verifiedAtWall, API_KEY_RECHECK_MS);
      this.#cache.set(credential, { projectId: verified.projectId, expiresAtMs: verifiedAtMonotonic + refusedForMs, keyUnchecked: true }, verifiedAtMonotonic);
      return verified;
    }
    if (checksKey && !(await this.#serviceAccountCheck!(account!))) {
      throw invalidToken(`The token's API key was revoked: its ServiceAccount ${account!.namespace}/${account!.name} no longer exists`);
    }
    // The token's remaining lifetime, moved onto the monotonic clock; capped so that a long-lived token is
    // re-verified after the max age, and one whose key left the key set stops being admitted; an API key's
    // token, whose key may be revoked, after a minute.
    const maxAgeMs = checksKey ? Math.min(this.#cacheMaxAgeMs, API_KEY_RECHECK_MS) : this.#cacheMaxAgeMs;
    const lifetimeMs = Math.min(verified.expiresAtMs - verifiedAtWall, maxAgeMs);
    this.#cache.set(credential, { projectId: verified.projectId, expiresAtMs: verifiedAtMonotonic + lifetimeMs }, verifiedAtMonotonic);
    return verified;
  }
}
