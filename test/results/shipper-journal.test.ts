// The results shipper's journal across a restart of its sidecar (issue #32, defect 1), with the real collector over
// loopback into a real PostgreSQL: a run stays in the pod's journal until its final state — webhook settled — is
// collected, a finished run's delivery is kept (body and secret) before its first attempt, and a long run does not
// hold the journal's later entries. A store closed while the collector is away leaves its journal as a kill would.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { resultsCollector } from '../../results/collector.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { ResultsShipperStore } from '../../sidecar/runs/results-shipper-store.ts';
import { RUNLOG_JOURNAL_FILE_NAME, RunLogJournal } from '../../sidecar/runs/runlog-journal.ts';
import { keepResult } from '../../sidecar/runs/kept-result.ts';
import { pendingDelivery, rememberDestination } from '../../sidecar/runs/webhook-destination.ts';
import { WebhookSigner } from '../../sidecar/webhook/sign.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { pendingAsyncRunRecord } from '../support/sqlite-run-records.ts';
import { identifyTestToken, writeResultsToken } from '../support/results-tokens.ts';
import { waitFor } from '../support/wait.ts';

const APP = 'journaled';
const DESTINATION = 'https://hooks.example/in?token=t0ken';
const SECRET = 'the-signing-secret';

let server: PostgresServer;
let results: OpenResults;
const dirs: string[] = [];

beforeAll(async () => {
  server = await startPostgres();
  results = await openResults({ dsn: server.dsn(await server.createDatabase('shipper_journal')), logger: testLogger() });
}, 120_000);

afterAll(async () => {
  await results?.close();
  await server?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function startCollector(port = 0): Promise<{ app: FastifyInstance; url: string; port: number }> {
  const app = Fastify();
  await app.register(resultsCollector, { store: results.store, identify: identifyTestToken });
  const address = await app.listen({ host: '127.0.0.1', port });
  return { app, url: address, port: Number(new URL(address).port) };
}

async function openShipper(collectorUrl: string, dataDir: string, journalMaxBytes?: number): Promise<ResultsShipperStore> {
  const journal = await RunLogJournal.open({ dataDir, logger: testLogger(), maxBytes: journalMaxBytes });
  return new ResultsShipperStore({
    collectorUrl,
    namespace: 'demo',
    tokenFile: writeResultsToken(dataDir, APP),
    journal,
    logger: testLogger(),
    registry: new Registry(),
    flushTimeoutMs: 300,
    retryInitialMs: 20,
    retryMaxMs: 100,
    intervalMs: 20,
  });
}

function newDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'runlet-shipper-journal-'));
  dirs.push(dir);
  return dir;
}

/** A first sidecar's store whose collector is away (on `port`, free for the collector to come back on). */
async function shipperWithCollectorAway(): Promise<{ first: ResultsShipperStore; dataDir: string; port: number }> {
  const away = await startCollector();
  await away.app.close();
  const dataDir = newDataDir();
  return { first: await openShipper(away.url, dataDir), dataDir, port: away.port };
}

/** An async run with a signed webhook, accepted (its pending state saved durably), as the sidecar records one. */
async function acceptedRun(store: ResultsShipperStore): Promise<RunRecord> {
  const record = pendingAsyncRunRecord({ appName: APP, webhook: { endpoint: 'https://hooks.example/in', state: 'pending', attempts: 0, lastStatusCode: null, lastError: null } });
  rememberDestination(record.webhook!, DESTINATION, new WebhookSigner(SECRET));
  await store.saveDurably(record);
  return record;
}

function finish(record: RunRecord): void {
  Object.assign(record, { status: 'success', statusCode: 200, startedAt: new Date().toISOString(), completedAt: new Date().toISOString(), runtimeMs: 5 });
}

/** The first sidecar, gone with the collector away: its store closed (flush fails) leaves the journal as a kill would. */
async function lose(store: ResultsShipperStore): Promise<void> {
  await store.close();
}

/** The runs a restarted store hands the deliverer, with what it kept of each delivery. */
function owedBy(store: ResultsShipperStore): RunRecord[] {
  const owed: RunRecord[] = [];
  store.deliverOwedWebhooks((record) => owed.push(record) > 0);
  return owed;
}

