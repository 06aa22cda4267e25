// runlet dev's API keys: tokens signed with its auth key, listed without their tokens, and a revoked one refused
// by the run authenticator at once and after a restart (its signature alone would still verify).
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProblemError } from '../crds/problem.ts';
import { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import { sharedKeyFromText } from '../run-request/auth/config.ts';
import { LocalApiKeys } from './dev-api-keys.ts';

const KEY = sharedKeyFromText('the auth key of the local keys test, 32 bytes or more', 'the test key');
const IN_A_DAY = new Date(Date.now() + 86_400_000);

async function keysWithAuth(dataDir: string): Promise<{ keys: LocalApiKeys; auth: RunAuthenticator }> {
  let auth: RunAuthenticator | undefined;
  const keys = new LocalApiKeys({ dataDir, signingKeys: { dev: KEY }, onRevoke: () => auth?.forgetVerified() });
  auth = new RunAuthenticator({ audience: 'runlet', hs256Keys: { dev: KEY }, revokedTokenIds: keys.revokedTokenIds });
  return { keys, auth };
}

describe('LocalApiKeys', () => {
  it('makes tokens that authenticate until revoked, then refuses them, after a restart too', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-keys-'));
    const { keys, auth } = await keysWithAuth(dataDir);
    const { item, token } = await keys.create('dev', 'ci', IN_A_DAY);
    expect(item.name).toBe('ci');
    expect(await keys.list('dev')).toEqual([item]);
    expect(await readFile(join(dataDir, 'api-keys.json'), 'utf8')).not.toContain(token);

    await auth.authenticate(`Bearer ${token}`, 'dev');
    await keys.revoke('dev', 'ci');
    // Verified and cached before the revocation: refused all the same.
    await expect(async () => auth.authenticate(`Bearer ${token}`, 'dev')).rejects.toThrow('revoked');
    expect(await keys.list('dev')).toEqual([]);

    const restarted = await keysWithAuth(dataDir);
    await expect(async () => restarted.auth.authenticate(`Bearer ${token}`, 'dev')).rejects.toThrow('revoked');
  });

  it('lists an expired key (to be revoked) until the next key made forgets it; its name is free again', async () => {
    const { keys } = await keysWithAuth(await mkdtemp(join(tmpdir(), 'runlet-dev-keys-')));
    const { item } = await keys.create('dev', 'old', new Date(Date.now() - 1000));
    expect(await keys.list('dev')).toEqual([item]);
    const { item: renewed } = await keys.create('dev', 'old', IN_A_DAY);
    expect(await keys.list('dev')).toEqual([renewed]);
  });

  it('refuses a second key of one name, and revoking a key it does not have', async () => {
    const { keys } = await keysWithAuth(await mkdtemp(join(tmpdir(), 'runlet-dev-keys-')));
    await keys.create('dev', 'ci', IN_A_DAY);
    await expect(keys.create('dev', 'ci', IN_A_DAY)).rejects.toSatisfy((err) => err instanceof ProblemError && err.spec.code === 'key-exists');
    await expect(keys.revoke('dev', 'nope')).rejects.toSatisfy((err) => err instanceof ProblemError && err.spec.code === 'key-not-found');
  });
});
