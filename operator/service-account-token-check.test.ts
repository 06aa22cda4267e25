// The collector's offline check of a pod's token, against the in-memory API server's service-account issuer
// (test/kube signs TokenRequest tokens RS256 and serves /.well-known/openid-configuration and /openid/v1/jwks, as
// kube-apiserver does from 1.20): a real pod's token verifies; an unbound one is refused offline; a token naming a
// key the cluster does not have reads the keys again at most once per cooldown; and while the keys cannot be read,
// nothing is refused for it: TokenReview alone decides (logged once).
import { SignJWT, decodeJwt, decodeProtectedHeader, exportSPKI, generateKeyPair, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeApi } from '../kube/client.ts';
import { KubePath } from '../kube/paths.ts';
import type { KubeObject } from '../kube/objects.ts';
import { RESULTS_TOKEN_AUDIENCE } from '../results/results-token.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { SERVICE_ACCOUNT_ISSUER } from '../test/kube/service-account-issuer.ts';
import { createAppPod, podToken } from '../test/support/app-pod-tokens.ts';
import { kubePathOf } from '../test/support/kube-path.ts';
import { SIDECAR_SERVICE_ACCOUNT } from './render/names.ts';
import { ResultsCallers } from './results-callers.ts';
import type { PodObject } from './runlog-verdict.ts';
import { ServiceAccountTokenCheck, type TokenCheck } from './service-account-token-check.ts';

const NAMESPACE = 'team-a';
let server: KubeApiServer;
let api: KubeApi;
let token: string;

/** A logger that keeps what was logged, by level. */
function recordingLogger(): { warn: (...args: unknown[]) => void; info: (...args: unknown[]) => void; debug: () => void; lines: { level: string; message: string }[] } {
  const lines: { level: string; message: string }[] = [];
  const at = (level: string) => (...args: unknown[]) => lines.push({ level, message: String(args.at(-1)) });
  return { warn: at('warn'), info: at('info'), debug: () => undefined, lines };
}

function tokenCheck(logger = recordingLogger(), options: { refreshCooldownMs?: number; maxAgeMs?: number } = {}): ServiceAccountTokenCheck {
  return new ServiceAccountTokenCheck({ api, audience: RESULTS_TOKEN_AUDIENCE, logger: logger as never, ...options });
}

const keyReads = (): number => server.countRequests({ method: 'GET', pathPattern: '/openid/v1/jwks' });

