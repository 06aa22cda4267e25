// Issue #32's first fault on the results store, with exact counts: `runlet sidecar --run-store results` (a real
// Python runtime behind it, a real collector into a real PostgreSQL, a receiver that checks signatures) takes 40
// async calls with signed webhooks and is SIGKILLed mid-load — some runs finished and delivered, four finished
// with their deliveries under way and the collector away (so their final states are only in the pod's journal),
// four running, the rest queued — then restarted on the same data dir. Every accepted run ends with exactly one
// final record, every webhook it owes is acknowledged exactly once and signed, and none is recorded failed.
//
// What runs when is the test's: each call runs `gated`, which returns once the test creates its gate file, and the
// runtime takes four at a time in the order the calls came (admission is FIFO).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { resultsCollector } from '../../results/collector.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { RUNLOG_JOURNAL_FILE_NAME } from '../../sidecar/runs/runlog-journal.ts';
import { WEBHOOK_DESTINATIONS_FILE_NAME } from '../../sidecar/runs/webhook-destinations-file.ts';
import { freePort } from '../support/custom-app.ts';
import { FIXTURE_APPS } from '../support/dev-server.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { startPythonRuntime } from '../support/python-runtime.ts';
import { identifyTestToken, writeResultsToken } from '../support/results-tokens.ts';
import { verifyWebhookSignature } from '../support/signature.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver, type ReceivedDelivery } from '../support/webhook-receiver.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');
const NAMESPACE = 'demo';
const APP = 'e2e';
const POD = 'e2e-pod-1';
const SECRET = 'the-signing-secret';
const CALLS = 40;
/** Calls that finish, are delivered and collected before the kill. */
const DELIVERED_BEFORE = 10;
/** Calls after those that finish with their deliveries hanging at the receiver, the collector away, at the kill. */
const DELIVERING_AT_KILL = 4;

let postgres: PostgresServer;
let results: OpenResults;
let dir: string | undefined;
let receiver: WebhookReceiver | undefined;
let collector: FastifyInstance | undefined;
const children: ChildProcess[] = [];

beforeAll(async () => {
  postgres = await startPostgres();
  results = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('sidecar_kill')), logger: testLogger() });
}, 120_000);

