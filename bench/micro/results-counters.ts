// App.status.runs from the results store, on a real PostgreSQL (Debian's, started here with durable commits):
// what reading one App's counters costs at ROWS runs of that App — counted again by an aggregate over its index
// (the store's first design), or read from the counters its writes keep (migration 0003) — and what keeping
// them costs the writes: records a second through writeBatch with the counting triggers on and off, in
// alternating rounds. Not part of `make test` or `make bench` (seeding takes minutes):
//
//   npm run bench:results-counters [-- ROWS]        (default 3,000,000)
import { loadavg } from 'node:os';
import { v7 as uuidv7 } from 'uuid';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { openResults } from '../../results/open.ts';
import { testLogger } from '../../test/support/logger.ts';
import { startPostgres } from '../../test/support/postgres.ts';
import { failedAsyncRunRecord, pendingAsyncRunRecord, runRecord } from '../../test/support/sqlite-run-records.ts';

const ROWS = Number(process.argv[2] ?? 3_000_000);
const SEED_CHUNK = 500_000;
const READS = 5;
const ROUNDS = 4;
const ROUND_RECORDS = 20_000;
const BATCH = 1000;
const WRITERS = 4;

const median = (samples: number[]): number => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)]!;

const server = await startPostgres({ durable: true });
const results = await openResults({ dsn: server.dsn(await server.createDatabase('bench')), logger: testLogger(), maxConnections: WRITERS + 1 });
try {
  // ROWS runs of one app, one a millisecond, a tenth failed: seeded by SQL, counted by the insert trigger.
  const BASE_MS = Date.parse('2026-01-01T00:00:00.000Z');
  const seeding = performance.now();
  for (let from = 0; from < ROWS; from += SEED_CHUNK) {
    await results.pool.query(
      `INSERT INTO runlet_runs (id, project_id, app_name, function_name, async, status, created_at, replica, version, unfinished, record)
       SELECT id, 'demo', 'bench', 'run', false, st, at, 'bench-pod', 2199023255552, false,
              json_build_object('id', id::text, 'projectId', 'demo', 'appName', 'bench', 'functionName', 'run', 'method', 'POST',
                'mode', 'sync', 'async', false, 'status', st, 'statusCode', 200, 'error', null, 'reason', null,
                'createdAt', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'startedAt', null, 'completedAt', null,
                'queueTimeMs', 0.4, 'runtimeMs', 12.5, 'responseTimeMs', 13.1, 'replica', 'bench-pod-7d9f-abcde', 'webhook', null)
         FROM (SELECT i, to_timestamp(($1::bigint + i) / 1000.0) AS at,
                      (lpad(to_hex($1::bigint + i), 12, '0') || '70008000' || lpad(to_hex(i), 12, '0'))::uuid AS id,
                      CASE WHEN i % 10 = 0 THEN 'failure' ELSE 'success' END AS st
                 FROM generate_series($2::int, least($2::int + ${SEED_CHUNK - 1}, $3::int - 1)) AS i) AS seed`,
      [BASE_MS, from, ROWS],
    );
  }
  await results.pool.query('VACUUM ANALYZE runlet_runs');
  console.log(`seeded ${ROWS} runs of one app in ${((performance.now() - seeding) / 1000).toFixed(0)} s`);

  const aggregate = async (): Promise<number> => {
    const started = performance.now();
    await results.pool.query(
      `SELECT count(*), count(*) FILTER (WHERE status = 'success'), count(*) FILTER (WHERE status = 'failure'),
              count(*) FILTER (WHERE status IN ('pending', 'running')), max(created_at)
         FROM runlet_runs WHERE project_id = 'demo' AND app_name = 'bench'`,
    );
    return performance.now() - started;
  };
  const kept = async (): Promise<number> => {
    const started = performance.now();
    await results.store.allRunCounts();
    return performance.now() - started;
  };
  const aggregates: number[] = [];
  const reads: number[] = [];
  for (let i = 0; i < READS; i++) {
    aggregates.push(await aggregate());
    reads.push(await kept());
  }
  console.log(`one App's counters at ${ROWS} runs: aggregate over its index, median of ${READS}: ${median(aggregates).toFixed(1)} ms; kept counters (every App's row): ${median(reads).toFixed(2)} ms`);
  console.log(`the kept counters agree with the aggregate: ${JSON.stringify(await results.store.countRuns('demo', 'bench'))}`);

  // Writes with and without the counting triggers, alternating: realistic records, new runs and later states.
  const rate = async (counting: boolean): Promise<number> => {
    await results.pool.query(`ALTER TABLE runlet_runs ${counting ? 'ENABLE' : 'DISABLE'} TRIGGER USER`);
    const batches: RunRecord[][] = [];
    for (let b = 0; b < ROUND_RECORDS / BATCH; b++) {
      batches.push(Array.from({ length: BATCH }, (_, i) => (i % 10 === 0 ? failedAsyncRunRecord({ id: uuidv7(), appName: 'writes' }) : i % 10 === 1 ? pendingAsyncRunRecord({ id: uuidv7(), appName: 'writes' }) : runRecord({ id: uuidv7(), appName: 'writes' }))));
    }
    // Half the rounds' records come again in a later state: the update trigger's share.
    const later = batches.slice(0, batches.length / 2).map((batch) => batch.map((run) => (run.status === 'pending' ? { ...run, status: 'success' as const, statusCode: 200 } : run)));
    const started = performance.now();
    let next = 0;
    const all = [...batches, ...later];
    await Promise.all(
      Array.from({ length: WRITERS }, async () => {
        while (next < all.length) await results.store.writeBatch(all[next++]!);
      }),
    );
    return (ROUND_RECORDS * 1.5) / ((performance.now() - started) / 1000);
  };
  const withCounting: number[] = [];
  const without: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    without.push(await rate(false));
    withCounting.push(await rate(true));
  }
  console.log(`records/s through writeBatch (batches of ${BATCH}, ${WRITERS} connections, medians of ${ROUNDS} alternating rounds): counting ${Math.round(median(withCounting))}, not counting ${Math.round(median(without))}`);
  console.log(`  rounds counting: ${withCounting.map(Math.round).join(', ')}; not counting: ${without.map(Math.round).join(', ')}`);
  console.log(`load average during the run: ${loadavg().map((load) => load.toFixed(1)).join(' ')} (2 cores, shared)`);
} finally {
  await results.close();
  await server.stop();
}