beforeAll(async () => {
  server = await startKubeApiServer();
  api = new KubeApi(await server.credentials());
  await api.create(kubePathOf('/api/v1/namespaces'), { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } } as KubeObject);
  await api.create(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/serviceaccounts`), { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: SIDECAR_SERVICE_ACCOUNT } } as KubeObject);
  await createAppPod(api, NAMESPACE, 'billing-1', 'billing');
  token = await podToken(api, NAMESPACE, 'billing-1');
});

afterAll(async () => {
  await api?.close();
  await server?.close();
});

describe('the offline check of a pod\'s token', () => {
  it('verifies a pod\'s projected token against the key set the API server serves, reading the keys once', async () => {
    const check = tokenCheck();
    const before = keyReads();
    expect(await check.check(token)).toEqual({ outcome: 'verified', namespace: NAMESPACE });
    expect(await check.check(token)).toEqual({ outcome: 'verified', namespace: NAMESPACE });
    expect(keyReads() - before).toBe(1);
  });

  it('refuses offline a token of the right audience bound to no pod (403), and one for the API server (401)', async () => {
    const check = tokenCheck();
    const unbound = await podToken(api, NAMESPACE, 'billing-1', { boundPod: false });
    expect(await check.check(unbound)).toMatchObject({ outcome: 'refused', status: 403, namespace: NAMESPACE });
    const apiServers = await podToken(api, NAMESPACE, 'billing-1', { audience: SERVICE_ACCOUNT_ISSUER });
    expect(await check.check(apiServers)).toMatchObject({ outcome: 'refused', status: 401, detail: expect.stringMatching(/aud claim/) });
  });

  it('refuses a real pod\'s claims under alg none, under HS256 keyed with the cluster\'s public key, and signed by another issuer\'s key, without reading the keys again', async () => {
    const check = tokenCheck();
    expect(await check.check(token)).toMatchObject({ outcome: 'verified' });
    const claims = decodeJwt(token);
    const { kid } = decodeProtectedHeader(token);
    const encode = (part: object): string => Buffer.from(JSON.stringify(part)).toString('base64url');
    const none = `${encode({ alg: 'none', kid })}.${encode(claims)}.`;
    const jwks = (await api.request('GET', KubePath.openIdKeySet)) as { keys: JWK[] };
    const publicPem = await exportSPKI((await importJWK(jwks.keys[0]!, 'RS256')) as Parameters<typeof exportSPKI>[0]);
    // The classic confusion: the public key (as PEM, and as the JWK's modulus) used as an HMAC secret.
    const hmacUnder = (secret: Uint8Array): Promise<string> => new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid }).sign(secret);
    const hsPem = await hmacUnder(new TextEncoder().encode(publicPem));
    const hsModulus = await hmacUnder(Buffer.from(jwks.keys[0]!.n!, 'base64url'));
    const otherIssuer = await generateKeyPair('RS256');
    const foreign = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(otherIssuer.privateKey);
    const before = keyReads();
    for (const forged of [none, hsPem, hsModulus, foreign]) expect(await check.check(forged)).toMatchObject({ outcome: 'refused', status: 401 });
    expect(keyReads() - before).toBe(0);
  });

  it('reads the keys again for a token naming an unknown key at most once per cooldown, and refuses it', async () => {
    const check = tokenCheck();
    await check.check(token);
    const { privateKey } = await generateKeyPair('RS256');
    const before = keyReads();
    const outcomes: TokenCheck[] = [];
    for (let i = 0; i < 100; i += 1) {
      const unknownKid = await new SignJWT({ 'kubernetes.io': { namespace: NAMESPACE, pod: { name: 'billing-1', uid: 'x' } } })
        .setProtectedHeader({ alg: 'RS256', kid: `rotated-${i}` })
        .setIssuer(SERVICE_ACCOUNT_ISSUER)
        .setAudience(RESULTS_TOKEN_AUDIENCE)
        .setExpirationTime('10m')
        .sign(privateKey);
      outcomes.push(await check.check(unknownKid));
    }
    expect(outcomes.every((outcome) => outcome.outcome === 'refused' && outcome.status === 401)).toBe(true);
    // Read at the first check: within the cooldown, none of the hundred reads them again.
    expect(keyReads() - before).toBe(0);
  });

  it('leaves every token to TokenReview while the keys cannot be read, logging it once, and checks again once they can', async () => {
    const logger = recordingLogger();
    const check = tokenCheck(logger, { refreshCooldownMs: 0 });
    server.failNext({ method: 'GET', pathPattern: '/.well-known/openid-configuration', status: 403, times: 3, message: 'forbidden: User cannot get path "/.well-known/openid-configuration"' });
    expect(await check.check(token)).toEqual({ outcome: 'unchecked' });
    expect(await check.check('made.up.token')).toEqual({ outcome: 'unchecked' });
    expect(await check.check(token)).toEqual({ outcome: 'unchecked' });
    expect(logger.lines.filter((line) => line.level === 'warn')).toHaveLength(1);
    // The collector's callers still take the pod's token: TokenReview says who it is.
    const pods = new Map<string, PodObject>([[`${NAMESPACE}/billing-1`, (await api.get(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/pods/billing-1`))) as PodObject]]);
    server.failNext({ method: 'GET', pathPattern: '/.well-known/openid-configuration', status: 403, times: 2 });
    const callers = new ResultsCallers({ api, pod: (namespace, name) => pods.get(`${namespace}/${name}`), logger: logger as never, tokenCheck: tokenCheck(logger, { refreshCooldownMs: 0 }) });
    expect(await callers.identify(token)).toEqual({ namespace: NAMESPACE, appName: 'billing', podName: 'billing-1' });
    expect(await callers.identify(`${token.slice(0, -4)}AAAA`)).toMatchObject({ status: 401 });
    // The keys readable again: checked offline again, and said so.
    expect(await check.check(token)).toEqual({ outcome: 'verified', namespace: NAMESPACE });
    expect(logger.lines.some((line) => line.level === 'info' && /read again/.test(line.message))).toBe(true);
  });

  it('keeps checking with the keys it read while they cannot be read again: a forgery under a known kid is still refused, an unknown kid is left to TokenReview', async () => {
    const check = tokenCheck(recordingLogger(), { refreshCooldownMs: 0, maxAgeMs: 0 });
    expect(await check.check(token)).toMatchObject({ outcome: 'verified' });
    server.failNext({ method: 'GET', pathPattern: '/.well-known/openid-configuration', status: 503, times: 4 });
    expect(await check.check(token)).toMatchObject({ outcome: 'verified' });
    const { privateKey } = await generateKeyPair('RS256');
    const forge = (kid: string | undefined): Promise<string> =>
      new SignJWT({ 'kubernetes.io': { namespace: NAMESPACE, pod: { name: 'billing-1', uid: 'x' } } })
        .setProtectedHeader({ alg: 'RS256', kid })
        .setIssuer(SERVICE_ACCOUNT_ISSUER)
        .setAudience(RESULTS_TOKEN_AUDIENCE)
        .setExpirationTime('10m')
        .sign(privateKey);
    expect(await check.check(await forge(decodeProtectedHeader(token).kid))).toMatchObject({ outcome: 'refused', status: 401 });
    expect(await check.check(await forge('rotated-in'))).toEqual({ outcome: 'unchecked' });
  });
});
