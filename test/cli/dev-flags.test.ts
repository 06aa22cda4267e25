// `runlet dev` as a user starts it: on the port it is given (8080 by default), with the request bounds it is
// given, served by one server with one runtime per app.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';
import { freePort } from '../support/custom-app.ts';
import { FIXTURE_APPS } from '../support/dev-server.ts';
import { spawnDev } from '../support/dev-process.ts';
import { RawConnection } from '../support/raw-http.ts';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function startDev(extraArgs: string[]): Promise<Awaited<ReturnType<typeof spawnDev>>> {
  const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-flags-'));
  cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
  const dev = await spawnDev([`${FIXTURE_APPS}/e2e`], dataDir, extraArgs);
  cleanup.push(async () => {
    if (dev.child.exitCode === null) dev.child.kill('SIGKILL');
    await dev.exited;
  });
  return dev;
}

describe('runlet dev flags', () => {
  it('serves on the port it is given, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const dev = await startDev(['--port', String(port)]);
    expect(dev.url).toBe(`http://127.0.0.1:${port}`);
    const response = await fetch(`${dev.url}/v4/dev/e2e/greet`, { method: 'POST', body: JSON.stringify({ name: 'Ada' }) });
    expect(response.status).toBe(200);
    dev.child.kill('SIGTERM');
    expect(await dev.exited).toBe(0);
  });

  it('bounds what requests still arriving may hold by --request-buffer-bytes', async () => {
    const dev = await startDev(['--request-buffer-bytes', '1000']);
    const response = await fetch(`${dev.url}/v4/dev/e2e/echo`, { method: 'POST', body: JSON.stringify({ pad: 'x'.repeat(5000) }) });
    expect(response.status).toBe(503);
    expect(((await response.json()) as { type: string }).type).toBe('https://runlet.dev/problems#request-buffer-full');
    const small = await fetch(`${dev.url}/v4/dev/e2e/greet`, { method: 'POST', body: JSON.stringify({ name: 'Ada' }) });
    expect(small.status).toBe(200);
  });

  it('serves the names --allow-host adds besides the loopback ones, and refuses a name with a port', async () => {
    const dev = await startDev(['--allow-host', 'devbox.internal', '--allow-host', '10.1.2.3']);
    for (const [host, status] of [['devbox.internal:8080', 200], ['10.1.2.3', 200], ['localhost', 200], ['other.internal', 421]] as const) {
      const connection = await RawConnection.open(dev.url);
      connection.write(`GET /v2/projects/dev/apps HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect([host, (await connection.next()).status]).toEqual([host, status]);
      connection.close();
    }
    const refused = await runCli(['dev', `${FIXTURE_APPS}/e2e`, '--allow-host', 'devbox.internal:8080']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--allow-host must be a host name or an IP address without a port, got "devbox.internal:8080"');
  });
});
