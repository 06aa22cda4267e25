// Per-namespace quotas of the results store (results/namespace-quotas.ts), against a real PostgreSQL: the
// collector (fastify, as the operator serves it) over real HTTP on loopback, each batch sent with the token of
// the pod that ran its App's records (test/support/results-tokens.ts); the sidecar's shipper; the usage the writes keep (migration 0007) under concurrent batches,
// retention and expiry; and the operator's metrics of it. On the code before, nothing bounded a namespace: the
// refusals below were writes.
import Fastify, { type FastifyInstance } from 'fastify';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { Registry } from 'prom-client';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { RunRecord, RunRecordWithResult } from '../../crds/run-record-schema.ts';
import { OperatorMetrics } from '../../operator/metrics.ts';
import { ResultsUsageReader } from '../../operator/results-usage.ts';
import { resultsCollector, type CollectorAnswer } from '../../results/collector.ts';
import { migrate } from '../../results/migrate.ts';
import { NamespaceQuotas, type QuotaLimits } from '../../results/namespace-quotas.ts';
import { NamespaceUsageReader } from '../../results/namespace-usage.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { PgResults } from '../../results/pg-results.ts';
import { ResultsShipperStore } from '../../sidecar/runs/results-shipper-store.ts';
import { RunLogJournal } from '../../sidecar/runs/runlog-journal.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { identifyTestToken, resultsTokenOf, writeResultsToken } from '../support/results-tokens.ts';
import { pendingAsyncRunRecord, runRecord } from '../support/sqlite-run-records.ts';
import { waitFor } from '../support/wait.ts';

const NO_LIMITS: QuotaLimits = { runs: null, recordBytes: null, keptResultBytes: null };
/** The App whose pod sends a batch: its records' (a batch holds one App's, as one pod sends it); `app` for an empty one. */
const appOfBatch = (records: unknown[]) => (records[0] as { appName?: string } | undefined)?.appName ?? 'app';

let server: PostgresServer;
let results: OpenResults;
const closers: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  server = await startPostgres();
  results = await openResults({ dsn: server.dsn(await server.createDatabase('quotas')), logger: testLogger() });
});

afterAll(async () => {
  for (const close of closers.reverse()) await close();
  await results?.close();
  await server?.stop();
});

