// The results store on a real PostgreSQL (Debian's, started here with durable commits, as in production):
// records a second through writeBatch (batches of 1,000, as the shipper sends them, from 4 connections, as
// the collector's pool writes them), then, at ROWS rows of one app (30 days of runs: a tenth failed, a quarter
// of function `train`, 2% async), the latency of every list shape the management API asks (first page, deep
// keyset pages, each filter, createdAfter/createdBefore windows) and of a get, with the plan PostgreSQL chose
// for each (EXPLAIN ANALYZE of the store's own statement: the index, the rows it read). Not part of `make test`
// or `make bench` (seeding 10 million rows takes minutes):
//
//   npm run bench:results-store [-- ROWS [--dsn URL]]   (default 1,000,000; --dsn: a database to use and keep,
//                                                      seeded only if it holds fewer than ROWS runs of the app)
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { Pool, QueryConfig } from 'pg';
import { v7 as uuidv7 } from 'uuid';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import type { ListRunsQuery } from '../../management/run-source.ts';
import { openResults } from '../../results/open.ts';
import { testLogger } from '../../test/support/logger.ts';
import { startPostgres, type PostgresServer } from '../../test/support/postgres.ts';
import { failedAsyncRunRecord, runRecord } from '../../test/support/sqlite-run-records.ts';

const { positionals, values: flags } = parseArgs({ allowPositionals: true, options: { dsn: { type: 'string' } } });
const ROWS = Number(positionals[0] ?? 1_000_000);
const WRITE_RECORDS = 200_000;
const BATCH = 1000;
const WRITERS = 4;
const QUERIES = 2000;
const SEED_CHUNK = 1_000_000;
const DAY_MS = 86_400_000;
const APP = { projectId: 'demo', appName: 'bench' };

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summary(samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  return `p50 ${percentile(sorted, 50).toFixed(2)} ms, p99 ${percentile(sorted, 99).toFixed(2)} ms`;
}

/** Runs `[from, to]` of the seed: run i was created at base + i × step (30 days over ROWS), its id a UUID v7 of that millisecond. */
const SEED = `
  INSERT INTO runlet_runs (id, project_id, app_name, function_name, async, status, created_at, replica, version, unfinished, record)
  SELECT id, 'demo', 'bench', fn, asy, st, at, 'bench-pod', 2199023255552, false,
         json_build_object('id', id::text, 'projectId', 'demo', 'appName', 'bench', 'functionName', fn, 'method', 'POST',
           'mode', CASE WHEN asy THEN 'async' ELSE 'sync' END, 'async', asy, 'status', st, 'statusCode', CASE WHEN st = 'failure' THEN 500 ELSE 200 END,
           'error', CASE WHEN st = 'failure' THEN json_build_object('type', 'ValueError', 'message', 'bad input') END,
           'reason', CASE WHEN st = 'failure' THEN 'function_error' END,
           'createdAt', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
           'startedAt', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
           'completedAt', to_char((at + interval '13 ms') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
           'queueTimeMs', 0.4, 'runtimeMs', 12.5, 'responseTimeMs', 13.1, 'replica', 'bench-pod-7d9f-abcde',
           'webhook', CASE WHEN asy THEN json_build_object('endpoint', 'https://hooks.example.com/runs', 'state', 'delivered', 'attempts', 1, 'lastStatusCode', 200, 'lastError', null) END)
    FROM (SELECT i, at, asy, fn, st,
                 (lpad(to_hex(ms), 12, '0') || '7' || lpad(to_hex(i % 4096), 3, '0') || '8' || lpad(to_hex(i), 15, '0'))::uuid AS id
            FROM (SELECT i, ms, to_timestamp(ms / 1000.0) AS at, i % 50 = 7 AS asy,
                         CASE WHEN i % 4 = 0 THEN 'train' ELSE 'run' END AS fn,
                         CASE WHEN i % 10 = 0 THEN 'failure' ELSE 'success' END AS st
                    FROM (SELECT i, $1::bigint + (i::bigint * $2::bigint) / 1000 AS ms FROM generate_series($3::bigint, $4::bigint) AS i) t0) t1) seed`;

/** The statements a pool ran, so the bench can EXPLAIN exactly what the store sent. */
function recordStatements(pool: Pool): { last(): QueryConfig | undefined } {
  let last: QueryConfig | undefined;
  const query = pool.query.bind(pool) as (config: QueryConfig) => Promise<unknown>;
  (pool as { query: unknown }).query = (config: QueryConfig) => {
    if (typeof config === 'object' && config !== null) last = config;
    return query(config);
  };
  return { last: () => last };
}

