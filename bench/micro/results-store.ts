// The results store on a real PostgreSQL (Debian's, started here with durable commits, as in production):
// records a second through writeBatch (batches of 1,000, as the shipper sends them, from 4 connections, as
// the collector's pool writes them), then list latency at ROWS rows of one app — the first page, pages at
// random depths, and filtered pages — and the bytes a row takes with its indexes. Not part of `make test` or
// `make bench` (seeding takes minutes):
//
//   npm run bench:results-store [-- ROWS]        (default 1,000,000)
import { loadavg } from 'node:os';
import { v7 as uuidv7 } from 'uuid';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import type { ListRunsQuery } from '../../management/run-source.ts';
import { openResults } from '../../results/open.ts';
import { testLogger } from '../../test/support/logger.ts';
import { startPostgres } from '../../test/support/postgres.ts';
import { failedAsyncRunRecord, runRecord } from '../../test/support/sqlite-run-records.ts';

const ROWS = Number(process.argv[2] ?? 1_000_000);
const WRITE_RECORDS = 200_000;
const BATCH = 1000;
const WRITERS = 4;
const QUERIES = 2000;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summary(samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  return `p50 ${percentile(sorted, 50).toFixed(2)} ms, p99 ${percentile(sorted, 99).toFixed(2)} ms`;
}

const server = await startPostgres({ durable: true });
const results = await openResults({ dsn: server.dsn(await server.createDatabase('bench')), logger: testLogger(), maxConnections: WRITERS + 1 });
try {
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

  // ROWS runs of one app, one a millisecond, a tenth failed, a quarter of function `train`.
  const BASE_MS = Date.parse('2026-01-01T00:00:00.000Z');
  const seeding = performance.now();
  for (let from = 0; from < ROWS; from += 500_000) {
    await results.pool.query(
      `INSERT INTO runlet_runs (id, project_id, app_name, function_name, async, status, created_at, replica, version, unfinished, record)
       SELECT id, 'demo', 'bench', fn, false, st, at, 'bench-pod', 2199023255552, false,
              json_build_object('id', id::text, 'projectId', 'demo', 'appName', 'bench', 'functionName', fn, 'method', 'POST',
                'mode', 'sync', 'async', false, 'status', st, 'statusCode', 200, 'error', null, 'reason', null,
                'createdAt', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'startedAt', null, 'completedAt', null,
                'queueTimeMs', 0.4, 'runtimeMs', 12.5, 'responseTimeMs', 13.1, 'replica', 'bench-pod-7d9f-abcde', 'webhook', null)
         FROM (SELECT i, to_timestamp(($1::bigint + i) / 1000.0) AS at,
                      (lpad(to_hex($1::bigint + i), 12, '0') || '70008000' || lpad(to_hex(i), 12, '0'))::uuid AS id,
                      CASE WHEN i % 4 = 0 THEN 'train' ELSE 'run' END AS fn,
                      CASE WHEN i % 10 = 0 THEN 'failure' ELSE 'success' END AS st
                 FROM generate_series($2::int, least($2::int + 499999, $3::int - 1)) AS i) AS seed`,
      [BASE_MS, from, ROWS],
    );
  }
  await results.pool.query('VACUUM ANALYZE runlet_runs');
  const { rows } = await results.pool.query<{ bytes: string; count: string }>("SELECT pg_total_relation_size('runlet_runs') AS bytes, count(*) AS count FROM runlet_runs");
  const bytes = Number(rows[0]!.bytes);
  const count = Number(rows[0]!.count);
  console.log(`seeded ${ROWS} rows in ${((performance.now() - seeding) / 1000).toFixed(0)} s; the table with its indexes: ${(bytes / 2 ** 20).toFixed(0)} MiB, ${Math.round(bytes / count)} bytes a row`);

  const base: ListRunsQuery = { projectId: 'demo', appName: 'bench', pageSize: 50, beforeId: null, asyncOnly: false, status: null, functionName: null, createdAfter: null, createdBefore: null };
  const randomCursor = (): string => {
    const i = Math.floor(Math.random() * ROWS);
    const hex = (BASE_MS + i).toString(16).padStart(12, '0') + '70008000' + i.toString(16).padStart(12, '0');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };
  const measure = async (name: string, query: () => ListRunsQuery): Promise<void> => {
    const samples: number[] = [];
    for (let q = 0; q < QUERIES; q++) {
      const at = performance.now();
      const page = await results.store.listRuns(query());
      samples.push(performance.now() - at);
      if (page.items.length === 0 && query().beforeId === null) throw new Error(`${name}: an empty first page`);
    }
    console.log(`list ${name} (${QUERIES} queries): ${summary(samples)}`);
  };
  await measure('first page of 50', () => base);
  await measure('a page of 50 at a random depth', () => ({ ...base, beforeId: randomCursor() }));
  await measure('a page of 500 at a random depth', () => ({ ...base, pageSize: 500, beforeId: randomCursor() }));
  await measure('status=failure at a random depth', () => ({ ...base, status: 'failure', beforeId: randomCursor() }));
  await measure('functionName=train, a one-hour window', () => ({ ...base, functionName: 'train', createdAfter: new Date(BASE_MS + 100_000).toISOString(), createdBefore: new Date(BASE_MS + 100_000 + 3_600_000).toISOString() }));
  await measure('a page of 1 at a random depth', () => ({ ...base, beforeId: randomCursor(), pageSize: 1 }));
  console.log(`load average during the run: ${loadavg().map((load) => load.toFixed(1)).join(' ')} (2 cores, shared)`);
} finally {
  await results.close();
  await server.stop();
}
