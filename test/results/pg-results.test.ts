// What the PostgreSQL results store adds to the run history contract: batches that may arrive twice or out of
// order (a replay writes nothing; a later state is never overwritten by an earlier one), a schema migrated once
// by racing replicas, errors that name the database, and a million runs paged through while runs are written.
import pg, { type QueryConfig } from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { DEFAULT_HELD_CALL_TTL_MS } from '../../activator/holder.ts';
import { HELD_RUN_MAX_AGE_MS } from '../../run-request/auth/held-run.ts';
import { migrate, readMigrations } from '../../results/migrate.ts';
import { ID_LAG_MS, ID_LEAD_MS } from '../../results/pg-results.ts';
import { recordVersion } from '../../results/record-version.ts';
import { openResults, openResultsWhenReachable, type OpenResults } from '../../results/open.ts';
import { PgResults } from '../../results/pg-results.ts';
import { ProblemError } from '../../crds/problem.ts';
import { startTcpRelay } from '../support/tcp-relay.ts';
import { waitFor } from '../support/wait.ts';
import type { ListRunsQuery } from '../../management/run-source.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { failedAsyncRunRecord, pendingAsyncRunRecord, runRecord } from '../support/sqlite-run-records.ts';
import { listQuery } from '../support/list-query.ts';

let server: PostgresServer;
let results: OpenResults;

beforeAll(async () => {
  server = await startPostgres();
  results = await openResults({ dsn: server.dsn(await server.createDatabase('results')), logger: testLogger() });
});

afterAll(async () => {
  await results?.close();
  await server?.stop();
});

function query(appName: string, overrides: Partial<ListRunsQuery> = {}): ListRunsQuery {
  return listQuery('demo', appName, { pageSize: 500, ...overrides });
}

/** The row's transaction id: it changes whenever the row is written, even with the same values. */
async function rowVersion(id: string): Promise<string | undefined> {
  const { rows } = await results.pool.query<{ xmin: string }>('SELECT xmin::text FROM runlet_runs WHERE id = $1', [id]);
  return rows[0]?.xmin;
}

describe('the results store\'s batches', () => {
  it('write nothing when replayed', async () => {
    const runs = [runRecord({ appName: 'replay' }), pendingAsyncRunRecord({ appName: 'replay' })];
    expect(await results.store.writeBatch(runs)).toBe(2);
    const before = await rowVersion(runs[0]!.id);
    expect(await results.store.writeBatch(runs)).toBe(0);
    expect(await rowVersion(runs[0]!.id)).toBe(before);
  });

  it('never overwrite a later state with an earlier one, across batches and within one', async () => {
    const pending = pendingAsyncRunRecord({ appName: 'order', webhook: { endpoint: 'https://hooks.example.com/a', state: 'pending', attempts: 0, lastStatusCode: null, lastError: null } });
    const running: RunRecord = { ...pending, status: 'running', startedAt: '2025-01-02T03:04:05.700Z' };
    const finished: RunRecord = { ...running, status: 'success', statusCode: 200, completedAt: '2025-01-02T03:04:06.000Z' };
    const attempted: RunRecord = { ...finished, webhook: { ...finished.webhook!, attempts: 1, lastStatusCode: 503, lastError: 'HTTP 503' } };
    const delivered: RunRecord = { ...attempted, webhook: { ...attempted.webhook!, state: 'delivered', attempts: 2, lastStatusCode: 200, lastError: null } };
    await results.store.writeBatch([finished]);
    expect(await results.store.writeBatch([pending])).toBe(0);
    expect(await results.store.writeBatch([running, pending])).toBe(0);
    expect(await results.store.getRun('demo', 'order', pending.id)).toEqual(finished);
    expect(await results.store.writeBatch([delivered, attempted, running])).toBe(1);
    expect(await results.store.getRun('demo', 'order', pending.id)).toEqual(delivered);
    expect(await results.store.writeBatch([attempted])).toBe(0);
    expect((await results.store.listRuns(query('order', { status: 'success' }))).items).toEqual([delivered]);
  });

  it('take hostile text as data', async () => {
    const run = runRecord({ appName: "x'); DROP TABLE runlet_runs; --", functionName: '\u0000\uFFFF', error: { type: 'E', message: '\\u0000 "' } });
    expect(await results.store.writeBatch([run])).toBe(1);
    expect(await results.store.getRun('demo', run.appName, run.id)).toEqual(run);
    expect((await results.store.listRuns(query(run.appName, { functionName: run.functionName }))).items).toEqual([run]);
    expect((await results.store.listRuns(query(run.appName, { functionName: '\u0000' }))).items).toEqual([]);
  });
});

