// The token issuer's public keys: its JSON Web Key Set, found at a configured URL or through OpenID discovery,
// fetched over HTTPS that may trust a private CA and present a bearer token (the in-cluster API server serves
// `/openid/v1/jwks` that way). jose's remote key set does the caching: refetch when older than the max age, and
// on an unknown `kid` at most once per cooldown, so rotated-in keys are picked up and junk kids cannot flood
// the issuer.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRemoteJWKSet, customFetch, errors } from 'jose';
import type { CryptoKey, FlattenedJWSInput, JWSHeaderParameters, RemoteJWKSet } from 'jose';
import { Agent, request } from 'undici';

/** A key set or discovery document larger than this is refused: real ones are a few KB. */
const MAX_DOCUMENT_BYTES = 1024 * 1024;
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

export interface IssuerKeySetOptions {
  /** Where the key set is; without it, discovered from `issuer`. */
  jwksUrl?: string;
  issuer?: string;
  caFile?: string;
  /** Sent as `Authorization: Bearer` to the configured origin only, never to a discovered other host. */
  tokenFile?: string;
  cooldownMs: number;
  maxAgeMs: number;
  timeoutMs: number;
}

/** The key set could not be fetched or read: the token may well be valid, so this is not the caller's fault. */
export class KeySetUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'KeySetUnavailableError';
  }
}

/** jose errors that are verdicts on the token (its kid and alg select no single key), not key-set outages. */
const TOKEN_KEY_ERRORS = [errors.JWKSNoMatchingKey, errors.JWKSMultipleMatchingKeys];

export class IssuerKeySet {
  readonly #options: IssuerKeySetOptions;
  readonly #agent: Agent;
  /** The origin the bearer token may be sent to: the one the operator configured. */
  readonly #trustedOrigin: string;
  #keySet: Promise<RemoteJWKSet> | null = null;

  constructor(options: IssuerKeySetOptions) {
    const configured = options.jwksUrl ?? options.issuer;
    if (!configured) throw new Error('an issuer key set needs jwksUrl or issuer');
    this.#options = options;
    this.#trustedOrigin = secureUrl(configured, options.jwksUrl ? 'jwksUrl' : 'issuer').origin;
    // A CA file replaces the default trust roots: in a pod it is exactly the cluster's CA.
    const ca = options.caFile ? readFileSync(options.caFile) : undefined;
    this.#agent = new Agent(ca ? { connect: { ca } } : {});
  }