/** A collector whose every namespace has `defaults` as its quotas; the log lines it writes at warn and above. */
async function startCollector(defaults: Partial<QuotaLimits>): Promise<{ url: string; post: (namespace: string, records: unknown[]) => Promise<CollectorAnswer>; logged: () => Record<string, unknown>[] }> {
  const lines: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
  const quotas = new NamespaceQuotas({ defaults: { ...NO_LIMITS, ...defaults }, usage: results.usage, logger });
  const app: FastifyInstance = Fastify();
  await app.register(resultsCollector, { store: results.store, identify: identifyTestToken, quotas });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  closers.push(() => app.close());
  return {
    url,
    async post(namespace, records) {
      const body = Buffer.from(JSON.stringify({ records }));
      const response = await fetch(`${url}/v1/results/${namespace}/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${resultsTokenOf(appOfBatch(records), 'test-host', namespace)}` },
        body,
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
      return JSON.parse(text) as CollectorAnswer;
    },
    logged: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

function finished(pending: RunRecord): RunRecord {
  return { ...pending, status: 'success', statusCode: 200, startedAt: pending.createdAt, completedAt: pending.createdAt };
}

/** A finished run keeping `result` (its JSON text is `bytes` long). */
function withKeptResult(projectId: string, bytes: number): RunRecordWithResult {
  const result = 'r'.repeat(bytes - 2);
  return { ...runRecord({ projectId, appName: 'keeps', resultKept: true, resultExpiresAt: new Date(Date.now() + 3_600_000).toISOString() }), result };
}

const bytesOf = (record: RunRecord) => Buffer.byteLength(JSON.stringify(record));

describe('a namespace at its results store quota', () => {
  it('of runs: its new runs are refused naming the quota and the figures, an accepted run\'s final record still lands, another namespace is unaffected', async () => {
    const collector = await startCollector({ runs: 3 });
    const full = Array.from({ length: 3 }, () => pendingAsyncRunRecord({ projectId: 'quota-runs-a', appName: 'app' }));
    const first = await collector.post('quota-runs-a', full);
    expect(first).toMatchObject({ received: 3, written: 3, refused: [] });
    // At its quota now: the answer says so, for the sidecar to refuse its async calls before accepting them.
    expect(first.newRunsRefused).toMatch(/namespace quota-runs-a is at its results store quota of 3 runs \(it keeps 3\)/);

    const extra = pendingAsyncRunRecord({ projectId: 'quota-runs-a', appName: 'app' });
    const second = await collector.post('quota-runs-a', [extra, finished(full[0]!), finished(full[2]!)]);
    expect(second.refused).toEqual([{ index: 0, id: extra.id, quota: 'runs', reason: expect.stringContaining('quota of 3 runs (it keeps 3)') }]);
    expect(second.refused[0]!.reason).toContain('results.maxRunsPerNamespace');
    expect(second.written).toBe(2);
    expect(await results.store.getRun('quota-runs-a', 'app', extra.id)).toBeUndefined();
    expect(await results.store.getRun('quota-runs-a', 'app', full[0]!.id)).toMatchObject({ status: 'success' });
    expect(await results.store.getRun('quota-runs-a', 'app', full[2]!.id)).toMatchObject({ status: 'success' });
    expect(await results.usage.usageOf('quota-runs-a')).toMatchObject({ runs: 3 });
    // Logged, with the namespace, the quota and the runs refused.
    expect(collector.logged()).toContainEqual(expect.objectContaining({ level: 40, namespace: 'quota-runs-a', quota: 'runs', runs: [extra.id], msg: expect.stringContaining('quota of 3 runs') }));

    // Another namespace, under the same quota, keeps its own count.
    const other = Array.from({ length: 3 }, () => pendingAsyncRunRecord({ projectId: 'quota-runs-b', appName: 'app' }));
    expect(await collector.post('quota-runs-b', other)).toMatchObject({ written: 3, refused: [] });
    // An empty batch (the sidecar's question) is answered with the state.
    expect((await collector.post('quota-runs-a', [])).newRunsRefused).toContain('quota of 3 runs');
  });

  it('of record bytes: the run that would go past it is refused, and the bytes counted are those written', async () => {
    const runs = Array.from({ length: 3 }, (_, i) => runRecord({ projectId: 'quota-bytes-a', appName: 'app', functionName: `f${i}` }));
    const limit = bytesOf(runs[0]!) + bytesOf(runs[1]!) + 10;
    const collector = await startCollector({ recordBytes: limit });
    const answer = await collector.post('quota-bytes-a', runs);
    expect(answer.refused).toEqual([{ index: 2, id: runs[2]!.id, quota: 'recordBytes', reason: expect.stringMatching(/quota of 0\.0 MiB of run records \(it keeps 0\.0 MiB, \d+ bytes\)/) }]);
    expect(answer.newRunsRefused).toBeDefined();
    // What the collector measured is what the database keeps: byte for byte.
    expect(await results.usage.usageOf('quota-bytes-a')).toEqual({ runs: 2, recordBytes: bytesOf(runs[0]!) + bytesOf(runs[1]!), keptResultBytes: 0 });
    const elsewhere = Array.from({ length: 2 }, (_, i) => runRecord({ projectId: 'quota-bytes-b', appName: 'app', functionName: `f${i}` }));
    expect(await collector.post('quota-bytes-b', elsewhere)).toMatchObject({ written: 2, refused: [] });
  });

  it('of record bytes, for later states: one growing its record is written with its long texts cut, and past the quota\'s margin refused, so rewrites cannot grow a namespace without bound', async () => {
    const limit = 100_000;
    const collector = await startCollector({ recordBytes: limit });
    // Pending runs up to just under the quota.
    const pending: RunRecord[] = [];
    let bytes = 0;
    for (;;) {
      const run = pendingAsyncRunRecord({ projectId: 'quota-later-a', appName: 'app' });
      if (bytes + bytesOf(run) > limit) break;
      pending.push(run);
      bytes += bytesOf(run);
    }
    expect(await collector.post('quota-later-a', pending)).toMatchObject({ written: pending.length, refused: [] });
    // A run that failed with a long message: its outcome is kept, its message cut.
    const failed: RunRecord = { ...finished(pending[0]!), status: 'failure', statusCode: 500, error: { type: 'ValueError', message: 'm'.repeat(20_000) } };
    expect(await collector.post('quota-later-a', [failed])).toMatchObject({ written: 1, refused: [] });
    const stored = await results.store.getRun('quota-later-a', 'app', failed.id);
    expect(stored).toMatchObject({ status: 'failure', statusCode: 500, error: { type: 'ValueError' } });
    expect(stored!.error!.message).toMatch(/^m{4096}… \(cut from 20000 characters: the namespace is at its results store quota of run records\)$/);
    // Rewrites growing records by what no cut can take back (a long function name) are refused past the margin.
    const rewrites = pending.slice(1, 4).map((run) => ({ ...run, status: 'running' as const, startedAt: run.createdAt, functionName: 'f'.repeat(9_000) }));
    const answer = await collector.post('quota-later-a', rewrites);
    expect(answer.refused.length).toBeGreaterThanOrEqual(2);
    expect(answer.refused[0]).toMatchObject({ quota: 'recordBytes', reason: expect.stringContaining('a later state of run') });
    const { recordBytes } = await results.usage.usageOf('quota-later-a');
    expect(recordBytes).toBeLessThanOrEqual(limit + limit / 10);
    expect(await results.store.getRun('quota-later-a', 'app', rewrites.at(-1)!.id)).toMatchObject({ status: 'pending', functionName: 'run' });
    // A plain final state (a few bytes more than its pending one) is still written.
    const done = finished(pending[5]!);
    expect(await collector.post('quota-later-a', [done])).toMatchObject({ written: 1, refused: [] });
    expect(collector.logged()).toContainEqual(expect.objectContaining({ level: 50, namespace: 'quota-later-a', msg: expect.stringContaining('later states of runs refused') }));
  });

  it('of kept-result bytes: records are written without their result, marked not kept, nothing refused; a result kept already stays', async () => {
    const collector = await startCollector({ keptResultBytes: 1000 });
    const kept = withKeptResult('quota-results-a', 800);
    const over = withKeptResult('quota-results-a', 800);
    const answer = await collector.post('quota-results-a', [kept, over]);
    expect(answer).toMatchObject({ written: 2, refused: [] });
    expect(answer.newRunsRefused).toBeUndefined();
    expect(await results.store.getRun('quota-results-a', 'keeps', kept.id)).toMatchObject({ resultKept: true, result: kept.result });
    const dropped = await results.store.getRun('quota-results-a', 'keeps', over.id);
    expect(dropped).toMatchObject({ resultKept: false });
    expect(dropped).not.toHaveProperty('result');
    expect(dropped).not.toHaveProperty('resultExpiresAt');
    expect(await results.usage.usageOf('quota-results-a')).toMatchObject({ runs: 2, keptResultBytes: 800 });
    // A later state of the run whose result is kept (a webhook attempt carries its result again) keeps it.
    const attempt = { ...kept, webhook: { endpoint: 'https://hooks.example.com/a', state: 'failed' as const, attempts: 1, lastStatusCode: 500, lastError: 'HTTP 500' } };
    expect(await collector.post('quota-results-a', [attempt])).toMatchObject({ written: 1, refused: [] });
    expect(await results.store.getRun('quota-results-a', 'keeps', kept.id)).toMatchObject({ resultKept: true, result: kept.result, webhook: { attempts: 1 } });
    expect(collector.logged()).toContainEqual(expect.objectContaining({ namespace: 'quota-results-a', quota: 'keptResultBytes', msg: expect.stringContaining('kept results dropped') }));
    // Another namespace keeps its results.
    const elsewhere = withKeptResult('quota-results-b', 800);
    await collector.post('quota-results-b', [elsewhere]);
    expect(await results.store.getRun('quota-results-b', 'keeps', elsewhere.id)).toMatchObject({ resultKept: true, result: elsewhere.result });
  });
});

describe('the sidecar of a namespace at its quota', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function shipper(url: string, namespace: string, registry = new Registry()): Promise<ResultsShipperStore> {
    const dataDir = mkdtempSync(join(tmpdir(), 'runlet-quota-shipper-'));
    dirs.push(dataDir);
    const store = new ResultsShipperStore({
      collectorUrl: url,
      namespace,
      // The pod of App `app` that ran the records (their replica, test-host).
      tokenFile: writeResultsToken(dataDir, 'app', 'test-host', namespace),
      journal: await RunLogJournal.open({ dataDir, logger: testLogger() }),
      logger: testLogger(),
      registry,
      intervalMs: 10,
      retryInitialMs: 20,
      retryMaxMs: 100,
      quotaRecheckMs: 100,
    });
    closers.push(() => store.close());
    return store;
  }

  it('refuses async runs 507 run-store-quota-exceeded naming the quota once the collector says so, asks again, and takes them once space is freed', async () => {
    const collector = await startCollector({ runs: 2 });
    const registry = new Registry();
    const full = await shipper(collector.url, 'quota-ship-a', registry);
    const free = await shipper(collector.url, 'quota-ship-b');
    const first = pendingAsyncRunRecord({ projectId: 'quota-ship-a', appName: 'app' });
    await full.saveDurably(first);
    await full.flush();
    // The one that fills it: accepted and written, and its final state too.
    const filling = pendingAsyncRunRecord({ projectId: 'quota-ship-a', appName: 'app' });
    await full.saveDurably(filling);
    await full.flush();
    full.save(finished(filling));
    await full.flush();
    expect(await results.store.getRun('quota-ship-a', 'app', filling.id)).toMatchObject({ status: 'success' });

    const refused = await full.saveDurably(pendingAsyncRunRecord({ projectId: 'quota-ship-a', appName: 'app' })).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ProblemError);
    expect((refused as ProblemError).spec).toBe(Problems.runStoreQuotaExceeded);
    expect((refused as ProblemError).message).toContain('quota of 2 runs (it keeps 2)');
    // Sync runs are still served: their records are refused by the collector, counted as dropped for the quota.
    full.save(runRecord({ projectId: 'quota-ship-a', appName: 'app' }));
    await full.flush();
    const dropped = await registry.getSingleMetric('runlet_run_records_dropped_total')!.get();
    expect(dropped.values.find((value) => value.labels.reason === 'quota')?.value).toBe(1);

    // Another namespace's sidecar is not affected.
    const elsewhere = pendingAsyncRunRecord({ projectId: 'quota-ship-b', appName: 'app' });
    await free.saveDurably(elsewhere);
    await free.flush();
    expect(await results.store.getRun('quota-ship-b', 'app', elsewhere.id)).toBeDefined();

    // Retention frees the namespace: the sidecar, asking again, takes async runs again.
    await results.pool.query("DELETE FROM runlet_runs WHERE project_id = 'quota-ship-a' AND id = $1", [first.id]);
    const later = pendingAsyncRunRecord({ projectId: 'quota-ship-a', appName: 'app' });
    await waitFor(() => full.saveDurably(later).then(() => true, () => false), { what: 'the sidecar to take async runs again', timeoutMs: 10_000, intervalMs: 50 });
    await full.flush();
    expect(await results.store.getRun('quota-ship-a', 'app', later.id)).toMatchObject({ status: 'pending' });
  });
});

