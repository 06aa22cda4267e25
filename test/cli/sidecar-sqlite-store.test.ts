// `runlet sidecar --run-store sqlite` (a pod's sidecar outside a cluster) and what its store survives: killed
// with runs accepted and unfinished, it fails them `replica_lost` on restart and sends their webhooks, as
// `runlet dev` does.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUNS_DB_FILE_NAME } from '../../sidecar/runs/sqlite-run-store.ts';
import { freePort } from '../support/custom-app.ts';
import { FIXTURE_APPS } from '../support/dev-server.ts';
import { startPythonRuntime } from '../support/python-runtime.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');

let dir: string | undefined;
let receiver: WebhookReceiver | undefined;
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) await killed(child);
  await receiver?.close();
  receiver = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

async function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

/** The e2e fixture app's runtime, as the app container runs it (4 calls at once); resolves once it listens. */
function startRuntime(port: number, portFile: string): Promise<ChildProcess> {
  return startPythonRuntime({ appDir: join(FIXTURE_APPS, 'e2e'), port, portFile, concurrency: 4 }, (child) => children.push(child));
}

interface Sidecar {
  child: ChildProcess;
  base: string;
  output: () => string;
}

async function startSidecar(dataDir: string, appPort: number): Promise<Sidecar> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const child = spawn(
    process.execPath,
    [CLI, 'sidecar', '--project', 'dev', '--app', 'e2e', '--replica', 'pod-1', '--run-store', 'sqlite', '--data-dir', dataDir,
      '--auth', 'off', '--runtime', 'python', '--app-port', String(appPort), '--port', String(port), '--admin-port', String(adminPort),
      '--concurrency', '4', '--webhook-allow-cidrs', '127.0.0.0/8', '--log-level', 'warn'],
    { env: process.env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(child);
  let output = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  await waitFor(async () => (await fetch(`${adminUrl}/ready`).then((response) => response.ok, () => false)), { what: `the sidecar to be ready; its output: ${output}` });
  return { child, base: `http://127.0.0.1:${port}/v4/dev/e2e`, output: () => output };
}

/** The runs the SQLite file holds, read as another process would. */
function storedRuns(dataDir: string): RunRecord[] {
  const db = new DatabaseSync(join(dataDir, RUNS_DB_FILE_NAME), { readOnly: true });
  try {
    return db.prepare('SELECT record FROM runs ORDER BY id').all().map((row) => JSON.parse(row.record as string) as RunRecord);
  } finally {
    db.close();
  }
}

describe('runlet sidecar --run-store sqlite', () => {
  it('killed with runs accepted and unfinished: restarted, it fails them replica_lost and sends their webhooks', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-sqlite-'));
    receiver = await WebhookReceiver.start();
    const dataDir = join(dir, 'data');
    const appPort = await freePort();
    await startRuntime(appPort, join(dir, 'runtime-port'));
    const first = await startSidecar(dataDir, appPort);
    const hook = encodeURIComponent(`${receiver.url}/hook`);
    // Four running and two queued behind them (4 at once): every one accepted, none can finish before the kill.
    const accepted: string[] = [];
    for (let i = 0; i < 6; i += 1) {
      const response = await fetch(`${first.base}/sleep?async=true&webhookEndpoint=${hook}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ seconds: 60 }),
      });
      expect(response.status).toBe(202);
      accepted.push(((await response.json()) as { run_id: string }).run_id);
    }
    await waitFor(() => storedRuns(dataDir).filter((run) => run.status === 'running').length === 4, { what: 'four runs recorded running' });
    await killed(first.child);
    expect(storedRuns(dataDir).map((run) => run.status).sort()).toEqual(['pending', 'pending', 'running', 'running', 'running', 'running']);

    await startSidecar(dataDir, appPort);
    await waitFor(() => storedRuns(dataDir).every((run) => run.status === 'failure'), { what: 'every unfinished run failed' });
    for (const run of storedRuns(dataDir)) {
      expect(run).toMatchObject({ status: 'failure', reason: 'replica_lost', error: { type: 'ReplicaLost', message: expect.stringContaining('sidecar stopped') } });
    }
    await receiver.received(6);
    const delivered = receiver.deliveries.map((delivery) => JSON.parse(delivery.body) as { run_id: string; status: string; error: { type: string } });
    expect(delivered.map((body) => body.run_id).sort()).toEqual([...accepted].sort());
    for (const body of delivered) expect(body).toMatchObject({ status: 'failure', error: { type: 'ReplicaLost' } });
    await waitFor(() => storedRuns(dataDir).every((run) => run.webhook?.state === 'delivered'), { what: 'every webhook recorded delivered' });
  });
});
