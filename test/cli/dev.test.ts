// `runlet dev` refusing to start says what to do.
import { once } from 'node:events';
import { mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';

const HELLO = resolve(import.meta.dirname, '../../examples/hello');

describe('runlet dev errors', () => {
  it('names the fix when the port is taken', async () => {
    const blocker = createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const { port } = blocker.address() as { port: number };
    try {
      const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-cli-'));
      const result = await runCli(['dev', HELLO, '--port', String(port), '--data-dir', dataDir]);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use: .*--port`));
    } finally {
      blocker.close();
    }
  });

  it('names the folder that does not exist', async () => {
    const missing = await runCli(['dev', '/nonexistent/app']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/app folder \/nonexistent\/app does not exist/);
  });
});