  /** The verification key for a token's header, for jose's jwtVerify; throws KeySetUnavailableError on outages. */
  readonly getKey = async (header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<CryptoKey> => {
    try {
      return await (await this.#loadKeySet())(header, token);
    } catch (err) {
      throw asOutage(err);
    }
  };

  /**
   * Fetches the key set now and imports its keys, so that the first caller pays neither the discovery, the fetch
   * nor the import (a replica's first call otherwise does: 0.1–0.3 s of a cold start). Throws
   * KeySetUnavailableError as `getKey` would; the first token then tries again.
   */
  async prefetch(): Promise<void> {
    let keySet;
    try {
      keySet = await this.#loadKeySet();
      await keySet.reload();
    } catch (err) {
      throw asOutage(err);
    }
    for (const jwk of keySet.jwks()?.keys ?? []) {
      // A key without `alg` is imported by the first token that names it. One jose cannot use for verification
      // (an encryption key, an unsupported curve) is refused here as it would be for a token: nothing to import.
      if (jwk.alg === undefined) continue;
      await keySet({ alg: jwk.alg, kid: jwk.kid }).catch(() => undefined);
    }
  }

  close(): Promise<void> {
    return this.#agent.close();
  }

  /** A failed discovery is forgotten so that the next token tries again; concurrent tokens share one attempt. */
  #loadKeySet(): Promise<RemoteJWKSet> {
    return (this.#keySet ??= this.#createKeySet().catch((err: unknown) => {
      this.#keySet = null;
      throw err;
    }));
  }

  async #createKeySet(): Promise<RemoteJWKSet> {
    const jwksUrl = this.#options.jwksUrl ? secureUrl(this.#options.jwksUrl, 'jwksUrl') : await this.#discoverJwksUrl();
    return createRemoteJWKSet(jwksUrl, {
      cooldownDuration: this.#options.cooldownMs,
      cacheMaxAge: this.#options.maxAgeMs,
      timeoutDuration: this.#options.timeoutMs,
      [customFetch]: async (url, init) => {
        const body = await this.#get(url, Object.fromEntries(init.headers), init.signal);
        return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
      },
    });
  }

  async #discoverJwksUrl(): Promise<URL> {
    const issuer = this.#options.issuer!;
    const address = issuer.replace(/\/+$/, '') + '/.well-known/openid-configuration';
    const body = await this.#get(address, { accept: 'application/json' }, AbortSignal.timeout(this.#options.timeoutMs));
    let document: unknown;
    try {
      document = JSON.parse(body);
    } catch (err) {
      throw new KeySetUnavailableError(`the OpenID configuration at ${address} is not JSON`, { cause: err });
    }
    const { issuer: named, jwks_uri: jwksUri } = (typeof document === 'object' && document !== null ? document : {}) as Record<string, unknown>;
    // OpenID Connect Discovery §4.3: a document naming another issuer must not be used.
    if (named !== issuer) throw new KeySetUnavailableError(`the OpenID configuration at ${address} names issuer "${String(named)}", not "${issuer}"`);
    if (typeof jwksUri !== 'string') throw new KeySetUnavailableError(`the OpenID configuration at ${address} has no jwks_uri`);
    return secureUrl(jwksUri, `jwks_uri of ${address}`);
  }

  /** GET with the cluster CA and, to the configured origin, the bearer token; a non-200 answer is an outage. */
  async #get(url: string, headers: Record<string, string>, signal: AbortSignal): Promise<string> {
    const tokenFile = this.#options.tokenFile;
    if (tokenFile && new URL(url).origin === this.#trustedOrigin) {
      headers.authorization = `Bearer ${(await readFile(tokenFile, 'utf8')).trim()}`;
    }
    let answer;
    try {
      answer = await request(url, { dispatcher: this.#agent, method: 'GET', headers, signal });
    } catch (err) {
      throw new KeySetUnavailableError(`GET ${url} failed: ${(err as Error).message}`, { cause: err });
    }
    const body = await readLimited(answer.body, url);
    if (answer.statusCode !== 200) throw new KeySetUnavailableError(`GET ${url} answered ${answer.statusCode}, not 200`);
    return body;
  }
}

/** A verdict on the token stays one; anything else means the keys could not be had. */
function asOutage(err: unknown): Error {
  if (TOKEN_KEY_ERRORS.some((type) => err instanceof type) || err instanceof KeySetUnavailableError) return err as Error;
  return new KeySetUnavailableError(`the issuer's key set is unusable: ${(err as Error).message}`, { cause: err });
}

async function readLimited(body: AsyncIterable<Buffer> & { destroy(): unknown }, url: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      size += chunk.length;
      if (size > MAX_DOCUMENT_BYTES) {
        body.destroy();
        throw new KeySetUnavailableError(`GET ${url} answered more than ${MAX_DOCUMENT_BYTES} bytes`);
      }
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof KeySetUnavailableError) throw err;
    throw new KeySetUnavailableError(`GET ${url} failed mid-answer: ${(err as Error).message}`, { cause: err });
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Keys fetched over plain HTTP could be swapped in transit, so only loopback may skip TLS. */
function secureUrl(value: string, what: string): URL {
  const url = URL.parse(value);
  if (url === null) throw new Error(`${what} is not a URL: "${value}"`);
  if (url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname))) return url;
  throw new Error(`${what} must be an https URL (plain http only on loopback), got "${value}"`);
}