describe('the results shipper\'s journal, across a restart', () => {
  it('keeps a run whose delivered state never reached the collector: recorded delivered after the restart, nothing owed', async () => {
    const { first, dataDir, port } = await shipperWithCollectorAway();
    const record = await acceptedRun(first);
    finish(record);
    first.save(record);
    await first.keepDelivery(record);
    Object.assign(record.webhook!, { state: 'delivered', attempts: 1, lastStatusCode: 200 });
    first.save(record);
    await lose(first);

    const back = await startCollector(port);
    const second = await openShipper(back.url, dataDir);
    try {
      expect(owedBy(second)).toEqual([]);
      await second.flush();
      expect(await results.store.getRun('demo', APP, record.id)).toMatchObject({ status: 'success', webhook: { state: 'delivered', attempts: 1 } });
    } finally {
      await second.close();
      await back.app.close();
    }
  });

  it('hands the next sidecar a finished run\'s interrupted delivery with its body and signer, and fails the unfinished ones', async () => {
    const { first, dataDir, port } = await shipperWithCollectorAway();
    const delivering = await acceptedRun(first);
    const running = await acceptedRun(first);
    Object.assign(running, { status: 'running', startedAt: new Date().toISOString() });
    first.save(running);
    finish(delivering);
    first.save(delivering);
    const body = JSON.stringify({ run_id: delivering.id, status: 'success', result: 42 });
    pendingDelivery(delivering.webhook)!.body = body;
    await first.keepDelivery(delivering);
    await lose(first);

    const back = await startCollector(port);
    const second = await openShipper(back.url, dataDir);
    try {
      const owed = owedBy(second);
      expect(owed.map((run) => [run.id, run.status, run.reason])).toEqual([
        [delivering.id, 'success', null],
        [running.id, 'failure', 'replica_lost'],
      ]);
      const kept = pendingDelivery(owed[0]!.webhook)!;
      expect(kept).toMatchObject({ destination: DESTINATION, body });
      expect(kept.signer!.sign(delivering.id, 1, body)).toBe(new WebhookSigner(SECRET).sign(delivering.id, 1, body));
      expect(pendingDelivery(owed[1]!.webhook)).toMatchObject({ destination: DESTINATION });
      expect(pendingDelivery(owed[1]!.webhook)!.signer).not.toBeNull();
      await second.flush();
      expect(await results.store.getRun('demo', APP, running.id)).toMatchObject({ status: 'failure', reason: 'replica_lost', webhook: { state: 'pending' } });
    } finally {
      await second.close();
      await back.app.close();
    }
  });

  it('keeps a finished run\'s kept result across a kill while the collector is away: collected with it after the restart', async () => {
    const { first, dataDir, port } = await shipperWithCollectorAway();
    const record = pendingAsyncRunRecord({ appName: APP });
    await first.saveDurably(record);
    finish(record);
    keepResult(record, { statusCode: 200, success: true, resultJson: '{"answer":42}', error: null, runTimeMs: 5 }, { maxBytes: 1024, ttlSeconds: 3600 });
    first.save(record);
    await lose(first);

    const back = await startCollector(port);
    const second = await openShipper(back.url, dataDir);
    try {
      await second.flush();
      // The record the caller reads says the result is kept: it must be there.
      expect(await results.store.getRun('demo', APP, record.id)).toMatchObject({ status: 'success', resultKept: true, result: { answer: 42 } });
    } finally {
      await second.close();
      await back.app.close();
    }
  });

  it('lets go of each run once its final state is collected: a long run holds only its own entry', async () => {
    const collector = await startCollector();
    const dataDir = newDataDir();
    const store = await openShipper(collector.url, dataDir, 4096);
    try {
      const long = await acceptedRun(store);
      Object.assign(long, { status: 'running', startedAt: new Date().toISOString() });
      store.save(long);
      for (let i = 0; i < 100; i += 1) {
        const run = pendingAsyncRunRecord({ appName: APP });
        await store.saveDurably(run);
        finish(run);
        store.save(run);
      }
      await store.flush();
      const journal = join(dataDir, RUNLOG_JOURNAL_FILE_NAME);
      // A hundred runs' entries are ~100 KB: let go of, the file is back within its bound, the long run in it.
      await waitFor(() => statSync(journal).size <= 8192, { what: `the journal compacted (now ${statSync(journal).size} bytes)` });
    } finally {
      await store.close();
      await collector.app.close();
    }
  });
});