afterEach(async () => {
  // Lets runs the killed sidecar left in the runtime end (their gates), then stops every process.
  if (dir !== undefined) for (let i = 0; i < CALLS; i += 1) writeFileSync(gate(i), '');
  for (const child of children.splice(0)) await killed(child);
  await collector?.close();
  collector = undefined;
  await receiver?.close();
  receiver = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

afterAll(async () => {
  await results?.close();
  await postgres?.stop();
});

const gate = (i: number): string => join(dir!, `gate-${i}`);

async function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

async function startCollector(port: number): Promise<void> {
  const app = Fastify();
  await app.register(resultsCollector, { store: results.store, identify: identifyTestToken });
  await app.listen({ host: '127.0.0.1', port });
  collector = app;
}

/** The e2e fixture app's runtime, as the app container runs it (4 calls at once); resolves once it listens. */
async function startRuntime(port: number): Promise<void> {
  await startPythonRuntime({ appDir: join(FIXTURE_APPS, 'e2e'), port, portFile: join(dir!, 'runtime-port'), concurrency: 4 }, (child) => children.push(child));
}

interface Sidecar {
  child: ChildProcess;
  base: string;
  output: () => string;
}

async function startSidecar(dataDir: string, appPort: number, collectorPort: number): Promise<Sidecar> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const child = spawn(
    process.execPath,
    [CLI, 'sidecar', '--project', NAMESPACE, '--app', APP, '--replica', POD, '--run-store', 'results', '--data-dir', dataDir,
      '--auth', 'off', '--runtime', 'python', '--app-port', String(appPort), '--port', String(port), '--admin-port', String(adminPort),
      '--concurrency', '4', '--webhook-allow-cidrs', '127.0.0.0/8', '--log-level', 'warn'],
    {
      env: { ...process.env, KUBERNETES_SERVICE_HOST: '', RUNLET_RESULTS_URL: `http://127.0.0.1:${collectorPort}`, RUNLET_RESULTS_TOKEN_FILE: writeResultsToken(dir!, APP, POD, NAMESPACE) },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  children.push(child);
  let output = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  await waitFor(async () => child.exitCode === null && (await fetch(`http://127.0.0.1:${adminPort}/ready`).then((response) => response.ok, () => false)), {
    what: 'the sidecar to be ready',
  }).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; the sidecar's output:\n${output}`, { cause: error });
  });
  return { child, base: `http://127.0.0.1:${port}/v4/${NAMESPACE}/${APP}`, output: () => output };
}

const stored = (id: string): Promise<RunRecord | undefined> => results.store.getRun(NAMESPACE, APP, id);

describe('runlet sidecar --run-store results, SIGKILLed mid-load', () => {
  it('restarted on the same data dir, gives every accepted run one final record and every webhook one signed delivery', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-kill-'));
    const dataDir = join(dir, 'data');
    const collectorPort = await freePort();
    await startCollector(collectorPort);
    receiver = await WebhookReceiver.start();
    // What the receiver acknowledged (answered 2xx): the deliveries that count. Before the kill it lets the
    // deliveries of the runs finished with the collector away hang (answered by nobody, cut by the kill).
    const acknowledged: ReceivedDelivery[] = [];
    let hangNew = false;
    receiver.answer = (delivery) => {
      if (hangNew) return 'hang';
      acknowledged.push(delivery);
      return 200;
    };
    const appPort = await freePort();
    await startRuntime(appPort);
    const first = await startSidecar(dataDir, appPort, collectorPort);

    const hook = encodeURIComponent(receiver.at('/hooks/in?token=t0ken').href);
    const runIds: string[] = [];
    for (let i = 0; i < CALLS; i += 1) {
      const response = await fetch(`${first.base}/gated?async=true&webhookEndpoint=${hook}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-webhook-secret': SECRET },
        body: JSON.stringify({ gate: gate(i), result: i }),
      });
      expect(response.status, first.output()).toBe(202);
      runIds.push(((await response.json()) as { run_id: string }).run_id);
    }

    // Ten finish, their webhooks are acknowledged and their final states collected.
    for (let i = 0; i < DELIVERED_BEFORE; i += 1) writeFileSync(gate(i), '');
    await receiver.received(DELIVERED_BEFORE, 30_000);
    for (const id of runIds.slice(0, DELIVERED_BEFORE)) {
      await waitFor(async () => (await stored(id))?.webhook?.state === 'delivered', { what: `run ${id} collected with its webhook delivered` });
    }

    // The collector goes away; four more finish, their deliveries hang at the receiver: the sidecar is killed.
    await collector!.close();
    collector = undefined;
    hangNew = true;
    for (let i = DELIVERED_BEFORE; i < DELIVERED_BEFORE + DELIVERING_AT_KILL; i += 1) writeFileSync(gate(i), '');
    await receiver.received(DELIVERED_BEFORE + DELIVERING_AT_KILL, 30_000);
    await killed(first.child);
    const owedAfterKill = (await Promise.all(runIds.map(stored))).filter((run) => run?.webhook?.state !== 'delivered').length;
    expect(owedAfterKill).toBe(CALLS - DELIVERED_BEFORE);

    // Restarted on the same data dir, the collector back, the receiver answering.
    hangNew = false;
    await startCollector(collectorPort);
    await startSidecar(dataDir, appPort, collectorPort);
    let states = '';
    const records = await waitFor(async () => {
      const runs = await Promise.all(runIds.map(stored));
      const counts: Record<string, number> = {};
      for (const run of runs) {
        const key = `${run?.status ?? 'absent'}/${run?.webhook?.state ?? 'none'}`;
        counts[key] = (counts[key] ?? 0) + 1;
      }
      states = JSON.stringify(counts);
      return runs.every((run) => run !== undefined && run.status !== 'pending' && run.status !== 'running' && run.webhook?.state !== 'pending') && (runs as RunRecord[]);
    }, { what: 'every accepted run final in PostgreSQL with its webhook settled', timeoutMs: 40_000 }).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; runs by status/webhook: ${states}; acknowledged webhooks: ${acknowledged.length}`, { cause: error });
    });

    // One final record per accepted run: the finished ones as they ended, the others lost with the sidecar.
    const finishedBefore = DELIVERED_BEFORE + DELIVERING_AT_KILL;
    records.forEach((run, i) => {
      expect(run.id).toBe(runIds[i]);
      if (i < finishedBefore) expect(run.status, run.id).toBe('success');
      else expect(run, run.id).toMatchObject({ status: 'failure', reason: 'replica_lost', error: { type: 'ReplicaLost' } });
      expect(run.webhook, run.id).toMatchObject({ state: 'delivered', lastStatusCode: 200 });
    });

    // Every webhook acknowledged once, signed; the interrupted ones sent again with their success, the rest failed.
    await receiver.received(DELIVERED_BEFORE + DELIVERING_AT_KILL + (CALLS - DELIVERED_BEFORE));
    const bodies = acknowledged.map((delivery) => JSON.parse(delivery.body) as { run_id: string; status: string; result?: unknown; error?: { type: string } });
    expect(bodies.map((body) => body.run_id).sort()).toEqual([...runIds].sort());
    for (const delivery of acknowledged) {
      expect(delivery.path).toBe('/hooks/in?token=t0ken');
      expect(verifyWebhookSignature(SECRET, delivery.headers, delivery.body), delivery.body).toBe(true);
    }
    const byRun = new Map(bodies.map((body) => [body.run_id, body]));
    runIds.forEach((id, i) => {
      if (i < finishedBefore) expect(byRun.get(id)).toMatchObject({ status: 'success', result: i });
      else expect(byRun.get(id)).toMatchObject({ status: 'failure', error: { type: 'ReplicaLost' } });
    });
    expect(receiver.deliveries).toHaveLength(DELIVERED_BEFORE + DELIVERING_AT_KILL + (CALLS - DELIVERED_BEFORE));

    // Nothing left owed in the pod: the journal and the deliveries file empty; the secret in no record.
    await waitFor(() => statSync(join(dataDir, RUNLOG_JOURNAL_FILE_NAME)).size === 0 && statSync(join(dataDir, WEBHOOK_DESTINATIONS_FILE_NAME)).size === 0, {
      what: 'the journal and the webhook deliveries file emptied',
    });
    expect(statSync(join(dataDir, WEBHOOK_DESTINATIONS_FILE_NAME)).mode & 0o777).toBe(0o600);
    expect(JSON.stringify(records)).not.toContain(SECRET);
  }, 120_000);
});