describe('the results schema', () => {
  it('is migrated once by replicas starting together, and recorded', async () => {
    const database = server.dsn(await server.createDatabase('race'));
    const opened = await Promise.all(Array.from({ length: 4 }, () => openResults({ dsn: database, logger: testLogger() })));
    try {
      expect(opened.map((one) => one.schemaVersion)).toEqual(Array(4).fill(readMigrations().length));
      const { rows } = await opened[0]!.pool.query('SELECT version, name FROM runlet_schema_migrations ORDER BY version');
      expect(rows).toEqual(readMigrations().map(({ version, name }) => ({ version, name })));
    } finally {
      await Promise.all(opened.map((one) => one.close()));
    }
  });

  it('of a newer runlet is refused, saying so', async () => {
    const pool = new pg.Pool({ connectionString: server.dsn(await server.createDatabase('newer')) });
    try {
      await migrate(pool);
      await pool.query("INSERT INTO runlet_schema_migrations (version, name) VALUES (999, '0999_future.sql')");
      await expect(migrate(pool)).rejects.toThrow(/schema version 999, newer than \d+ known to this runlet/);
    } finally {
      await pool.end();
    }
  });

  it('opened in the background: each use refused 503 run-store-unavailable until the database answers, then served', async () => {
    let up = false;
    const gate = await startTcpRelay(() => (up ? server.port : undefined));
    const database = await server.createDatabase('background');
    const opening = openResultsWhenReachable({ dsn: `postgresql://runlet:s3cret@127.0.0.1:${gate.port}/${database}`, logger: testLogger(), retryFirstMs: 50, retryMaxMs: 200 });
    try {
      const refused = await opening.store.listRuns(query('hello')).then(
        () => {
          throw new Error('listed before the store opened');
        },
        (caught: unknown) => caught as ProblemError,
      );
      expect(refused).toBeInstanceOf(ProblemError);
      expect(refused.status).toBe(503);
      expect(refused.spec.code).toBe('run-store-unavailable');
      expect(refused.headers).toEqual({ 'retry-after': '5' });
      expect(refused.detail).not.toContain('s3cret');
      await expect(opening.store.writeBatch([runRecord({ appName: 'hello' })])).rejects.toBeInstanceOf(ProblemError);
      const waiting = await waitFor(
        () => {
          const state = opening.state();
          return !state.open && state.waitingFor.includes('cannot be opened yet') && state;
        },
        { what: 'a failed try' },
      );
      expect(waiting.waitingFor).toContain(`127.0.0.1:${gate.port}/${database}`);
      up = true;
      await opening.opened;
      expect(opening.state()).toEqual({ open: true, schemaVersion: readMigrations().length });
      expect(await opening.store.listRuns(query('hello'))).toEqual({ items: [], hasMore: false });
    } finally {
      await opening.close();
      await gate.close();
    }
  });

  it('opened in the background and closed before the database answered: stops trying, and `opened` rejects', async () => {
    const gate = await startTcpRelay(() => undefined);
    const opening = openResultsWhenReachable({ dsn: `postgresql://runlet@127.0.0.1:${gate.port}/nowhere`, logger: testLogger(), retryFirstMs: 50 });
    await waitFor(
      () => {
        const state = opening.state();
        return !state.open && state.waitingFor.includes('cannot be opened yet');
      },
      { what: 'a failed try' },
    );
    await opening.close();
    await expect(opening.opened).rejects.toThrow(/closed before it could be opened/);
    await gate.close();
  });

  it('that cannot be reached fails the start, naming the database but not its password', async () => {
    const dsn = `postgresql://runlet:s3cret@127.0.0.1:${server.port}/no_such_database`;
    const error = await openResults({ dsn, logger: testLogger() }).then(
      () => new Error('opened a database that does not exist'),
      (caught: unknown) => caught as Error,
    );
    expect(error.message).toContain('127.0.0.1');
    expect(error.message).toContain('no_such_database');
    expect(error.message).not.toContain('s3cret');
    expect(String((error.cause as Error).message)).toMatch(/no_such_database/);
  });
});

