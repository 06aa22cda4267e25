// `runlet sidecar --run-store results` as a process: its runs reach a real PostgreSQL through the collector (as
// the operator serves it, here in the test process) without a database credential; an async run it accepted
// while the collector was away, left running when the sidecar was killed, is recorded replica_lost by the next
// sidecar on the same data dir once the collector is back. Without the collector's URL or the key it refuses
// to start, saying which.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { resultsCollector } from '../../results/collector.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { freePort } from '../support/custom-app.ts';
import { FIXTURE_APPS } from '../support/dev-server.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { waitFor } from '../support/wait.ts';
import { identifyTestToken, writeResultsToken } from '../support/results-tokens.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');
const NAMESPACE = 'demo';
const APP = 'hello';
const POD = 'hello-pod-1';

let postgres: PostgresServer;
let results: OpenResults;
let dir: string;
const children: ChildProcess[] = [];
const collectors: FastifyInstance[] = [];

beforeAll(async () => {
  postgres = await startPostgres();
  results = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('sidecar')), logger: testLogger() });
}, 120_000);

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolveExit) => child.once('exit', resolveExit));
    child.kill('SIGKILL');
    await exited;
  }
  for (const collector of collectors.splice(0)) await collector.close();
  rmSync(dir, { recursive: true, force: true });
});

afterAll(async () => {
  await results?.close();
  await postgres?.stop();
});

async function startCollector(port: number): Promise<FastifyInstance> {
  const app = Fastify();
  await app.register(resultsCollector, { store: results.store, identify: identifyTestToken });
  await app.listen({ host: '127.0.0.1', port });
  collectors.push(app);
  return app;
}

function startSidecar(args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [CLI, 'sidecar', '--project', NAMESPACE, '--app', APP, '--replica', POD, '--run-store', 'results', '--auth', 'off', ...args], {
    env: { ...process.env, KUBERNETES_SERVICE_HOST: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  return { child, output: () => output };
}

async function readySidecar(appPort: number, collectorPort: number, extraArgs: string[] = []): Promise<{ child: ChildProcess; runUrl: string }> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const sidecar = startSidecar(
    ['--runtime', 'custom', '--app-port', String(appPort), '--ready-path', '/ready', '--port', String(port), '--admin-port', String(adminPort), '--data-dir', join(dir, 'data'), ...extraArgs],
    { RUNLET_RESULTS_URL: `http://127.0.0.1:${collectorPort}`, RUNLET_RESULTS_TOKEN_FILE: writeResultsToken(dir, APP, POD, NAMESPACE) },
  );
  await waitFor(async () => sidecar.child.exitCode === null && (await fetch(`http://127.0.0.1:${adminPort}/ready`).then((response) => response.ok, () => false)), {
    what: 'the sidecar to be ready',
  }).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; the sidecar's output:\n${sidecar.output()}`, { cause: error });
  });
  return { child: sidecar.child, runUrl: `http://127.0.0.1:${port}/v4/${NAMESPACE}/${APP}` };
}

async function startApp(): Promise<number> {
  const port = await freePort();
  children.push(spawn(process.execPath, [join(FIXTURE_APPS, 'custom/server.mjs')], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' }));
  return port;
}

const stored = (id: string): Promise<RunRecord | undefined> => results.store.getRun(NAMESPACE, APP, id);

describe('runlet sidecar --run-store results', () => {
  it('sends its sync and async runs to the collector, into PostgreSQL', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-results-'));
    const collectorPort = await freePort();
    await startCollector(collectorPort);
    const { runUrl } = await readySidecar(await startApp(), collectorPort);
    const sync = await fetch(`${runUrl}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(sync.status).toBe(200);
    const accepted = await fetch(`${runUrl}/run?async=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(accepted.status).toBe(202);
    for (const id of [sync.headers.get('x-request-id')!, ((await accepted.json()) as { run_id: string }).run_id]) {
      const record = await waitFor(async () => (await stored(id))?.status === 'success' && stored(id), { what: `run ${id} in PostgreSQL` });
      expect(record).toMatchObject({ id, projectId: NAMESPACE, appName: APP, replica: 'hello-pod-1' });
    }
  });

  it('with --keep-results on, sends each run\'s result beside its record: the get returns it, bounded by --result-keep-bytes', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-results-'));
    const collectorPort = await freePort();
    await startCollector(collectorPort);
    const { runUrl } = await readySidecar(await startApp(), collectorPort, ['--keep-results', 'on', '--result-keep-bytes', '400', '--result-ttl', '600']);
    const call = (body: string): Promise<Response> => fetch(`${runUrl}/run?async=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const small = (await (await call('{"n":1}')).json()) as { run_id: string };
    const large = (await (await call(JSON.stringify({ text: 'x'.repeat(500) }))).json()) as { run_id: string };
    const kept = await waitFor(async () => (await stored(small.run_id))?.status === 'success' && stored(small.run_id), { what: 'the run with its result in PostgreSQL' });
    expect(kept).toMatchObject({ resultKept: true, result: { method: 'POST', path: '/run', requestId: small.run_id, body: '{"n":1}' } });
    const notKept = await waitFor(async () => (await stored(large.run_id))?.status === 'success' && stored(large.run_id), { what: 'the large run in PostgreSQL' });
    expect(notKept).toMatchObject({ resultKept: false });
    expect(notKept).not.toHaveProperty('result');
  });

  it('records replica_lost, once the collector is back, the async run a killed sidecar accepted while it was away', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-results-'));
    const collectorPort = await freePort();
    const appPort = await startApp();
    const first = await readySidecar(appPort, collectorPort);
    const accepted = await fetch(`${first.runUrl}/endless?async=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(accepted.status).toBe(202);
    const { run_id: runId } = (await accepted.json()) as { run_id: string };
    first.child.kill('SIGKILL');
    await new Promise((resolveExit) => first.child.once('exit', resolveExit));
    expect(await stored(runId)).toBeUndefined();
    await startCollector(collectorPort);
    await readySidecar(appPort, collectorPort);
    const lost = await waitFor(async () => (await stored(runId))?.status === 'failure' && stored(runId), { what: 'the lost run in PostgreSQL' });
    expect(lost).toMatchObject({ reason: 'replica_lost', error: { type: 'ReplicaLost' } });
  });

  it('refuses to start without the collector\'s URL or its token file, naming what is missing', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-results-'));
    for (const [env, missing] of [
      [{ RUNLET_RESULTS_TOKEN_FILE: join(dir, 'token') }, 'RUNLET_RESULTS_URL'],
      [{ RUNLET_RESULTS_URL: 'http://127.0.0.1:9' }, 'RUNLET_RESULTS_TOKEN_FILE'],
    ] as const) {
      const sidecar = startSidecar(['--app-port', '9', '--port', '0', '--admin-port', '0', '--data-dir', join(dir, 'data')], Object.assign({ RUNLET_RESULTS_URL: '', RUNLET_RESULTS_TOKEN_FILE: '' }, env));
      const code = await new Promise<number | null>((resolveExit) => sidecar.child.once('exit', resolveExit));
      expect(code).not.toBe(0);
      expect(sidecar.output()).toContain(missing);
    }
  });
});
