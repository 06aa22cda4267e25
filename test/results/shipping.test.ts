// Run records from a pod's sidecar to PostgreSQL: the shipper store (journal in a data dir, batches sent with a token) and
// the collector (fastify, as the operator serves it) over real HTTP on loopback, into a real PostgreSQL.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { MAX_BATCH_BYTES, MAX_BATCH_RECORDS } from '../../results/batch-limits.ts';
import { resultsCollector } from '../../results/collector.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { RESULT_KEEP_BYTES_MAX } from '../../crds/app-limits.ts';
import { keepResult } from '../../sidecar/runs/kept-result.ts';
import { ResultsShipperStore } from '../../sidecar/runs/results-shipper-store.ts';
import { RUNLOG_JOURNAL_FILE_NAME, RunLogJournal } from '../../sidecar/runs/runlog-journal.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { pendingAsyncRunRecord, runRecord } from '../support/sqlite-run-records.ts';
import { waitFor } from '../support/wait.ts';
import { listQuery } from '../support/list-query.ts';
import { identifyTestToken, resultsTokenOf, writeResultsToken } from '../support/results-tokens.ts';

const NAMESPACE = 'demo';
const SHIP_ONE_BATCH = join(import.meta.dirname, 'fixtures/ship-one-batch.ts');

let server: PostgresServer;
let results: OpenResults;
const dirs: string[] = [];

beforeAll(async () => {
  server = await startPostgres();
  results = await openResults({ dsn: server.dsn(await server.createDatabase('shipping')), logger: testLogger() });
});

afterAll(async () => {
  await results?.close();
  await server?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function startCollector(port = 0, maxBatchBytes?: number): Promise<{ app: FastifyInstance; url: string; port: number }> {
  const app = Fastify();
  await app.register(resultsCollector, { store: results.store, identify: identifyTestToken, maxBatchBytes });
  const address = await app.listen({ host: '127.0.0.1', port });
  return { app, url: address, port: Number(new URL(address).port) };
}

/** A shipper of App `appName`'s pod, as the sidecar opens it. */
async function openShipper(collectorUrl: string, appName: string, options: { maxBufferedRuns?: number; dataDir?: string; flushTimeoutMs?: number; registry?: Registry } = {}) {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'runlet-shipper-'));
  dirs.push(dataDir);
  const journal = await RunLogJournal.open({ dataDir, logger: testLogger() });
  const store = new ResultsShipperStore({
    collectorUrl,
    namespace: NAMESPACE,
    tokenFile: writeResultsToken(dataDir, appName),
    journal,
    logger: testLogger(),
    registry: options.registry ?? new Registry(),
    maxBufferedRuns: options.maxBufferedRuns,
    flushTimeoutMs: options.flushTimeoutMs,
    retryInitialMs: 20,
    retryMaxMs: 100,
  });
  return { store, dataDir };
}

async function stored(run: RunRecord): Promise<RunRecord | undefined> {
  return results.store.getRun(run.projectId, run.appName, run.id);
}

