// Verifying one token: its `alg` picks the key source — the issuer's key set for RS256 / ES256 / EdDSA, the
// project's shared key for HS256, nothing else — then jose checks signature, `exp`, audience and issuer, and
// every failure becomes a 401 that says which check failed without echoing the token.
import { decodeJwt, decodeProtectedHeader, errors, jwtVerify } from 'jose';
import type { JWTPayload, JWTVerifyOptions } from 'jose';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import { invalidToken } from './bearer.ts';
import { projectOfClaims } from './claims.ts';
import { JWKS_ALGORITHMS, SHARED_KEY_ALGORITHM } from './config.ts';
import type { IssuerKeySet } from './jwks.ts';
import { KeySetUnavailableError } from './jwks.ts';
import type { VerifiedToken } from './token-cache.ts';

/**
 * 503 when the issuer's keys cannot be fetched: the token may be valid, so the caller should retry rather than
 * get a new token.
 */
export const keySetUnavailable = Problems.authKeysUnavailable;

const ACCEPTED_ALGORITHMS = [...JWKS_ALGORITHMS, SHARED_KEY_ALGORITHM].join(', ');

export interface TokenVerifierOptions {
  audience: string | readonly string[];
  /** Required `iss` of key-set tokens. */
  issuer: string | undefined;
  keySet: IssuerKeySet | null;
  sharedKeys: ReadonlyMap<string, Uint8Array>;
  clockToleranceSeconds: number;
}

export class TokenVerifier {
  readonly #options: TokenVerifierOptions;
  readonly #audience: string | string[];

  constructor(options: TokenVerifierOptions) {
    this.#options = options;
    this.#audience = typeof options.audience === 'string' ? options.audience : [...options.audience];
  }

  /** The token's project and expiry, once it verifies at `nowMs`; otherwise throws the ProblemError to answer. */
  async verify(token: string, nowMs: number): Promise<VerifiedToken> {
    let claims: JWTPayload;
    try {
      claims = await this.#verifiedClaims(token, nowMs);
    } catch (err) {
      throw this.#problemOf(err);
    }
    const projectId = projectOfClaims(claims);
    if (projectId === null) {
      throw invalidToken('The token names no project: it needs a project_id claim, or to be a Kubernetes service-account token');
    }
    // `exp` is present: jwtVerify was told to require it.
    return { projectId, expiresAtMs: claims.exp! * 1000 };
  }

  async #verifiedClaims(token: string, nowMs: number): Promise<JWTPayload> {
    const checks: JWTVerifyOptions = {
      audience: this.#audience,
      requiredClaims: ['exp'],
      clockTolerance: this.#options.clockToleranceSeconds,
      currentDate: new Date(nowMs),
    };
    const alg = unverifiedAlgorithm(token);
    if (alg === SHARED_KEY_ALGORITHM) {
      const key = this.#sharedKeyFor(token);
      return (await jwtVerify(token, key, { ...checks, algorithms: [SHARED_KEY_ALGORITHM] })).payload;
    }
    if ((JWKS_ALGORITHMS as readonly string[]).includes(alg)) {
      const { keySet, issuer } = this.#options;
      if (keySet === null) throw invalidToken(`${alg} tokens are not accepted here: no token issuer is configured, only shared keys`);
      return (await jwtVerify(token, keySet.getKey, { ...checks, issuer, algorithms: [...JWKS_ALGORITHMS] })).payload;
    }
    throw invalidToken(`The token's algorithm (alg) is not accepted; accepted: ${ACCEPTED_ALGORITHMS}`);
  }

  /** The project's shared key, chosen by the claimed project; the signature then proves the claim. */
  #sharedKeyFor(token: string): Uint8Array {
    if (this.#options.sharedKeys.size === 0) {
      throw invalidToken(`${SHARED_KEY_ALGORITHM} tokens are not accepted here: no shared key is configured, only the token issuer`);
    }
    let claimed: string | null;
    try {
      claimed = projectOfClaims(decodeJwt(token));
    } catch (err) {
      throw invalidToken(`The token's claims cannot be read: ${(err as Error).message}`, err);
    }
    const key = claimed === null ? undefined : this.#options.sharedKeys.get(claimed);
    if (key === undefined) throw invalidToken(`No shared key is configured for the token's project`);
    return key;
  }

  #problemOf(err: unknown): unknown {
    if (err instanceof ProblemError) return err;
    if (err instanceof KeySetUnavailableError) {
      return new ProblemError(keySetUnavailable, "The token issuer's signing keys could not be fetched; retry shortly", {
        headers: { 'retry-after': '5' },
        cause: err,
      });
    }
    if (err instanceof errors.JWTExpired) {
      const exp = err.payload.exp;
      return invalidToken(typeof exp === 'number' ? `The token expired at ${new Date(exp * 1000).toISOString()}` : 'The token expired', err);
    }
    if (err instanceof errors.JWTClaimValidationFailed) return invalidToken(this.#claimFailure(err), err);
    if (err instanceof errors.JWSSignatureVerificationFailed) return invalidToken("The token's signature does not verify", err);
    if (err instanceof errors.JWKSNoMatchingKey) return invalidToken("No key of the token issuer matches the token's kid and alg", err);
    if (err instanceof errors.JWKSMultipleMatchingKeys) return invalidToken('Several keys of the token issuer match the token; it must name one (kid)', err);
    // Malformed tokens: bad base64url or JSON, a header jose refuses. jose's messages name the part, not its content.
    if (err instanceof errors.JOSEError) return invalidToken(`The token is malformed: ${err.message}`, err);
    return err;
  }

  #claimFailure(err: InstanceType<typeof errors.JWTClaimValidationFailed>): string {
    if (err.claim === 'exp' && err.reason === 'missing') return 'The token has no exp claim; tokens must expire';
    if (err.claim === 'aud') return `The token's audience is not ${[this.#audience].flat().map((value) => `"${value}"`).join(' or ')}`;
    if (err.claim === 'iss') return `The token's issuer is not "${this.#options.issuer}"`;
    if (err.claim === 'nbf') return 'The token is not valid yet (nbf is in the future)';
    return `The token's claims are invalid: ${err.message}`;
  }
}

/** The header's `alg`, read before any key is chosen (and so before anything is verified). */
function unverifiedAlgorithm(token: string): string {
  let alg: unknown;
  try {
    alg = decodeProtectedHeader(token).alg;
  } catch (err) {
    throw invalidToken("The token's header is not base64url-encoded JSON", err);
  }
  if (typeof alg !== 'string') throw invalidToken("The token's header has no alg");
  return alg;
}
