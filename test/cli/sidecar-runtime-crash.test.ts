// `runlet sidecar` (SQLite store, no cluster) in front of a Python runtime the test runs as a pod's app container
// would be run: when the runtime dies, only its call in flight fails; the runs waiting in the queue wait for the
// container's restart, which the sidecar sees through its readiness probe, and calls meanwhile get 503.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../support/custom-app.ts';
import { startPythonRuntime } from '../support/python-runtime.ts';
import { FIXTURE_APPS } from '../support/dev-server.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');

let dir: string | undefined;
let receiver: WebhookReceiver | undefined;
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
  await receiver?.close();
  receiver = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** The e2e fixture app's runtime on `port`, as the app container runs it; resolves once it listens. */
function startRuntime(port: number, portFile: string): Promise<ChildProcess> {
  return startPythonRuntime({ appDir: join(FIXTURE_APPS, 'e2e'), port, portFile, concurrency: 1 }, (child) => children.push(child));
}

async function metric(adminUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(name + ' '));
  return Number(line?.split(' ')[1] ?? NaN);
}

async function expectUnavailable(response: Response): Promise<void> {
  expect(response.status).toBe(503);
  expect(response.headers.get('retry-after')).toBe('1');
  expect(((await response.json()) as { type: string }).type).toBe('https://runlet.dev/problems#app-unavailable');
}

describe('runlet sidecar in front of a Python runtime that crashes', () => {
  it('fails only the call in flight; queued runs wait for the restarted container and run; calls meanwhile get 503', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-crash-'));
    receiver = await WebhookReceiver.start();
    const [appPort, port, adminPort] = [await freePort(), await freePort(), await freePort()];
    const portFile = join(dir, 'runtime-port');
    await startRuntime(appPort, portFile);
    const sidecar = spawn(
      process.execPath,
      [CLI, 'sidecar', '--project', 'dev', '--app', 'e2e', '--replica', 'pod-1', '--run-store', 'sqlite', '--data-dir', join(dir, 'data'),
        '--auth', 'off', '--runtime', 'python', '--app-port', String(appPort), '--port', String(port), '--admin-port', String(adminPort),
        '--concurrency', '1', '--webhook-allow-cidrs', '127.0.0.0/8', '--log-level', 'warn'],
      { env: process.env, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    children.push(sidecar);
    let output = '';
    sidecar.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const adminUrl = `http://127.0.0.1:${adminPort}`;
    const base = `http://127.0.0.1:${port}/v4/dev/e2e`;
    const post = (path: string, body: unknown): Promise<Response> =>
      fetch(`${base}/${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    await waitFor(async () => (await fetch(`${adminUrl}/ready`).then((response) => response.ok, () => false)), { what: `the sidecar to be ready; its output: ${output}` });

    const gate = join(dir, 'gate');
    const inFlight = post('exit_when_open', { gate });
    await waitFor(async () => (await metric(adminUrl, 'runlet_runs_in_flight')) === 1, { what: 'the crashing call in flight' });
    const hook = encodeURIComponent(`${receiver.url}/hook`);
    const accepted = await post(`greet?async=true&webhookEndpoint=${hook}`, { name: 'queued async' });
    expect(accepted.status).toBe(202);
    const { run_id: asyncRunId } = (await accepted.json()) as { run_id: string };
    const queuedSync = post('greet', { name: 'queued sync' });
    await waitFor(async () => (await metric(adminUrl, 'runlet_queue_depth')) === 2, { what: 'an async and a sync run queued behind it' });

    writeFileSync(gate, '');
    const crashed = await inFlight;
    expect(crashed.status).toBe(502);
    expect(((await crashed.json()) as { detail: string }).detail).toMatch(/exited or crashed/);

    // The container is down until the test starts it again: everything that arrives now is refused at once.
    await expectUnavailable(await post('greet', { name: 'while down' }));
    await expectUnavailable(await post('greet?async=true', { name: 'while down' }));
    expect(receiver.deliveries, 'the queued async run has not ended').toEqual([]);

    await startRuntime(appPort, portFile);
    const served = await queuedSync;
    expect(served.status).toBe(200);
    expect(await served.json()).toMatchObject({ result: { greeting: 'Hello, queued sync!' } });
    await receiver.received(1);
    expect(JSON.parse(receiver.deliveries[0]!.body)).toMatchObject({ run_id: asyncRunId, status: 'success', result: { greeting: 'Hello, queued async!' } });
  });
});