describe('the results shipper', () => {
  it('carries a kept result in the batch, beside its record: the get returns it, the list does not', async () => {
    const collector = await startCollector();
    const { store } = await openShipper(collector.url, 'keeps');
    try {
      const keeping = { maxBytes: 4096, ttlSeconds: 600 };
      const value = { text: 'a "}" \u00e9 \u{1F600} \u0000 end}', list: [1, null] };
      const kept = runRecord({ appName: 'keeps' });
      keepResult(kept, { statusCode: 200, success: true, resultJson: JSON.stringify(value), error: null, runTimeMs: 1 }, keeping);
      const tooLarge = runRecord({ appName: 'keeps' });
      keepResult(tooLarge, { statusCode: 200, success: true, resultJson: JSON.stringify('x'.repeat(5000)), error: null, runTimeMs: 1 }, keeping);
      const plain = runRecord({ appName: 'keeps' });
      for (const run of [kept, tooLarge, plain]) store.save(run);
      await waitFor(async () => (await stored(plain)) !== undefined && (await stored(kept)) !== undefined && (await stored(tooLarge)) !== undefined, { what: 'the records in PostgreSQL' });
      expect(await stored(kept)).toEqual({ ...kept, result: value });
      expect(await stored(tooLarge)).toEqual(tooLarge);
      expect(tooLarge.resultKept).toBe(false);
      expect(await stored(plain)).toEqual(plain);
      const page = await results.store.listRuns(listQuery(NAMESPACE, 'keeps', { pageSize: 10 }));
      expect(page.items.find((run) => run.id === kept.id)).toEqual(kept);
    } finally {
      await store.close();
      await collector.app.close();
    }
  });

  it('carries a record with the largest result an App may keep', async () => {
    const collector = await startCollector();
    const { store } = await openShipper(collector.url, 'keeps-large', { flushTimeoutMs: 60_000 });
    try {
      const large = runRecord({ appName: 'keeps-large' });
      const text = 'é'.repeat(RESULT_KEEP_BYTES_MAX / 2 - 8);
      keepResult(large, { statusCode: 200, success: true, resultJson: JSON.stringify(text), error: null, runTimeMs: 1 }, { maxBytes: RESULT_KEEP_BYTES_MAX, ttlSeconds: 600 });
      expect(large.resultKept).toBe(true);
      const beside = Array.from({ length: 20 }, () => runRecord({ appName: 'keeps-large' }));
      for (const run of [...beside, large]) store.save(run);
      await store.flush();
      expect(store.stats().refused).toBe(0);
      expect((await stored(large)) as unknown).toMatchObject({ resultKept: true, result: text });
      for (const run of beside) expect(await stored(run)).toEqual(run);
    } finally {
      await store.close();
      await collector.app.close();
    }
  });

  it('halves a batch the collector refuses for good until the record it cannot take is alone: it goes without its result, or is dropped and counted', async () => {
    const collector = await startCollector(0, 16 * 1024);
    const registry = new Registry();
    const { store } = await openShipper(collector.url, 'refused', { registry });
    try {
      const plain = Array.from({ length: 40 }, () => runRecord({ appName: 'refused' }));
      // Over the collector's limit with its result, under it without.
      const withResult = runRecord({ appName: 'refused' });
      keepResult(withResult, { statusCode: 200, success: true, resultJson: JSON.stringify('r'.repeat(20_000)), error: null, runTimeMs: 1 }, { maxBytes: 1024 * 1024, ttlSeconds: 600 });
      // Over it even alone.
      const tooLarge = runRecord({ appName: 'refused', status: 'failure', statusCode: 500, error: { type: 'ValueError', message: 'm'.repeat(20_000) } });
      for (const run of [...plain.slice(0, 20), withResult, tooLarge, ...plain.slice(20)]) store.save(run);
      await store.flush();
      for (const run of plain) expect(await stored(run)).toEqual(run);
      expect(await stored(withResult)).toMatchObject({ id: withResult.id, resultKept: false });
      expect(((await stored(withResult)) as { result?: unknown }).result).toBeUndefined();
      expect(await stored(tooLarge)).toBeUndefined();
      expect(store.stats().refused).toBe(1);
      const dropped = await registry.getSingleMetric('runlet_run_records_dropped_total')!.get();
      expect(dropped.values.find((value) => value.labels.reason === 'refused')?.value).toBe(1);

      // What comes after is not held up.
      const later = runRecord({ appName: 'refused' });
      store.save(later);
      await store.flush();
      expect(await stored(later)).toEqual(later);
    } finally {
      await store.close();
      await collector.app.close();
    }
  });

  it('brings every record to PostgreSQL in batches within about a second, in its latest state', async () => {
    const collector = await startCollector();
    const { store } = await openShipper(collector.url, 'shipped');
    try {
      const runs = Array.from({ length: 300 }, () => runRecord({ appName: 'shipped', status: 'running', completedAt: null }));
      const accepted = pendingAsyncRunRecord({ appName: 'shipped' });
      const started = performance.now();
      for (const run of runs) store.save(run);
      await store.saveDurably(accepted);
      for (const run of runs) {
        run.status = 'success';
        store.save(run);
      }
      await waitFor(async () => (await stored(runs.at(-1)!))?.status === 'success' && (await stored(accepted)) !== undefined, { what: 'the records in PostgreSQL' });
      // Saved within one interval: one batch, or two if the timer fired between the saves.
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(store.stats().batches).toBeLessThanOrEqual(2);
      for (const run of runs) expect(await stored(run)).toEqual(run);
      expect(await stored(accepted)).toEqual(accepted);
    } finally {
      await store.close();
      await collector.app.close();
    }
  });

  it('buffers while the collector is down, refuses async runs at its bound, then drains with nothing lost and nothing refused listed', async () => {
    const collector = await startCollector();
    const { store, dataDir } = await openShipper(collector.url, 'outage', { maxBufferedRuns: 20 });
    try {
      await collector.app.close();
      const accepted: RunRecord[] = [];
      const refused: RunRecord[] = [];
      for (let i = 0; i < 30; i++) {
        const run = pendingAsyncRunRecord({ appName: 'outage' });
        await store.saveDurably(run).then(
          () => accepted.push(run),
          (error: Error) => {
            expect(error.message).toMatch(/wait for the results collector \(the bound is 20\)/);
            refused.push(run);
          },
        );
      }
      expect(accepted).toHaveLength(20);
      expect(refused).toHaveLength(10);
      // A run accepted before the outage goes on to finish: its state is kept, past the bound.
      accepted[0]!.status = 'running';
      store.save(accepted[0]!);
      await waitFor(() => store.stats().lastError !== null, { what: 'a failed batch' });
      // The accepted runs are in the journal until collected.
      const journaled = readFileSync(join(dataDir, RUNLOG_JOURNAL_FILE_NAME), 'utf8');
      for (const run of accepted) expect(journaled).toContain(run.id);
      const back = await startCollector(collector.port);
      try {
        await store.flush();
        for (const run of accepted) expect(await stored(run)).toEqual(run);
        for (const run of refused) expect(await stored(run)).toBeUndefined();
        expect((await results.store.listRuns(listQuery(NAMESPACE, 'outage', { pageSize: 500 }))).items).toHaveLength(20);
        expect(store.stats()).toMatchObject({ buffered: 0, dropped: 0, lastError: null });
      } finally {
        await store.close();
        await back.app.close();
      }
    } finally {
      await store.close();
    }
  });

  it('shows its backlog on the metrics: records waiting while the collector is down, those dropped at the hard bound, none once drained', async () => {
    const collector = await startCollector();
    const registry = new Registry();
    const { store } = await openShipper(collector.url, 'backlog', { maxBufferedRuns: 5, registry });
    const metric = async (name: string): Promise<number> => (await registry.getSingleMetric(name)!.get()).values.reduce((sum, { value }) => sum + value, 0);
    try {
      await collector.app.close();
      // Past twice the bound (10), the oldest finished sync runs leave: 13 saved, 3 dropped.
      const runs = Array.from({ length: 13 }, () => runRecord({ appName: 'backlog' }));
      for (const run of runs) store.save(run);
      await waitFor(() => store.stats().lastError !== null, { what: 'a failed batch' });
      expect(await metric('runlet_run_records_buffered')).toBe(10);
      expect(await metric('runlet_run_records_dropped_total')).toBe(3);
      expect(store.stats()).toMatchObject({ buffered: 10, dropped: 3 });
      const back = await startCollector(collector.port);
      try {
        await store.flush();
        expect(await metric('runlet_run_records_buffered')).toBe(0);
        expect(await metric('runlet_run_records_dropped_total')).toBe(3);
        for (const run of runs.slice(3)) expect(await stored(run)).toEqual(run);
      } finally {
        await store.close();
        await back.app.close();
      }
    } finally {
      await store.close();
    }
  });

  it('reads its token again for each batch, as the kubelet rotates it: a refused token holds the records until a good one', async () => {
    const collector = await startCollector();
    const { store, dataDir } = await openShipper(collector.url, 'rotated');
    try {
      const tokenFile = join(dataDir, 'results-token');
      writeFileSync(tokenFile, 'an-expired-token\n');
      const run = runRecord({ appName: 'rotated' });
      store.save(run);
      await waitFor(() => store.stats().lastError?.includes('answered 401') === true, { what: 'the collector to refuse the expired token' });
      expect(store.stats()).toMatchObject({ buffered: 1, refused: 0 });
      expect(await stored(run)).toBeUndefined();
      writeFileSync(tokenFile, `${resultsTokenOf('rotated')}\n`);
      await store.flush();
      expect(await stored(run)).toEqual(run);
    } finally {
      await store.close();
      await collector.app.close();
    }
  });

  it('sends its batches without loading Node\'s fetch (its bundled undici is ~13 MB of a sidecar\'s RSS)', async () => {
    const collector = await startCollector();
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [SHIP_ONE_BATCH, collector.url, resultsTokenOf('no-fetch'), 'no-fetch'], { timeout: 60_000 });
      const shipped = JSON.parse(stdout) as { id: string; stats: { batches: number; buffered: number }; undici: string[] };
      expect(shipped.stats).toMatchObject({ batches: 1, buffered: 0 });
      expect(await results.store.getRun(NAMESPACE, 'no-fetch', shipped.id)).toMatchObject({ id: shipped.id, appName: 'no-fetch' });
      expect(shipped.undici).toEqual([]);
    } finally {
      await collector.app.close();
    }
  });

  it('of a sidecar restarted with runs not collected sends them, those it left unfinished as replica_lost', async () => {
    const collector = await startCollector();
    await collector.app.close();
    const first = await openShipper(collector.url, 'restarted', { flushTimeoutMs: 200 });
    const pending = pendingAsyncRunRecord({ appName: 'restarted' });
    await first.store.saveDurably(pending);
    // The first sidecar is gone without sending anything (its journal closed as a kill would leave it).
    await first.store.close();
    const back = await startCollector(collector.port);
    const second = await openShipper(back.url, 'restarted', { dataDir: first.dataDir });
    try {
      await second.store.flush();
      expect(await stored(pending)).toMatchObject({ id: pending.id, status: 'failure', reason: 'replica_lost' });
    } finally {
      await second.store.close();
      await back.app.close();
    }
  });
});