let server: PostgresServer | undefined;
const dsn = flags.dsn ?? (await (async () => {
  server = await startPostgres({ durable: true });
  return server.dsn(await server.createDatabase('bench'));
})());
const results = await openResults({ dsn, logger: testLogger(), maxConnections: WRITERS + 1 });
try {
  const held = await results.pool.query<{ count: string; newest: string | null }>(
    "SELECT count(*) AS count, max(created_at) AS newest FROM runlet_runs WHERE project_id = 'demo' AND app_name = 'bench'",
  );
  let newestMs = held.rows[0]!.newest === null ? Date.now() : Date.parse(held.rows[0]!.newest);
  if (Number(held.rows[0]!.count) < ROWS) {
    // Records a second: realistic records (a tenth failed async runs with a webhook), fresh ids, 4 writers.
    const batches: RunRecord[][] = [];
    for (let b = 0; b < WRITE_RECORDS / BATCH; b++) {
      batches.push(Array.from({ length: BATCH }, (_, i) => (i % 10 === 0 ? failedAsyncRunRecord({ id: uuidv7(), appName: 'writes' }) : runRecord({ id: uuidv7(), appName: 'writes' }))));
    }
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: WRITERS }, async () => {
        while (next < batches.length) await results.store.writeBatch(batches[next++]!);
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    console.log(`writes: ${WRITE_RECORDS} records in ${seconds.toFixed(1)} s: ${Math.round(WRITE_RECORDS / seconds)} records/s (batches of ${BATCH}, ${WRITERS} connections, durable commits)`);
    const replay = performance.now();
    await results.store.writeBatch(batches[0]!);
    console.log(`a replayed batch of ${BATCH}: ${(performance.now() - replay).toFixed(1)} ms, nothing written`);

    const seeding = performance.now();
    await results.pool.query("DELETE FROM runlet_runs WHERE project_id = 'demo' AND app_name = 'bench'");
    const now = Date.now();
    const stepMicroMs = Math.floor((30 * DAY_MS * 1000) / ROWS);
    for (let from = 0; from < ROWS; from += SEED_CHUNK) {
      await results.pool.query(SEED, [now - 30 * DAY_MS, stepMicroMs, from, Math.min(from + SEED_CHUNK, ROWS) - 1]);
    }
    await results.pool.query('VACUUM ANALYZE runlet_runs');
    newestMs = now - 30 * DAY_MS + Math.floor(((ROWS - 1) * stepMicroMs) / 1000);
    console.log(`seeded ${ROWS} rows in ${((performance.now() - seeding) / 1000).toFixed(0)} s`);
  }
  const { rows } = await results.pool.query<{ bytes: string; count: string }>("SELECT pg_total_relation_size('runlet_runs') AS bytes, count(*) AS count FROM runlet_runs");
  const bytes = Number(rows[0]!.bytes);
  const count = Number(rows[0]!.count);
  console.log(`the table: ${count} rows, with its indexes ${(bytes / 2 ** 30).toFixed(2)} GiB, ${Math.round(bytes / count)} bytes a row`);

  const ids = await results.pool.query<{ id: string }>(
    "SELECT id FROM runlet_runs TABLESAMPLE SYSTEM (0.1) WHERE project_id = 'demo' AND app_name = 'bench' LIMIT 5000",
  );
  const sampleIds = ids.rows.map((row) => row.id);
  const randomId = (): string => sampleIds[Math.floor(Math.random() * sampleIds.length)]!;
  const at = (daysAgo: number): string => new Date(newestMs - daysAgo * DAY_MS).toISOString();
  const base: ListRunsQuery = { ...APP, pageSize: 50, beforeId: null, asyncOnly: false, status: null, functionName: null, createdAfter: null, createdBefore: null };
  const statements = recordStatements(results.pool);

  const explain = async (): Promise<string> => {
    const statement = statements.last()!;
    const plan = await results.pool.query<{ 'QUERY PLAN': string }>({ text: `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ${statement.text}`, values: statement.values });
    return plan.rows
      .map((row) => row['QUERY PLAN'])
      .filter((line) => /Scan|Sort|Rows Removed|Index Cond|Heap Blocks|Buffers/.test(line))
      .map((line) => line.trim())
      .slice(0, 6)
      .join('; ');
  };
  const measure = async (name: string, run: () => Promise<unknown>): Promise<void> => {
    const samples: number[] = [];
    for (let q = 0; q < QUERIES; q++) {
      const started = performance.now();
      await run();
      samples.push(performance.now() - started);
    }
    console.log(`${name} (${QUERIES} queries): ${summary(samples)}\n    plan: ${await explain()}`);
  };
  const list = (name: string, query: () => ListRunsQuery): Promise<void> =>
    measure(`list ${name}`, async () => {
      const page = await results.store.listRuns(query());
      if (page.items.length > query().pageSize) throw new Error(`${name}: a page longer than asked`);
    });
  await list('first page of 50', () => base);
  await list('a page of 50 at a random depth', () => ({ ...base, beforeId: randomId() }));
  await list('a page of 500 at a random depth', () => ({ ...base, pageSize: 500, beforeId: randomId() }));
  await list('status=failure at a random depth', () => ({ ...base, status: 'failure', beforeId: randomId() }));
  await list('status=running (none)', () => ({ ...base, status: 'running' }));
  await list('functionName=train at a random depth', () => ({ ...base, functionName: 'train', beforeId: randomId() }));
  await list('asyncOnly at a random depth', () => ({ ...base, asyncOnly: true, beforeId: randomId() }));
  await list('asyncOnly, status=failure (none)', () => ({ ...base, asyncOnly: true, status: 'failure' }));
  await list('createdBefore 20 days ago', () => ({ ...base, createdBefore: at(20) }));
  await list('createdAfter 10 minutes ago', () => ({ ...base, createdAfter: at(10 / 1440) }));
  await list('createdAfter 10 days ago, at a random depth', () => ({ ...base, createdAfter: at(10), beforeId: randomId() }));
  await list('one hour, 20 days ago', () => ({ ...base, createdAfter: at(20), createdBefore: at(20 - 1 / 24) }));
  await list('one day, 20 days ago, status=failure', () => ({ ...base, status: 'failure', createdAfter: at(20), createdBefore: at(19) }));
  await list('functionName=train, one hour, 20 days ago', () => ({ ...base, functionName: 'train', createdAfter: at(20), createdBefore: at(20 - 1 / 24) }));
  await list('a page of 1 at a random depth', () => ({ ...base, beforeId: randomId(), pageSize: 1 }));
  await measure('get a run by id', async () => {
    if ((await results.store.getRun(APP.projectId, APP.appName, randomId())) === undefined) throw new Error('a sampled run was not found');
  });
  console.log(`load average during the run: ${loadavg().map((load) => load.toFixed(1)).join(' ')} (2 cores, shared)`);
} finally {
  await results.close();
  await server?.stop();
}