/** The counters as an aggregate over the rows would give them: what the kept counters must equal. */
async function countedAgain(pool: pg.Pool): Promise<unknown[]> {
  const { rows } = await pool.query(
    `SELECT project_id, app_name, count(*)::int AS total, (count(*) FILTER (WHERE status = 'success'))::int AS success,
            (count(*) FILTER (WHERE status = 'failure'))::int AS failure,
            (count(*) FILTER (WHERE status IN ('pending', 'running')))::int AS in_flight, max(created_at) AS last_run_at
       FROM runlet_runs GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  return rows;
}

async function keptCounts(pool: pg.Pool): Promise<unknown[]> {
  const { rows } = await pool.query(
    `SELECT project_id, app_name, total::int, success::int, failure::int, in_flight::int, last_run_at
       FROM runlet_app_run_counts WHERE total <> 0 OR last_run_at IS NULL ORDER BY 1, 2`,
  );
  return rows;
}

/**
 * A batch written as a runlet before the counters (migration 0003) wrote it: the upsert alone (today's also
 * takes the counters' rows, which that schema lacks), the latest state of each run, in id order.
 */
async function writeAsBeforeCounters(pool: pg.Pool, records: RunRecord[]): Promise<void> {
  const latest = new Map<string, RunRecord>();
  for (const record of records) {
    const seen = latest.get(record.id);
    if (seen === undefined || recordVersion(seen) < recordVersion(record)) latest.set(record.id, record);
  }
  const rows = [...latest.values()].sort((a, b) => a.id.localeCompare(b.id));
  const column = <T>(of: (record: RunRecord) => T): T[] => rows.map(of);
  await pool.query(
    `INSERT INTO runlet_runs AS r (id, project_id, app_name, function_name, async, status, created_at, replica, version, unfinished, record)
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::text[], $7::timestamptz[], $8::text[], $9::bigint[], $10::boolean[], $11::json[])
     ON CONFLICT (id) DO UPDATE SET status = excluded.status, version = excluded.version, unfinished = excluded.unfinished, record = excluded.record
     WHERE r.version < excluded.version`,
    [
      column((r) => r.id), column((r) => r.projectId), column((r) => r.appName), column((r) => r.functionName), column((r) => r.async),
      column((r) => r.status), column((r) => r.createdAt), column((r) => r.replica), column(recordVersion),
      column((r) => r.status === 'pending' || r.status === 'running' || r.webhook?.state === 'pending'), column((r) => JSON.stringify(r)),
    ],
  );
}

/** The states of one async run, each a later version of the one before. */
function lifeOf(appName: string): RunRecord[] {
  const pending = pendingAsyncRunRecord({ appName });
  const running: RunRecord = { ...pending, status: 'running', startedAt: pending.createdAt };
  const finished: RunRecord = { ...running, status: Math.random() < 0.5 ? 'success' : 'failure', statusCode: 200, completedAt: pending.createdAt };
  return [pending, running, finished];
}

/** Batches of run states, shuffled and repeated: as retries, replays and two operator replicas deliver them. */
function shuffledBatches(runs: RunRecord[][], size: number): RunRecord[][] {
  const states = runs.flatMap((life) => [...life, ...life]).sort(() => Math.random() - 0.5);
  const batches: RunRecord[][] = [];
  for (let i = 0; i < states.length; i += size) batches.push(states.slice(i, i + size));
  return batches;
}

describe('one run id written by two projects (issue 31: run ids are not secret)', () => {
  const hook = (endpoint: string): RunRecord['webhook'] => ({ endpoint, state: 'pending', attempts: 0, lastStatusCode: null, lastError: null });
  const expiry = new Date(Date.now() + 3_600_000).toISOString();

  /** team-b's run as its pod records it, and team-a's record carrying the same id: its own status, webhook and result. */
  function runsOf(id: string) {
    const pending = pendingAsyncRunRecord({ id, projectId: 'team-b', appName: 'billing', webhook: hook('https://b.example.com/hook') });
    const finished = { ...pending, status: 'success' as const, statusCode: 200, startedAt: pending.createdAt, completedAt: pending.createdAt, resultExpiresAt: expiry, result: { owner: 'team-b' } };
    const forged = { ...runRecord({ id, projectId: 'team-a', appName: 'billing', mode: 'async', async: true, status: 'failure', statusCode: 500, webhook: hook('https://attacker.example.com/') }), resultExpiresAt: expiry, result: { owner: 'team-a' } };
    return { pending, finished, forged };
  }

  it.each([['team-b writes first', false], ['team-a writes first', true]])('stay two runs, neither touching the other (%s)', async (_order, attackerFirst) => {
    const id = uuidv7();
    const { pending, finished, forged } = runsOf(id);
    if (attackerFirst) expect(await results.store.writeBatch([forged])).toBe(1);
    expect(await results.store.writeBatch([pending])).toBe(1);
    if (!attackerFirst) expect(await results.store.writeBatch([forged])).toBe(1);
    // team-b's pending run is its own: team-a's record changed neither its status nor its webhook.
    expect(await results.store.getRun('team-b', 'billing', id)).toEqual(pending);
    // team-b's real outcome lands, with its result; team-a's row keeps its own.
    expect(await results.store.writeBatch([finished])).toBe(1);
    const { result: bResult, ...bRecord } = finished;
    expect(await results.store.getRun('team-b', 'billing', id)).toEqual({ ...bRecord, result: bResult });
    const { result: aResult, ...aRecord } = forged;
    expect(await results.store.getRun('team-a', 'billing', id)).toEqual({ ...aRecord, result: aResult });
    expect((await results.store.listRuns(listQuery('team-b', 'billing', { pageSize: 10 }))).items.filter((run) => run.id === id)).toEqual([bRecord]);
  });

  it('are each swept, pruned and expired as their own App\'s', async () => {
    const pool = new pg.Pool({ connectionString: server.dsn(await server.createDatabase('two-projects')), max: 2 });
    try {
      await migrate(pool);
      const store = new PgResults(pool);
      const old = '2020-01-01T00:00:00.000Z';
      const id = uuidv7({ msecs: Date.parse(old) });
      const a = pendingAsyncRunRecord({ id, projectId: 'team-a', appName: 'one', createdAt: old });
      const b = pendingAsyncRunRecord({ id, projectId: 'team-b', appName: 'one', createdAt: old });
      await store.writeBatch([a, b]);
      // The unfinished sweep pages by the whole key: a page of one finds both runs of the id.
      const first = await store.unfinishedRuns(null, 1);
      const second = await store.unfinishedRuns(first[0]!, 1);
      expect([...first, ...second].map((run) => run.projectId).sort()).toEqual(['team-a', 'team-b']);
      expect(await store.unfinishedRuns(second[0]!, 1)).toEqual([]);
      // Retention of team-a's App deletes team-a's run alone.
      expect(await store.pruneExpired({ defaultDays: 36_500, apps: [{ projectId: 'team-a', appName: 'one', days: 1 }], batchSize: 10 })).toBe(1);
      expect(await store.getRun('team-a', 'one', id)).toBeUndefined();
      expect(await store.getRun('team-b', 'one', id)).toEqual(b);
      expect(await store.countRuns('team-b', 'one')).toMatchObject({ total: 1, inFlight: 1 });
    } finally {
      await pool.end();
    }
  });
});

describe('the counters the results store keeps per App', () => {
  it('move with a run\'s states, not with its writes: an earlier state or a replay after a later one moves nothing', async () => {
    const [pending, running, finished] = lifeOf('counted-order');
    const count = () => results.store.countRuns('demo', 'counted-order');
    await results.store.writeBatch([finished!]);
    await results.store.writeBatch([pending!, running!]);
    await results.store.writeBatch([finished!, pending!]);
    expect(await count()).toMatchObject({ total: 1, inFlight: 0, [finished!.status]: 1 });
  });

  it('keep the newest run\'s time when retention deletes it', async () => {
    const run = runRecord({ appName: 'counted-pruned', createdAt: '2020-01-01T00:00:00.000Z', id: uuidv7({ msecs: Date.parse('2020-01-01T00:00:00.000Z') }) });
    await results.store.writeBatch([run]);
    await results.store.pruneExpired({ defaultDays: 36_500, apps: [{ projectId: 'demo', appName: 'counted-pruned', days: 1 }], batchSize: 100 });
    expect(await results.store.countRuns('demo', 'counted-pruned')).toEqual({ total: 0, success: 0, failure: 0, inFlight: 0, lastRunTime: run.createdAt });
  });

  it('add up exactly under concurrent, shuffled and replayed batches from many connections', async () => {
    const pool = new pg.Pool({ connectionString: server.dsn(await server.createDatabase('counted-busy')), max: 8 });
    try {
      await migrate(pool);
      const store = new PgResults(pool);
      const lives = Array.from({ length: 600 }, (_, i) => lifeOf(`busy-${i % 3}`));
      await Promise.all(shuffledBatches(lives, 25).map((batch) => store.writeBatch(batch)));
      const counts = await keptCounts(pool);
      expect(counts).toEqual(await countedAgain(pool));
      expect(counts.reduce((sum: number, row) => sum + (row as { total: number }).total, 0)).toBe(600);
      expect(counts.every((row) => (row as { in_flight: number }).in_flight === 0)).toBe(true);
    } finally {
      await pool.end();
    }
  });

  it('of a database that already holds runs are counted when it is migrated, while writers go on writing', async () => {
    const pool = new pg.Pool({ connectionString: server.dsn(await server.createDatabase('counted-migrated')), max: 6 });
    try {
      // The schema before the counters (0003_app_run_counts.sql).
      await migrate(pool, readMigrations().slice(0, 2));
      const earlier = Array.from({ length: 300 }, (_, i) => lifeOf(`old-${i % 2}`));
      await writeAsBeforeCounters(pool, earlier.flatMap((life) => life.slice(0, 1 + Math.floor(Math.random() * life.length))));
      // The replicas of the earlier runlet keep writing through the migration: states of the earlier runs and new runs.
      const later = Array.from({ length: 300 }, (_, i) => lifeOf(`old-${i % 2}`));
      const writing = Promise.all(shuffledBatches([...earlier, ...later], 20).map((batch) => writeAsBeforeCounters(pool, batch)));
      await migrate(pool);
      await writing;
      expect(await keptCounts(pool)).toEqual(await countedAgain(pool));
      expect(await new PgResults(pool).countRuns('demo', 'old-0')).toMatchObject({ total: 300, inFlight: 0 });
    } finally {
      await pool.end();
    }
  });
});

describe('the operator replicas the results store knows', () => {
  it('are seen within the window after their mark, unseen past it or once marked gone, and forgotten after a day', async () => {
    await results.store.seeOperatorReplica('operator-x');
    await results.store.seeOperatorReplica('operator-y');
    expect((await results.store.operatorReplicas(60)).get('operator-x')).toEqual({ seen: true });
    // Marked long ago, as a replica killed a minute back would be.
    await results.pool.query("UPDATE runlet_operator_replicas SET seen_at = now() - interval '1 minute' WHERE identity = 'operator-y'");
    expect((await results.store.operatorReplicas(30)).get('operator-y')).toEqual({ seen: false });
    await results.store.markOperatorReplicaGone('operator-x');
    expect((await results.store.operatorReplicas(60)).get('operator-x')).toEqual({ seen: false });
    // Back under the same name (its pod's container restarted): seen again.
    await results.store.seeOperatorReplica('operator-x');
    expect((await results.store.operatorReplicas(60)).get('operator-x')).toEqual({ seen: true });
    await results.store.markOperatorReplicaGone('operator-x');
    // A replica unseen for a day is dropped by the next one to mark itself.
    await results.pool.query("UPDATE runlet_operator_replicas SET seen_at = now() - interval '25 hours' WHERE identity = 'operator-y'");
    await results.store.seeOperatorReplica('operator-z');
    expect([...(await results.store.operatorReplicas(60)).keys()].filter((identity) => identity !== 'operator-z')).toEqual([]);
  });
});

describe('the writers of the results store, all at once', () => {
  /**
   * A database whose deadlocks PostgreSQL finds at once (deadlock_timeout: a wait is checked for a cycle after
   * 10 ms rather than 1 s, so a test that meets them meets many), and a pool of 8 connections on it.
   */
  async function busyDatabase(name: string): Promise<{ pool: pg.Pool; store: PgResults; deadlocks: () => Promise<number> }> {
    const database = await server.createDatabase(name);
    await results.pool.query(`ALTER DATABASE "${database}" SET deadlock_timeout = '10ms'`);
    const pool = new pg.Pool({ connectionString: server.dsn(database), max: 8 });
    await migrate(pool);
    // Every deadlock PostgreSQL broke in this database, whoever retried after it: counted by the server, read
    // once the pool's backends have exited (a backend hands its counts over as it exits).
    const deadlocks = async (): Promise<number> => {
      await pool.end();
      return waitFor(async () => {
        const { rows } = await results.pool.query<{ backends: number; deadlocks: string }>(
          `SELECT (SELECT count(*)::int FROM pg_stat_activity WHERE datname = $1) AS backends, deadlocks::text
             FROM pg_stat_database WHERE datname = $1`,
          [database],
        );
        return rows[0]!.backends === 0 ? Number(rows[0]!.deadlocks) : undefined;
      }, { timeoutMs: 30_000, what: `the backends of ${database} to exit` });
    };
    return { pool, store: new PgResults(pool), deadlocks };
  }

  it('never deadlock: batches inserting runs of one App and moving on runs of another, in both pairings', async () => {
    const { pool, store, deadlocks } = await busyDatabase('deadlock-batches');
    try {
      const BATCHES = 80;
      const RUNS = 15;
      // Batch i writes new runs of App `first` and finishes earlier runs of App `second`: its counting
      // triggers (one for the inserted runs, one for the updated) take the two Apps in one order, and batch i+1,
      // the Apps swapped, in the other.
      const plans = Array.from({ length: BATCHES }, (_, i) => {
        const [first, second] = i % 2 === 0 ? ['pair-a', 'pair-b'] : ['pair-b', 'pair-a'];
        return { fresh: Array.from({ length: RUNS }, () => lifeOf(first)), older: Array.from({ length: RUNS }, () => lifeOf(second)) };
      });
      await store.writeBatch(plans.flatMap((plan) => plan.older.map((life) => life[0]!)));
      const written = await Promise.allSettled(
        plans.map((plan) => store.writeBatch([...plan.fresh.map((life) => life[0]!), ...plan.older.map((life) => life[2]!)])),
      );
      expect(written.filter((outcome) => outcome.status === 'rejected')).toEqual([]);
      expect(await keptCounts(pool)).toEqual(await countedAgain(pool));
      expect(await store.countRuns('demo', 'pair-a')).toMatchObject({ total: BATCHES * RUNS, inFlight: (BATCHES / 2) * RUNS });
    } finally {
      expect(await deadlocks()).toBe(0);
    }
  });

  it('never deadlock: batches moving on runs that retention deletes, and runs whose results expire, meanwhile', async () => {
    const { pool, store, deadlocks } = await busyDatabase('deadlock-upkeep');
    try {
      const RUNS = 300;
      const base = Date.parse('2020-01-01T00:00:00.000Z');
      // Ids ascending (the order batches lock runs in), creation times and result expiries descending (the orders
      // retention and expiry choose them in): each of the two opposite the batches'.
      const ids = Array.from({ length: RUNS }, (_, i) => uuidv7({ msecs: base + i }));
      const aged = ids.map((id, i) => failedAsyncRunRecord({ id, appName: 'aged', createdAt: new Date(base + (RUNS - i) * 1000).toISOString(), webhook: { endpoint: 'https://hooks.example.com/a', state: 'pending', attempts: 0, lastStatusCode: null, lastError: null } }));
      const expiring = Array.from({ length: RUNS }, (_, i) => ({ ...runRecord({ id: uuidv7(), appName: 'expiring', resultExpiresAt: new Date(Date.now() - (RUNS - i) * 1000).toISOString() }), result: { i } }));
      await store.writeBatch([...aged, ...expiring]);
      // Each batch a later webhook attempt of a random third of the runs, as a sweep or a late pod would send them.
      const attempt = <T extends RunRecord>(run: T, attempts: number): T => ({ ...run, webhook: { endpoint: 'https://hooks.example.com/a', state: 'pending', attempts, lastStatusCode: 503, lastError: 'HTTP 503' } });
      const batches = Array.from({ length: 40 }, (_, k) => [...aged, ...expiring].filter(() => Math.random() < 1 / 3).map((run) => attempt(run, k + 1)));
      let writing = true;
      const upkeep = async (): Promise<void> => {
        while (writing) {
          await store.pruneExpired({ defaultDays: 30, apps: [], batchSize: 20 });
          await store.dropExpiredResults({ batchSize: 20 });
        }
      };
      const upkeeps = [upkeep(), upkeep()];
      const written = await Promise.allSettled(batches.map((batch) => store.writeBatch(batch)));
      writing = false;
      const kept = await Promise.allSettled(upkeeps);
      expect([...written, ...kept].filter((outcome) => outcome.status === 'rejected')).toEqual([]);
      expect(await keptCounts(pool)).toEqual(await countedAgain(pool));
    } finally {
      expect(await deadlocks()).toBe(0);
    }
  });
});

describe('a million runs', () => {
  const RUNS = 1_000_000;
  const BASE_MS = Date.parse('2026-01-01T00:00:00.000Z');
  /** The id of seeded run i: a UUID v7 of instant BASE_MS + i, its counter bits i, so ids of one instant never tie. */
  const seededId = (i: number): string => {
    const hex = (BASE_MS + i).toString(16).padStart(12, '0') + '7000' + '8000' + i.toString(16).padStart(12, '0');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };

  it('are listed page by page with no gap and no duplicate while runs are written', async () => {
    // Set up in one statement (the collector's path is tested above); the same columns writeBatch fills.
    await results.pool.query(
      `INSERT INTO runlet_runs (id, project_id, app_name, function_name, async, status, created_at, replica, version, unfinished, record)
       SELECT id::uuid, 'demo', 'million', 'run', false, 'success', at, 'seed', 2199023255552, false,
              json_build_object('id', id::uuid::text, 'projectId', 'demo', 'appName', 'million', 'functionName', 'run', 'method', 'POST',
                'mode', 'sync', 'async', false, 'status', 'success', 'statusCode', 200, 'error', null, 'reason', null,
                'createdAt', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'startedAt', null, 'completedAt', null,
                'queueTimeMs', 0, 'runtimeMs', 1, 'responseTimeMs', 1, 'replica', 'seed', 'webhook', null)
         FROM (SELECT i, to_timestamp(($1::bigint + i) / 1000.0) AS at,
                      lpad(to_hex($1::bigint + i), 12, '0') || '70008000' || lpad(to_hex(i), 12, '0') AS id
                 FROM generate_series(0, $2::int - 1) AS i) AS seed`,
      [BASE_MS, RUNS],
    );
    await results.pool.query('ANALYZE runlet_runs');
    let expected = RUNS - 1;
    let pages = 0;
    let written = 0;
    let beforeId: string | null = null;
    for (;;) {
      const page = await results.store.listRuns(query('million', { beforeId }));
      for (const run of page.items) {
        if (run.id !== seededId(expected)) throw new Error(`page ${pages}: expected run ${seededId(expected)}, got ${run.id}`);
        expected -= 1;
      }
      pages += 1;
      const last = page.items.at(-1);
      if (!page.hasMore || last === undefined) break;
      beforeId = last.id;
      // Every tenth page, newer runs of the same app arrive: the cursor is below them.
      if (pages % 10 === 0) {
        written += await results.store.writeBatch(Array.from({ length: 20 }, () => runRecord({ id: uuidv7(), appName: 'million' })));
      }
    }
    expect(expected).toBe(-1);
    expect(pages).toBe(RUNS / 500);
    expect(written).toBe(20 * Math.floor((RUNS / 500 - 1) / 10));
  }, 300_000);
});

describe('time windows and async lists', () => {
  /** The smallest UUID v7 of millisecond `ms`, its random bits `tail` (12 hex digits). */
  const idAt = (ms: number, tail: string): string => {
    const hex = ms.toString(16).padStart(12, '0');
    return `${hex.slice(0, 8)}-${hex.slice(8)}-7000-8000-${tail}`;
  };

  it('bound the ids no tighter than a held call\'s wait and the nodes\' clock skew allow', async () => {
    expect(ID_LEAD_MS).toBe(HELD_RUN_MAX_AGE_MS);
    expect(ID_LAG_MS).toBe(DEFAULT_HELD_CALL_TTL_MS + HELD_RUN_MAX_AGE_MS);
    const t = Date.parse('2026-03-01T00:00:00.000Z');
    // Held at zero for 23 h: its id is the activator's, its record the sidecar's.
    const held = runRecord({ appName: 'skew', id: idAt(t, '000000000001'), createdAt: new Date(t + 23 * 3_600_000).toISOString() });
    // Minted on a node whose clock runs 4 minutes ahead of the sidecar's.
    const ahead = runRecord({ appName: 'skew', id: idAt(t + 4 * 60_000, '000000000002'), createdAt: new Date(t).toISOString() });
    await results.store.writeBatch([held, ahead]);
    const ids = async (overrides: Partial<ListRunsQuery>): Promise<string[]> => (await results.store.listRuns(query('skew', overrides))).items.map((run) => run.id);
    expect(await ids({ createdAfter: new Date(t + 22 * 3_600_000).toISOString() })).toEqual([held.id]);
    expect(await ids({ createdAfter: held.createdAt, createdBefore: new Date(t + 24 * 3_600_000).toISOString() })).toEqual([held.id]);
    expect(await ids({ createdBefore: new Date(t + 1).toISOString() })).toEqual([ahead.id]);
    expect(await ids({ createdAfter: ahead.createdAt, createdBefore: new Date(t + 60_000).toISOString() })).toEqual([ahead.id]);
  });

  describe('of an app with 200,000 runs', () => {
    const RUNS = 200_000;
    const BASE_MS = Date.parse('2026-02-01T00:00:00.000Z');
    let windows: OpenResults;
    let statement: QueryConfig | undefined;

    beforeAll(async () => {
      windows = await openResults({ dsn: server.dsn(await server.createDatabase('windows')), logger: testLogger() });
      // One run a second, 2% of them async, a tenth failed: none both.
      await windows.pool.query(
        `INSERT INTO runlet_runs (id, project_id, app_name, function_name, async, status, created_at, replica, version, unfinished, record)
         SELECT id::uuid, 'demo', 'windows', 'run', i % 50 = 7, CASE WHEN i % 10 = 0 THEN 'failure' ELSE 'success' END, at, 'seed', 2199023255552, false,
                json_build_object('id', id, 'createdAt', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           FROM (SELECT i, to_timestamp(($1::bigint + i * 1000) / 1000.0) AS at,
                        lpad(to_hex($1::bigint + i * 1000), 12, '0') || '70008000' || lpad(to_hex(i), 12, '0') AS id
                   FROM generate_series(0, $2::int - 1) AS i) AS seed`,
        [BASE_MS, RUNS],
      );
      await windows.pool.query('ANALYZE runlet_runs');
      // The statements the store sends, to EXPLAIN exactly those.
      const send = windows.pool.query.bind(windows.pool) as (config: QueryConfig) => Promise<unknown>;
      (windows.pool as { query: unknown }).query = (config: QueryConfig) => {
        if (typeof config === 'object') statement = config;
        return send(config);
      };
    }, 120_000);

    afterAll(async () => {
      await windows?.close();
    });

    /** The page, and how many rows PostgreSQL read to make it (every scan's rows, kept or filtered out), from EXPLAIN ANALYZE of the store's statement. */
    async function listed(overrides: Partial<ListRunsQuery>): Promise<{ items: number; rowsRead: number }> {
      const page = await windows.store.listRuns(listQuery('demo', 'windows', overrides));
      const { rows } = await windows.pool.query<{ 'QUERY PLAN': unknown }>({ text: `EXPLAIN (ANALYZE, FORMAT JSON) ${statement!.text}`, values: statement!.values });
      let rowsRead = 0;
      const visit = (node: Record<string, unknown>): void => {
        if (String(node['Node Type']).includes('Scan')) rowsRead += Number(node['Actual Rows'] ?? 0) + Number(node['Rows Removed by Filter'] ?? 0);
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) visit(child);
      };
      visit((rows[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
      return { items: page.items.length, rowsRead };
    }

    const at = (second: number): string => new Date(BASE_MS + second * 1000).toISOString();

    it('read runs near the window, not the app\'s history after it: createdBefore deep in the past', async () => {
      // 150,000 runs are newer than the bound; the page is the 50 below it.
      const page = await listed({ createdBefore: at(50_000) });
      expect(page.items).toBe(50);
      expect(page.rowsRead).toBeLessThan(1_000);
    });

    it('read an hour of runs for an hour\'s window, and nothing for an empty one', async () => {
      const hour = await listed({ createdAfter: at(60_000), createdBefore: at(63_600) });
      expect(hour.items).toBe(50);
      expect(hour.rowsRead).toBeLessThan(4_000);
      const empty = await listed({ createdAfter: at(RUNS + 3_600), createdBefore: at(RUNS + 7_200) });
      expect(empty.items).toBe(0);
      expect(empty.rowsRead).toBeLessThan(1_000);
    });

    it('read async runs only for asyncOnly, with a status none has', async () => {
      expect(await listed({ asyncOnly: true, status: 'failure' })).toEqual({ items: 0, rowsRead: 0 });
      const page = await listed({ asyncOnly: true });
      expect(page.items).toBe(50);
      expect(page.rowsRead).toBeLessThan(100);
    });
  });
});
