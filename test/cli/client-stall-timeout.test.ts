// `--client-stall-timeout`: how long `runlet dev` and `runlet sidecar` let a caller read nothing of an answer
// written as it comes. Read as a bound in seconds, and used: a `runlet dev` process cuts a stream nobody reads.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { runCli } from '../support/cli.ts';
import { FIXTURE_APPS } from '../support/dev-server.ts';
import { spawnDev, type DevProcess } from '../support/dev-process.ts';
import { SlowReader } from '../support/slow-reader.ts';
import { waitFor } from '../support/wait.ts';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

describe('--client-stall-timeout', () => {
  it('is refused by runlet dev unless it is a number of seconds above 0', async () => {
    const result = await runCli(['dev', `${FIXTURE_APPS}/e2e`, '--client-stall-timeout', '0']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--client-stall-timeout must be a number of seconds above 0 and at most 3600, got "0"/);
  });

  it('is refused by runlet sidecar unless it is a number of seconds above 0, from its flag or its variable', async () => {
    const flag = await runCli(['sidecar', '--project', 'p', '--app', 'a', '--auth', 'off', '--client-stall-timeout', 'soon']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/--client-stall-timeout must be a number of seconds above 0 and at most 3600, got "soon"/);
    const variable = await runCli(['sidecar', '--project', 'p', '--app', 'a', '--auth', 'off'], { env: { RUNLET_CLIENT_STALL_TIMEOUT: '-1' } });
    expect(variable.code).toBe(2);
    expect(variable.stderr).toMatch(/--client-stall-timeout must be a number of seconds above 0/);
  });

  it('cuts, in a runlet dev process, a stream whose caller reads nothing: cancelled, client_stalled', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-stall-'));
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    const dev: DevProcess = await spawnDev([`${FIXTURE_APPS}/e2e`], dataDir, ['--client-stall-timeout', '1']);
    cleanup.push(async () => {
      if (dev.child.exitCode === null) dev.child.kill('SIGKILL');
      await dev.exited;
    });
    const body = JSON.stringify({ n: 400, size: 64 * 1024 });
    const reader = await SlowReader.start(
      dev.url,
      `POST /v4/dev/e2e/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    cleanup.push(() => reader.close());
    const record = await waitFor(
      async () => {
        const { items } = (await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs`)).json()) as { items: RunRecord[] };
        return items.find((run) => run.status === 'cancelled');
      },
      { what: 'the stalled stream to be cut', timeoutMs: 30_000 },
    );
    expect(record).toMatchObject({ functionName: 'blobs', mode: 'stream', reason: 'client_stalled' });
  });
});