describe('the results collector', () => {
  let collector: Awaited<ReturnType<typeof startCollector>>;
  beforeAll(async () => {
    collector = await startCollector();
  });
  afterAll(async () => {
    await collector?.app.close();
  });

  const post = (body: string, options: { app?: string; namespace?: string } = {}) =>
    fetch(`${collector.url}/v1/results/${options.namespace ?? NAMESPACE}/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${resultsTokenOf(options.app ?? 'mixed')}` },
      body,
    });

  it('writes a batch once: sent again, it writes nothing', async () => {
    const body = JSON.stringify({ records: [runRecord({ appName: 'twice' }), runRecord({ appName: 'twice' })] });
    expect(await (await post(body, { app: 'twice' })).json()).toEqual({ received: 2, written: 2, refused: [] });
    expect(await (await post(body, { app: 'twice' })).json()).toEqual({ received: 2, written: 0, refused: [] });
  });

  it('refuses a batch without a token its collector takes, or for another namespace than its sender\'s', async () => {
    const run = runRecord({ appName: 'forged' });
    const body = JSON.stringify({ records: [run] });
    const unsigned = await fetch(`${collector.url}/v1/results/${NAMESPACE}/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(unsigned.status).toBe(401);
    const otherToken = await fetch(`${collector.url}/v1/results/${NAMESPACE}/runs`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer forged' }, body });
    expect(otherToken.status).toBe(401);
    expect((await post(body, { app: 'forged', namespace: 'other' })).status).toBe(403);
    expect(await stored(run)).toBeUndefined();
  });

  it('writes the valid records of a batch and names the others', async () => {
    const valid = runRecord({ appName: 'mixed' });
    const otherProject = runRecord({ appName: 'mixed', projectId: 'other' });
    const badTime = runRecord({ appName: 'mixed', createdAt: '2026-02-30T00:00:00.000Z' });
    const yearZero = runRecord({ appName: 'mixed', createdAt: '0000-01-01T00:00:00.000Z' });
    const otherApp = runRecord({ appName: 'other' });
    const otherPod = runRecord({ appName: 'mixed', replica: 'another-pod' });
    const answer = (await (await post(JSON.stringify({ records: [valid, otherProject, badTime, yearZero, { id: 'x' }, null, otherApp, otherPod] }))).json()) as {
      refused: { index: number; reason: string }[];
    };
    expect(answer).toMatchObject({ received: 8, written: 1 });
    expect(answer.refused.map((refusal) => refusal.index)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(answer.refused[0]!.reason).toBe('of project other, not demo');
    expect(answer.refused[5]!.reason).toBe('of app other, not mixed, whose pod test-host sent it');
    expect(answer.refused[6]!.reason).toBe('run by replica another-pod, not test-host, which sent it');
    expect(await stored(otherApp)).toBeUndefined();
    expect(await stored(valid)).toEqual(valid);
    expect(await stored(badTime)).toBeUndefined();
  });

  it('refuses bodies that are not a batch, or too large a one', async () => {
    expect((await post('not json')).status).toBe(400);
    expect((await post('{"records": {}}')).status).toBe(400);
    expect((await post(JSON.stringify({ records: Array(MAX_BATCH_RECORDS + 1).fill(null) }))).status).toBe(400);
    expect((await post('x'.repeat(MAX_BATCH_BYTES + 1))).status).toBe(413);
    expect((await post('{}', { namespace: 'Not_A_Namespace' })).status).toBe(403);
  });
});