describe('the usage the writes keep', () => {
  it('stays exact under concurrent batches, replays, retention deletes and result expiry', async () => {
    const pool = new pg.Pool({ connectionString: server.dsn(await server.createDatabase('usage-property')), max: 8 });
    closers.push(() => endPool(pool));
    await migrate(pool);
    const store = new PgResults(pool);
    const old = Date.parse('2020-01-01T00:00:00.000Z');
    const runArbitrary = fc.record({
      projectId: fc.constantFrom('ns-a', 'ns-b'),
      appName: fc.constantFrom('one', 'two'),
      aged: fc.boolean(),
      resultBytes: fc.option(fc.integer({ min: 2, max: 4000 }), { nil: undefined }),
      expired: fc.boolean(),
      states: fc.integer({ min: 1, max: 3 }),
      error: fc.string({ maxLength: 300 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(runArbitrary, { minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 15 }), async (runs, batchSize) => {
        // Each case from an empty store, so that a counterexample is the whole story (TRUNCATE fires no trigger).
        await pool.query('TRUNCATE runlet_runs, runlet_app_run_counts');
        const records = runs.flatMap((run) => {
          const createdAt = new Date(run.aged ? old : Date.now()).toISOString();
          const pending = pendingAsyncRunRecord({ id: uuidv7({ msecs: Date.parse(createdAt) }), projectId: run.projectId, appName: run.appName, createdAt });
          const end: RunRecordWithResult = {
            ...pending,
            status: 'failure',
            statusCode: 500,
            error: { type: 'Error', message: run.error },
            ...(run.resultBytes === undefined ? {} : { resultKept: true, resultExpiresAt: new Date(Date.now() + (run.expired ? -1000 : 3_600_000)).toISOString(), result: 'x'.repeat(run.resultBytes - 2) }),
          };
          return [pending, { ...pending, status: 'running' as const }, end].slice(3 - run.states);
        });
        // Every state twice, shuffled: retries, replays and overtaking batches.
        const shuffled = [...records, ...records].sort(() => Math.random() - 0.5);
        const batches: RunRecordWithResult[][] = [];
        for (let i = 0; i < shuffled.length; i += batchSize) batches.push(shuffled.slice(i, i + batchSize));
        let writing = true;
        const upkeep = (async () => {
          while (writing) {
            await store.pruneExpired({ defaultDays: 30, apps: [], batchSize: 7 });
            await store.dropExpiredResults({ batchSize: 7 });
          }
        })();
        try {
          await Promise.all(batches.map((batch) => store.writeBatch(batch)));
        } finally {
          writing = false;
          await upkeep;
        }
        expect(await keptUsage(pool)).toEqual(await measuredAgain(pool));
      }),
      { numRuns: 15 },
    );
  });
});

describe('the operator\'s metrics of the results store', () => {
  it('report the database\'s size, each namespace\'s usage and quotas, as last read', async () => {
    // A batch per App, as one pod sends it.
    const collector = await startCollector({});
    await collector.post('quota-metrics', [runRecord({ projectId: 'quota-metrics', appName: 'app' })]);
    await collector.post('quota-metrics', [withKeptResult('quota-metrics', 100)]);
    const metrics = new OperatorMetrics({ processMetrics: false });
    const reader = new ResultsUsageReader({ usage: results.usage, intervalMs: 60_000, logger: testLogger() });
    const quotas = new NamespaceQuotas({ defaults: { runs: 1000, recordBytes: 2 ** 30, keptResultBytes: null }, usage: results.usage, logger: testLogger() });
    metrics.observeResultsUsage(() => reader.last, (namespace) => quotas.limitsOf(namespace));
    // Nothing before the first read: no namespace, and the read's time 0.
    expect(await metrics.registry.metrics()).not.toContain('runlet_results_namespace_runs{');
    expect(await metrics.registry.metrics()).toMatch(/^runlet_results_usage_read_timestamp_seconds 0$/m);
    await reader.read();
    const text = await metrics.registry.metrics();
    const databaseBytes = Number(/^runlet_results_database_bytes (\d+)$/m.exec(text)?.[1]);
    expect(databaseBytes).toBeGreaterThan(1_000_000);
    const used = await results.usage.usageOf('quota-metrics');
    expect(text).toContain(`runlet_results_namespace_runs{namespace="quota-metrics"} 2`);
    expect(text).toContain(`runlet_results_namespace_record_bytes{namespace="quota-metrics"} ${used.recordBytes}`);
    expect(text).toContain(`runlet_results_namespace_kept_result_bytes{namespace="quota-metrics"} 100`);
    expect(text).toContain(`runlet_results_namespace_quota{namespace="quota-metrics",quota="runs"} 1000`);
    expect(text).not.toContain('quota="keptResultBytes"');
  });

  it('are read on an interval, not per scrape', async () => {
    let reads = 0;
    const counting = new NamespaceUsageReader(results.pool);
    const reader = new ResultsUsageReader({
      usage: { allUsage: () => counting.allUsage(), databaseBytes: () => ((reads += 1), counting.databaseBytes()) },
      intervalMs: 60_000,
      logger: testLogger(),
    });
    const metrics = new OperatorMetrics({ processMetrics: false });
    metrics.observeResultsUsage(() => reader.last, () => NO_LIMITS);
    reader.start();
    closers.push(() => reader.stop());
    await waitFor(() => reader.last !== undefined, { what: 'the first read' });
    for (let i = 0; i < 5; i++) await metrics.registry.metrics();
    expect(reads).toBe(1);
  });
});

/**
 * Ends a pool and waits for its sessions to close: pool.end() resolves as soon as it has asked them to, and one
 * still closing when PostgreSQL stops (right after) fails with 57P01, an unhandled error of the pool.
 */
async function endPool(pool: pg.Pool): Promise<void> {
  const open = pool.totalCount;
  let removed = 0;
  const closed = new Promise<void>((resolve) => {
    if (open === 0) resolve();
    pool.on('remove', () => {
      removed += 1;
      if (removed >= open) resolve();
    });
  });
  await pool.end();
  await closed;
}

/** The kept measure of every App. */
async function keptUsage(pool: pg.Pool): Promise<unknown[]> {
  const { rows } = await pool.query(
    `SELECT project_id, app_name, total::int AS runs, record_bytes::int, kept_result_bytes::int FROM runlet_app_run_counts
      WHERE total <> 0 OR record_bytes <> 0 OR kept_result_bytes <> 0 ORDER BY 1, 2`,
  );
  return rows;
}

/** The same, as an aggregate over the rows gives it: what the kept measure must equal. */
async function measuredAgain(pool: pg.Pool): Promise<unknown[]> {
  const { rows } = await pool.query(
    `SELECT project_id, app_name, count(*)::int AS runs, sum(octet_length(record::text))::int AS record_bytes,
            coalesce(sum(octet_length(result::text)), 0)::int AS kept_result_bytes
       FROM runlet_runs GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  return rows;
}
