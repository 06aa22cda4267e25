// runlet dev's data dir is private to its user: made 0700 with its files 0600, and one an older runlet dev left
// readable by others (0755, 0644 under a 022 umask) tightened at start.
import { chmod, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestDevServer } from '../test/support/dev-server.ts';
import { testLogger } from '../test/support/logger.ts';
import { preparePrivateDir } from './dev-data-dir.ts';
import { localDevAuth } from '../run-request/auth/local-key.ts';

let scratch: string | undefined;

afterEach(async () => {
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
  scratch = undefined;
});

async function modeOf(path: string): Promise<string> {
  return ((await stat(path)).mode & 0o777).toString(8);
}

describe("runlet dev's data dir", () => {
  it('is made 0700, nested folders included, with the run store and the API keys 0600', async () => {
    scratch = await mkdtemp(join(tmpdir(), 'runlet-data-dir-'));
    const dataDir = join(scratch, 'a', '.runlet');
    const keyFile = join(scratch, 'dev.key');
    await writeFile(keyFile, 'the auth key of the data dir test, 32 bytes or more');
    const dev = await startTestDevServer({ appDirs: [], dataDir, auth: localDevAuth(keyFile, 'dev') });
    try {
      const made = await fetch(`${dev.url}/v2/projects/dev/keys`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'k', expiresAt: new Date(Date.now() + 86_400_000).toISOString() }),
      });
      expect(made.status).toBe(201);
      expect(await modeOf(dataDir)).toBe('700');
      expect(await modeOf(join(scratch, 'a'))).toBe('700');
      for (const name of ['runs.sqlite', 'runs.sqlite-wal', 'runs.sqlite-shm', 'api-keys.json']) expect([name, await modeOf(join(dataDir, name))]).toEqual([name, '600']);
    } finally {
      await dev.close();
    }
  });

  it('tightens a data dir and files left readable by others, and leaves what a symbolic link points to alone', async () => {
    scratch = await mkdtemp(join(tmpdir(), 'runlet-data-dir-'));
    const dataDir = join(scratch, '.runlet');
    await mkdir(dataDir);
    await chmod(dataDir, 0o755);
    for (const name of ['runs.sqlite', 'api-keys.json', 'api-keys.json.123.tmp']) {
      await writeFile(join(dataDir, name), name === 'api-keys.json' ? '{"keys":[]}\n' : '');
      await chmod(join(dataDir, name), 0o644);
    }
    const outside = join(scratch, 'elsewhere.txt');
    await writeFile(outside, 'not runlet dev\'s');
    await chmod(outside, 0o644);
    await symlink(outside, join(dataDir, 'link'));

    const dev = await startTestDevServer({ appDirs: [], dataDir });
    try {
      expect(await modeOf(dataDir)).toBe('700');
      for (const name of ['runs.sqlite', 'api-keys.json', 'api-keys.json.123.tmp', 'runs.sqlite-wal']) expect([name, await modeOf(join(dataDir, name))]).toEqual([name, '600']);
      expect(await modeOf(outside)).toBe('644');
    } finally {
      await dev.close();
    }
  });

  it('refuses a private folder that is a symbolic link, leaving what it points to as it was', async () => {
    scratch = await mkdtemp(join(tmpdir(), 'runlet-data-dir-'));
    const dataDir = join(scratch, '.runlet');
    await mkdir(dataDir, { mode: 0o700 });
    // Planted (a cloned app folder whose .runlet holds one, say): chmod and the installs would follow it.
    const outside = join(scratch, 'shared');
    await mkdir(outside);
    await chmod(outside, 0o755);
    await symlink(outside, join(dataDir, 'environments'));
    expect(() => preparePrivateDir(join(dataDir, 'environments'), testLogger())).toThrow(/symbolic link/);
    expect(await modeOf(outside)).toBe('755');
  });
});
