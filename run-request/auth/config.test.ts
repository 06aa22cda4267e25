import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SERVICE_ACCOUNT_DIR } from '../../kube/in-cluster.ts';
import { RunAuthenticator } from './authenticator.ts';
import { IN_CLUSTER_JWKS_URL, loadIssuerAuthConfig, loadRunAuthConfig } from './config.ts';
import type { RunAuthOptionName } from './config.ts';
import { localDevAuth, signLocalToken } from './local-key.ts';

const dir = mkdtempSync(join(tmpdir(), 'runlet-auth-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

function options(values: Partial<Record<RunAuthOptionName, string>>): (name: RunAuthOptionName) => string | undefined {
  return (name) => values[name];
}

const KEY = '3f1c0f0a9b8e7d6c5b4a39281706f5e4d3c2b1a0'; // 40 bytes of text

describe('loadRunAuthConfig', () => {
  it('reads the issuer, key set, CA and token files, and an audience list', () => {
    const ca = file('ca.crt', 'PEM');
    const token = file('token', 'sa-token');
    const config = loadRunAuthConfig(
      options({
        'auth-audience': 'runlet, runlet-staging',
        'auth-issuer': 'https://issuer.example',
        'auth-jwks-url': 'https://issuer.example/jwks',
        'auth-jwks-ca-file': ca,
        'auth-jwks-token-file': token,
      }),
      'team-a',
      {},
    );
    expect(config).toEqual({
      audience: ['runlet', 'runlet-staging'],
      issuer: 'https://issuer.example',
      jwksUrl: 'https://issuer.example/jwks',
      jwksCaFile: ca,
      jwksTokenFile: token,
    });
  });

  it("takes the project's shared key from a file or from RUNLET_AUTH_KEY, not both", () => {
    const keyFile = file('key', `${KEY}\n`);
    const fromFile = loadRunAuthConfig(options({ 'auth-key-file': keyFile }), 'team-a', {});
    expect(fromFile.hs256Keys).toEqual({ 'team-a': new TextEncoder().encode(KEY) });
    const fromEnv = loadRunAuthConfig(options({}), 'team-a', { RUNLET_AUTH_KEY: KEY });
    expect(fromEnv.hs256Keys).toEqual(fromFile.hs256Keys);
    expect(() => loadRunAuthConfig(options({ 'auth-key-file': keyFile }), 'team-a', { RUNLET_AUTH_KEY: KEY })).toThrow(/not both/);
  });

  it('refuses a shared key shorter than 32 bytes', () => {
    expect(() => loadRunAuthConfig(options({}), 'team-a', { RUNLET_AUTH_KEY: 'short' })).toThrow(
      'the shared key from RUNLET_AUTH_KEY is 5 bytes; HS256 needs at least 32 (e.g. openssl rand -hex 32)',
    );
  });

  it("defaults to the API server's issuer in a pod, and says which mounted file is missing", () => {
    expect(() => loadRunAuthConfig(options({}), 'team-a', { KUBERNETES_SERVICE_HOST: '10.0.0.1' })).toThrow(`--auth-jwks-ca-file: cannot read ${join(SERVICE_ACCOUNT_DIR, 'ca.crt')}`);
  });

  it("in a pod, reaches the API server's key set with the CA and token of the service-account directory it is given", () => {
    const accountDir = join(dir, 'serviceaccount');
    mkdirSync(accountDir, { recursive: true });
    writeFileSync(join(accountDir, 'ca.crt'), 'PEM');
    writeFileSync(join(accountDir, 'token'), 'sa-token');
    expect(loadRunAuthConfig(options({}), 'team-a', { KUBERNETES_SERVICE_HOST: '10.0.0.1' }, accountDir)).toEqual({
      audience: ['runlet'],
      jwksUrl: IN_CLUSTER_JWKS_URL,
      jwksCaFile: join(accountDir, 'ca.crt'),
      jwksTokenFile: join(accountDir, 'token'),
    });
  });

  it('needs an issuer or a key outside a pod', () => {
    expect(() => loadRunAuthConfig(options({}), 'team-a', {})).toThrow(/needs a token issuer/);
    expect(() => loadRunAuthConfig(options({ 'auth-issuer': 'not a url' }), 'team-a', {})).toThrow('--auth-issuer must be an absolute URL, got "not a url"');
  });
});

describe('loadIssuerAuthConfig (the holder’s: every project, the sidecars’ issuer)', () => {
  it('reads the same flags as the sidecar but no shared key, and leaves the issuer out when none is configured', () => {
    expect(loadIssuerAuthConfig(options({ 'auth-jwks-url': 'https://issuer.example/jwks' }), { RUNLET_AUTH_KEY: KEY })).toEqual({
      audience: ['runlet'],
      jwksUrl: 'https://issuer.example/jwks',
    });
    expect(loadIssuerAuthConfig(options({}), {})).toEqual({ audience: ['runlet'] });
  });
});

describe('local dev auth', () => {
  it('admits a token made with signLocalToken from the same key file', async () => {
    const keyFile = file('dev.key', `${KEY}\n`);
    const auth = new RunAuthenticator(localDevAuth(keyFile, 'dev'));
    try {
      const token = await signLocalToken({ projectId: 'dev', key: KEY, expiresIn: '5m' });
      await auth.authenticate(`Bearer ${token}`, 'dev');
      await expect(Promise.resolve(auth.authenticate(`Bearer ${token}`, 'other'))).rejects.toMatchObject({ status: 403 });
    } finally {
      await auth.close();
    }
  });
});
