import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, UnsecuredJWT, base64url, exportJWK, exportSPKI, generateKeyPair } from 'jose';
import type { CryptoKey, JWK, JWTPayload } from 'jose';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ProblemError } from '../../crds/problem.ts';
import { RunAuthenticator } from './authenticator.ts';
import type { RunAuthenticatorOptions } from './authenticator.ts';
import type { RunAuthConfig } from './config.ts';
import { signLocalToken } from './local-key.ts';
import { hasOpenssl } from '../../test/support/openssl.ts';

const PROJECT = 'team-a';
const SHARED_KEY = 'k'.repeat(40);

interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256' | 'EdDSA';
  privateKey: CryptoKey;
  publicJwk: JWK;
  publicKey: CryptoKey;
}

async function signingKey(kid: string, alg: SigningKey['alg'] = 'RS256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, publicKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/** An OpenID issuer on 127.0.0.1: a discovery document and a key set, counting what it serves. */
class TestIssuer {
  discoveryFetches = 0;
  jwksFetches = 0;
  /** The keys the key set currently lists (rotation = assigning a new list). */
  keys: SigningKey[] = [];
  jwksStatus = 200;
  /** When set, the key set answers 401 unless this bearer token comes with the request. */
  requiredToken: string | null = null;
  /** The `issuer` the discovery document names; default this issuer's own URL. */
  namedIssuer: string | null = null;
  readonly #server: Server;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<TestIssuer> {
    const issuer: TestIssuer = new TestIssuer(
      createServer((request, response) => {
        if (request.url === '/.well-known/openid-configuration') {
          issuer.discoveryFetches++;
          response.setHeader('content-type', 'application/json');
          response.end(JSON.stringify({ issuer: issuer.namedIssuer ?? issuer.url, jwks_uri: `${issuer.url}/openid/v1/jwks` }));
          return;
        }
        if (request.url === '/openid/v1/jwks') {
          issuer.jwksFetches++;
          if (issuer.requiredToken !== null && request.headers.authorization !== `Bearer ${issuer.requiredToken}`) {
            response.writeHead(401).end();
            return;
          }
          response.writeHead(issuer.jwksStatus, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ keys: issuer.keys.map((key) => key.publicJwk) }));
          return;
        }
        response.writeHead(404).end();
      }),
    );
    await new Promise<void>((resolve) => issuer.#server.listen(0, '127.0.0.1', resolve));
    return issuer;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

interface TokenOptions {
  key?: SigningKey;
  claims?: JWTPayload;
  audience?: string;
  issuer?: string | null;
  /** Epoch seconds; default an hour from now (the real clock, or the fake one where a test fakes Date). */
  exp?: number | null;
}

let issuer: TestIssuer;
let primary: SigningKey;
const authenticators: RunAuthenticator[] = [];

beforeAll(async () => {
  issuer = await TestIssuer.start();
  primary = await signingKey('primary');
  issuer.keys = [primary];
});
afterAll(() => issuer.close());
afterEach(async () => {
  vi.useRealTimers();
  issuer.discoveryFetches = 0;
  issuer.jwksFetches = 0;
  issuer.keys = [primary];
  issuer.jwksStatus = 200;
  issuer.requiredToken = null;
  issuer.namedIssuer = null;
  await Promise.all(authenticators.splice(0).map((auth) => auth.close()));
});

function authenticator(config: Partial<RunAuthConfig> = {}, options: RunAuthenticatorOptions = {}): RunAuthenticator {
  const auth = new RunAuthenticator({ audience: 'runlet', issuer: issuer.url, ...config }, options);
  authenticators.push(auth);
  return auth;
}

async function token(options: TokenOptions = {}): Promise<string> {
  const key = options.key ?? primary;
  const jwt = new SignJWT({ project_id: PROJECT, ...options.claims })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
    .setAudience(options.audience ?? 'runlet')
    .setIssuedAt();
  if (options.issuer !== null) jwt.setIssuer(options.issuer ?? issuer.url);
  if (options.exp !== null) jwt.setExpirationTime(options.exp ?? Math.floor(Date.now() / 1000) + 3600);
  return jwt.sign(key.privateKey);
}

async function refusal(outcome: Promise<void> | void): Promise<ProblemError> {
  try {
    await outcome;
  } catch (err) {
    expect(err).toBeInstanceOf(ProblemError);
    return err as ProblemError;
  }
  throw new Error('expected the call to be refused');
}

/** Asserts an RFC 6750 invalid_token answer and returns its detail. */
async function invalidTokenDetail(outcome: Promise<void> | void): Promise<string> {
  const problem = await refusal(outcome);
  expect(problem.status).toBe(401);
  expect(problem.spec.code).toBe('unauthorized');
  expect(problem.headers?.['www-authenticate']).toMatch(/^Bearer realm="runlet", error="invalid_token", error_description="[^"\\]+"$/);
  return problem.detail;
}

describe('RunAuthenticator with a token issuer (JWKS)', () => {
  it('admits a valid token, discovering the key set from the issuer', async () => {
    const auth = authenticator();
    await auth.authenticate(`Bearer ${await token()}`, PROJECT);
    expect(issuer.discoveryFetches).toBe(1);
    expect(issuer.jwksFetches).toBe(1);
    expect(auth.stats).toEqual({ cacheHits: 0, verifications: 1, rejections: 0 });
  });

  it('admits a repeat caller from the cache: synchronously, without fetching or verifying again', async () => {
    const auth = authenticator();
    const header = `Bearer ${await token()}`;
    await auth.authenticate(header, PROJECT);
    for (let call = 0; call < 3; call++) expect(auth.authenticate(header, PROJECT)).toBeUndefined();
    expect(issuer.jwksFetches).toBe(1);
    expect(auth.stats).toEqual({ cacheHits: 3, verifications: 1, rejections: 0 });
  });

  it('verifies a new token once for a burst of concurrent calls', async () => {
    const auth = authenticator();
    const header = `Bearer ${await token()}`;
    await Promise.all(Array.from({ length: 8 }, () => auth.authenticate(header, PROJECT)));
    expect(auth.stats.verifications).toBe(1);
    expect(issuer.jwksFetches).toBe(1);
  });

  it('accepts ES256 and EdDSA keys of the key set', async () => {
    const ec = await signingKey('ec', 'ES256');
    const ed = await signingKey('ed', 'EdDSA');
    issuer.keys = [primary, ec, ed];
    const auth = authenticator();
    await auth.authenticate(`Bearer ${await token({ key: ec })}`, PROJECT);
    await auth.authenticate(`Bearer ${await token({ key: ed })}`, PROJECT);
  });

  it('refuses an expired token with 401 invalid_token', async () => {
    const auth = authenticator();
    const detail = await invalidTokenDetail(auth.authenticate(`Bearer ${await token({ exp: Math.floor(Date.now() / 1000) - 3600 })}`, PROJECT));
    expect(detail).toMatch(/^The token expired at \d{4}-/);
    expect(auth.stats.rejections).toBe(1);
  });

  it('refuses a token without exp', async () => {
    const auth = authenticator();
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${await token({ exp: null })}`, PROJECT))).toBe('The token has no exp claim; tokens must expire');
  });

  it('refuses a token signed by another key under a known kid', async () => {
    const impostor = { ...(await signingKey('primary')), kid: primary.kid };
    const auth = authenticator();
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${await token({ key: impostor })}`, PROJECT))).toBe("The token's signature does not verify");
  });

  it('refuses a token for another audience, and one from another issuer', async () => {
    const auth = authenticator();
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${await token({ audience: 'elsewhere' })}`, PROJECT))).toBe('The token\'s audience is not "runlet"');
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${await token({ issuer: 'https://other.example' })}`, PROJECT))).toBe(
      `The token's issuer is not "${issuer.url}"`,
    );
  });

  it('answers 403 for a valid token of another project, from the cache too', async () => {
    const auth = authenticator();
    const header = `Bearer ${await token()}`;
    for (let call = 0; call < 2; call++) {
      const problem = await refusal(auth.authenticate(header, 'team-b'));
      expect(problem.status).toBe(403);
      expect(problem.spec.code).toBe('forbidden');
      expect(problem.detail).toBe('The token is for project "team-a", not for "team-b"');
    }
    expect(auth.stats.verifications).toBe(1);
  });

  it('answers a missing header, or another scheme, with the bare Bearer challenge', async () => {
    const auth = authenticator();
    for (const header of [undefined, '', 'Basic dXNlcjpwYXNz']) {
      const problem = await refusal(auth.authenticate(header, PROJECT));
      expect(problem.status).toBe(401);
      expect(problem.headers).toEqual({ 'www-authenticate': 'Bearer realm="runlet"' });
    }
    expect(issuer.jwksFetches).toBe(0);
  });

  it('refuses malformed bearer tokens', async () => {
    const auth = authenticator();
    for (const header of ['Bearer x.y', 'Bearer', 'Bearer a.b.c.d', 'Bearer a b.c', 'Bearer !!.??.**']) {
      expect(await invalidTokenDetail(auth.authenticate(header, PROJECT))).toBe('The bearer token is not a JWT (three base64url parts separated by dots)');
    }
    expect(await invalidTokenDetail(auth.authenticate('Bearer abc.def.ghi', PROJECT))).toBe("The token's header is not base64url-encoded JSON");
    // Only the last reached verification: the others were refused on their shape.
    expect(auth.stats).toEqual({ cacheHits: 0, verifications: 1, rejections: 6 });
  });

  it('never echoes the token in the detail or the challenge', async () => {
    const auth = authenticator();
    const jwt = await token({ audience: 'elsewhere' });
    const problem = await refusal(auth.authenticate(`Bearer ${jwt}`, PROJECT));
    for (const part of jwt.split('.')) {
      expect(problem.detail).not.toContain(part);
      expect(problem.headers?.['www-authenticate']).not.toContain(part);
    }
  });

  it('refuses alg none', async () => {
    const auth = authenticator();
    const unsecured = new UnsecuredJWT({ project_id: PROJECT }).setAudience('runlet').setIssuer(issuer.url).setExpirationTime('1h').encode();
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${unsecured}`, PROJECT))).toBe(
      "The token's algorithm (alg) is not accepted; accepted: RS256, ES256, EdDSA, HS256",
    );
    expect(issuer.jwksFetches).toBe(0);
  });

  it('refuses HS256 tokens keyed with the public key of the key set', async () => {
    const publicKeyBytes = new TextEncoder().encode(await exportSPKI(primary.publicKey));
    const confused = await new SignJWT({ project_id: PROJECT })
      .setProtectedHeader({ alg: 'HS256', kid: primary.kid })
      .setAudience('runlet')
      .setIssuer(issuer.url)
      .setExpirationTime('1h')
      .sign(publicKeyBytes);
    const issuerOnly = authenticator();
    expect(await invalidTokenDetail(issuerOnly.authenticate(`Bearer ${confused}`, PROJECT))).toBe(
      'HS256 tokens are not accepted here: no shared key is configured, only the token issuer',
    );
    const withSharedKey = authenticator({ hs256Keys: { [PROJECT]: new TextEncoder().encode(SHARED_KEY) } });
    expect(await invalidTokenDetail(withSharedKey.authenticate(`Bearer ${confused}`, PROJECT))).toBe("The token's signature does not verify");
    expect(issuer.jwksFetches).toBe(0);
  });

  it('takes the namespace of a Kubernetes service-account token as its project', async () => {
    const auth = authenticator();
    const serviceAccount = {
      sub: 'system:serviceaccount:ml-prod:caller',
      'kubernetes.io': { namespace: 'ml-prod', serviceaccount: { name: 'caller', uid: '0b1d6a3c' } },
    };
    const header = `Bearer ${await token({ claims: { ...serviceAccount, project_id: undefined } })}`;
    await auth.authenticate(header, 'ml-prod');
    expect((await refusal(auth.authenticate(header, PROJECT))).status).toBe(403);
    const subjectOnly = `Bearer ${await token({ claims: { sub: 'system:serviceaccount:ml-dev:caller', project_id: undefined } })}`;
    await auth.authenticate(subjectOnly, 'ml-dev');
  });

  it('refuses a valid token that names no project', async () => {
    const auth = authenticator();
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${await token({ claims: { project_id: undefined, sub: 'someone' } })}`, PROJECT))).toBe(
      'The token names no project: it needs a project_id claim, or to be a Kubernetes service-account token',
    );
  });

  it('forgets a cached token at its exp, and refuses it once past the clock tolerance', async () => {
    let nowMs = Date.UTC(2030, 0, 1);
    const exp = nowMs / 1000 + 60;
    const auth = authenticator({ clockToleranceSeconds: 5 }, { now: () => nowMs });
    const header = `Bearer ${await token({ exp })}`;
    await auth.authenticate(header, PROJECT);
    nowMs = exp * 1000 - 1;
    expect(auth.authenticate(header, PROJECT)).toBeUndefined();
    expect(auth.stats.verifications).toBe(1);
    nowMs = exp * 1000;
    await auth.authenticate(header, PROJECT); // verified again: past exp only within the tolerance
    expect(auth.stats.verifications).toBe(2);
    const again = auth.authenticate(header, PROJECT);
    expect(again).toBeInstanceOf(Promise); // and not cached, being past exp
    await again;
    nowMs = exp * 1000 + 5001;
    expect(await invalidTokenDetail(auth.authenticate(header, PROJECT))).toMatch(/^The token expired at/);
  });

  it('re-verifies a long-lived token after the cache max age', async () => {
    let nowMs = Date.UTC(2030, 0, 1);
    const auth = authenticator({ cacheMaxAgeMs: 1000 }, { now: () => nowMs });
    const header = `Bearer ${await token({ exp: nowMs / 1000 + 86_400 })}`;
    await auth.authenticate(header, PROJECT);
    nowMs += 999;
    expect(auth.authenticate(header, PROJECT)).toBeUndefined();
    nowMs += 1;
    await auth.authenticate(header, PROJECT);
    expect(auth.stats.verifications).toBe(2);
  });

  it('refetches the key set once for a rotated-in kid, at most once per cooldown', async () => {
    // jose's key set reads Date.now() for its cooldown: fake Date only, so sockets and timers stay real.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.UTC(2030, 0, 1));
    const auth = authenticator({ jwksCooldownMs: 30_000 });
    await auth.authenticate(`Bearer ${await token()}`, PROJECT);
    expect(issuer.jwksFetches).toBe(1);

    const rotated = await signingKey('rotated');
    issuer.keys = [primary, rotated];
    const rotatedHeader = `Bearer ${await token({ key: rotated })}`;
    // Within the cooldown of the last fetch, an unknown kid does not reach the issuer.
    expect(await invalidTokenDetail(auth.authenticate(rotatedHeader, PROJECT))).toBe("No key of the token issuer matches the token's kid and alg");
    expect(issuer.jwksFetches).toBe(1);

    vi.setSystemTime(Date.now() + 30_001);
    await auth.authenticate(rotatedHeader, PROJECT);
    expect(issuer.jwksFetches).toBe(2);

    const unknown = await signingKey('unknown');
    for (let call = 0; call < 3; call++) {
      expect(await invalidTokenDetail(auth.authenticate(`Bearer ${await token({ key: unknown, claims: { n: call } })}`, PROJECT))).toMatch(/^No key/);
    }
    expect(issuer.jwksFetches).toBe(2);
  });

  it('answers 503 while the key set is unreachable, and recovers without caching the failure', async () => {
    issuer.jwksStatus = 500;
    const auth = authenticator();
    const header = `Bearer ${await token()}`;
    const problem = await refusal(auth.authenticate(header, PROJECT));
    expect(problem.status).toBe(503);
    expect(problem.headers).toEqual({ 'retry-after': '5' });
    expect(problem.detail).toBe("The token issuer's signing keys could not be fetched; retry shortly");
    expect((problem.cause as Error).message).toContain('answered 500');
    issuer.jwksStatus = 200;
    await auth.authenticate(header, PROJECT);
  });

  it('fetches the key set ahead of the first caller, who then fetches nothing', async () => {
    const auth = authenticator();
    await auth.prefetchKeys();
    expect([issuer.discoveryFetches, issuer.jwksFetches]).toEqual([1, 1]);
    await auth.authenticate(`Bearer ${await token()}`, PROJECT);
    expect([issuer.discoveryFetches, issuer.jwksFetches]).toEqual([1, 1]);
    expect(auth.stats.verifications).toBe(1);
  });

  it('logs a failed fetch ahead of the first caller, without throwing, and the first caller fetches again', async () => {
    issuer.jwksStatus = 500;
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const auth = authenticator({}, { logger });
    await auth.prefetchKeys();
    expect(lines).toHaveLength(1);
    const logged = JSON.parse(lines[0]!) as { msg: string; err: { message: string } };
    expect(logged.msg).toMatch(/key set ahead of the first call/);
    expect(logged.err.message).toContain('answered 500');
    issuer.jwksStatus = 200;
    await auth.authenticate(`Bearer ${await token()}`, PROJECT);
    expect(issuer.jwksFetches).toBe(2);
  });

  it('answers 503 when the discovery document names another issuer', async () => {
    issuer.namedIssuer = 'https://other.example';
    const auth = authenticator();
    const problem = await refusal(auth.authenticate(`Bearer ${await token()}`, PROJECT));
    expect(problem.status).toBe(503);
    expect((problem.cause as Error).message).toContain('names issuer "https://other.example"');
    expect(issuer.jwksFetches).toBe(0);
  });

  it('fetches a configured key-set URL with the bearer token of a token file, read at each fetch', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runlet-auth-'));
    try {
      const tokenFile = join(dir, 'token');
      writeFileSync(tokenFile, 'sa-token-1\n');
      issuer.requiredToken = 'sa-token-1';
      const auth = authenticator({ issuer: undefined, jwksUrl: `${issuer.url}/openid/v1/jwks`, jwksTokenFile: tokenFile, jwksCooldownMs: 0 });
      await auth.authenticate(`Bearer ${await token()}`, PROJECT);
      expect(issuer.discoveryFetches).toBe(0);

      writeFileSync(tokenFile, 'sa-token-2\n');
      issuer.requiredToken = 'sa-token-2';
      const rotated = await signingKey('rotated');
      issuer.keys = [primary, rotated];
      await auth.authenticate(`Bearer ${await token({ key: rotated })}`, PROJECT);
      expect(issuer.jwksFetches).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!hasOpenssl())('fetches a key set over HTTPS trusting the configured CA file, and only it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runlet-auth-tls-'));
    const server = createTlsServer();
    try {
      // A self-signed certificate for 127.0.0.1 is its own CA, like a cluster's API server certificate.
      const certificate = ['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-days', '1'];
      const files = ['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'ca.crt')];
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', ...certificate, ...files], { stdio: 'ignore' });
      server.setSecureContext({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'ca.crt')) });
      server.on('request', (_request, response) => response.end(JSON.stringify({ keys: [primary.publicJwk] })));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const jwksUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}/openid/v1/jwks`;
      const header = `Bearer ${await token()}`;

      await authenticator({ jwksUrl, jwksCaFile: join(dir, 'ca.crt') }).authenticate(header, PROJECT);
      const problem = await refusal(authenticator({ jwksUrl }).authenticate(header, PROJECT));
      expect(problem.status).toBe(503);
      expect((problem.cause as Error).message).toContain('self-signed certificate');
    } finally {
      server.closeAllConnections();
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a key set over plain http to a host other than loopback', () => {
    expect(() => new RunAuthenticator({ audience: 'runlet', jwksUrl: 'http://issuer.example/jwks' })).toThrow(
      'jwksUrl must be an https URL (plain http only on loopback), got "http://issuer.example/jwks"',
    );
  });
});

describe('RunAuthenticator with a shared HS256 key', () => {
  const sharedKeyConfig = { issuer: undefined, hs256Keys: { [PROJECT]: new TextEncoder().encode(SHARED_KEY) } };

  it('admits a token signed with the project key, and caches it', async () => {
    const auth = authenticator(sharedKeyConfig);
    const header = `Bearer ${await signLocalToken({ projectId: PROJECT, key: SHARED_KEY, expiresIn: 60 })}`;
    await auth.authenticate(header, PROJECT);
    expect(auth.authenticate(header, PROJECT)).toBeUndefined();
  });

  it('refuses tokens of another key, of a project without a key, and of the issuer when none is configured', async () => {
    const auth = authenticator(sharedKeyConfig);
    const otherKey = await signLocalToken({ projectId: PROJECT, key: 'o'.repeat(40) });
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${otherKey}`, PROJECT))).toBe("The token's signature does not verify");
    const otherProject = await signLocalToken({ projectId: 'team-b', key: SHARED_KEY });
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${otherProject}`, 'team-b'))).toBe("No shared key is configured for the token's project");
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${await token()}`, PROJECT))).toBe(
      'RS256 tokens are not accepted here: no token issuer is configured, only shared keys',
    );
  });

  it('does not take the prototype of the key table for a key', async () => {
    const auth = authenticator(sharedKeyConfig);
    const header = `Bearer ${await signLocalToken({ projectId: '__proto__', key: SHARED_KEY })}`;
    expect(await invalidTokenDetail(auth.authenticate(header, '__proto__'))).toBe("No shared key is configured for the token's project");
  });

  it('reads a token with a forged payload as a signature failure, not as its claimed project', async () => {
    const auth = authenticator(sharedKeyConfig);
    const [header, , signature] = (await signLocalToken({ projectId: PROJECT, key: SHARED_KEY })).split('.');
    const forged = base64url.encode(JSON.stringify({ project_id: PROJECT, aud: 'runlet', exp: Math.floor(Date.now() / 1000) + 86_400 * 365 }));
    expect(await invalidTokenDetail(auth.authenticate(`Bearer ${header}.${forged}.${signature}`, PROJECT))).toBe("The token's signature does not verify");
  });
});
