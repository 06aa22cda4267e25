// `runlet` as a command, the way the README says to put it on the PATH: from any folder, on the pinned Node
// 24 even where the PATH's own `node` is another (the system's may be older, without TypeScript support).
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const BIN = resolve(import.meta.dirname, '../../bin');

describe('runlet on the PATH', () => {
  it('runs from another folder through a link, on the pinned Node rather than the PATH’s node', async () => {
    const home = await mkdtemp(join(tmpdir(), 'runlet-on-path-'));
    try {
      const localBin = join(home, 'bin');
      await mkdir(localBin);
      await symlink(join(BIN, 'runlet'), join(localBin, 'runlet'));
      // A `node` first on the PATH that is not the pinned one: the launcher must not use it.
      await writeFile(join(localBin, 'node'), '#!/bin/sh\necho "the PATH\'s node was used" >&2\nexit 9\n');
      await chmod(join(localBin, 'node'), 0o755);
      const { stdout } = await promisify(execFile)('sh', ['-c', 'runlet dev --help'], {
        cwd: home, // not the checkout
        env: { PATH: `${localBin}:/usr/bin:/bin`, HOME: home },
      });
      expect(stdout).toMatch(/^Usage: runlet dev/);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
