import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pino, type Logger } from 'pino';
import { v7 as uuidv7 } from 'uuid';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUN_STATUSES } from '../../crds/run-record-values.ts';
import type { ListRunsQuery } from '../../management/run-source.ts';
import { RUNS_DB_FILE_NAME, SCHEMA_VERSION, SqliteRunStore } from './sqlite-run-store.ts';
import { pendingDestination, rememberDestination } from './webhook-destination.ts';
import { waitFor } from '../../test/support/wait.ts';
import { failedAsyncRunRecord, pendingAsyncRunRecord, runRecord } from '../../test/support/sqlite-run-records.ts';
import { listQuery } from '../../test/support/list-query.ts';

const CRASH_CHILD = join(import.meta.dirname, '../../test/support/sqlite-run-store-crash-child.ts');

let dataDir: string;
let openStores: SqliteRunStore[];

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'runlet-run-store-'));
  openStores = [];
});

afterEach(async () => {
  for (const store of openStores) await store.close();
  rmSync(dataDir, { recursive: true, force: true });
});

function openStore(options: { logger?: Logger; maxBatchSize?: number; minWriteIntervalMs?: number } = {}): SqliteRunStore {
  const store = new SqliteRunStore({ dataDir, logger: options.logger ?? pino({ level: 'silent' }), ...options });
  openStores.push(store);
  return store;
}

/** What another process would see: a second connection to the file. */
function readFromFile(id: string): RunRecord | undefined {
  const db = new DatabaseSync(join(dataDir, RUNS_DB_FILE_NAME), { readOnly: true });
  try {
    const row = db.prepare('SELECT record FROM runs WHERE id = ?').get(id);
    return row === undefined ? undefined : (JSON.parse(String(row.record)) as RunRecord);
  } finally {
    db.close();
  }
}

/** The local-only column beside the record: a pending webhook's whole endpoint. */
function readDestination(id: string): unknown {
  const db = new DatabaseSync(join(dataDir, RUNS_DB_FILE_NAME), { readOnly: true });
  try {
    return db.prepare('SELECT webhook_destination FROM runs WHERE id = ?').get(id)?.webhook_destination;
  } finally {
    db.close();
  }
}

function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

describe('SqliteRunStore writes', () => {
  it('writes a record saved several times once, in the state it has at flush time', async () => {
    const store = openStore();
    const record = pendingAsyncRunRecord();
    store.save(record);
    record.status = 'running';
    store.save(record);
    // Changed after the last save: the store keeps the reference and serialises it when it writes.
    record.status = 'success';
    record.statusCode = 200;
    await store.flush();

    expect(readFromFile(record.id)).toEqual(record);
    expect(store.stats()).toEqual({ batches: 1, recordsWritten: 1, pending: 0 });
  });

  it('resolves saveDurably only once the record is committed, visible to another connection', async () => {
    const store = openStore();
    const record = pendingAsyncRunRecord();
    await store.saveDurably(record);
    expect(readFromFile(record.id)).toEqual(record);
  });

  it('commits concurrent saveDurably calls, and saves of the same turn, in one transaction', async () => {
    const store = openStore();
    const records = Array.from({ length: 20 }, () => pendingAsyncRunRecord());
    store.save(runRecord());
    await Promise.all(records.map((record) => store.saveDurably(record)));
    expect(store.stats()).toEqual({ batches: 1, recordsWritten: 21, pending: 0 });
    for (const record of records) expect(readFromFile(record.id)).toEqual(record);
  });

  it('batches 2,000 saves into a few transactions', async () => {
    const store = openStore({ maxBatchSize: 512 });
    const started = performance.now();
    for (let i = 0; i < 2_000; i += 1) store.save(runRecord({ async: i % 2 === 0 }));
    await store.flush();
    const elapsedMs = performance.now() - started;

    // Saved in one turn: one batch, posted by the flush (a batch in flight would make the next one larger).
    expect(store.stats()).toEqual({ batches: 1, recordsWritten: 2_000, pending: 0 });
    const page = await store.listRuns(query({ pageSize: 500 }));
    expect(page.items).toHaveLength(500);
    // Thousands of saves per second with a wide margin for a loaded test machine.
    expect(elapsedMs).toBeLessThan(2_000);
  });

  it('writes saves of one turn of the event loop together when nobody flushes', async () => {
    const store = openStore();
    for (let i = 0; i < 100; i += 1) store.save(runRecord());
    await waitFor(() => store.stats().pending === 0, { what: 'the saves to be committed' });
    expect(store.stats()).toEqual({ batches: 1, recordsWritten: 100, pending: 0 });
  });

  it('writes saves that follow a write closely together, once per window; durable saves do not wait for it', async () => {
    // A window long enough that no stall of a loaded machine ends it between two lines of this test.
    const store = openStore({ minWriteIntervalMs: 300 });
    const run = runRecord({ status: 'running' });
    store.save(run);
    await waitFor(() => store.stats().pending === 0, { what: 'the first save to be committed' });
    expect(store.stats()).toEqual({ batches: 1, recordsWritten: 1, pending: 0 });

    // A run finishing right after, and another starting: both wait for the window, then go in one batch.
    run.status = 'success';
    store.save(run);
    store.save(runRecord({ status: 'running' }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(store.stats().pending).toBe(2);
    await waitFor(() => store.stats().pending === 0, { what: 'the window to end' });
    expect(store.stats()).toEqual({ batches: 2, recordsWritten: 3, pending: 0 });
    expect(readFromFile(run.id)?.status).toBe('success');

    // Within the next window, a durable save is committed on the next turn, with what is pending.
    store.save(runRecord());
    await store.saveDurably(pendingAsyncRunRecord());
    expect(store.stats()).toEqual({ batches: 3, recordsWritten: 5, pending: 0 });
  });

  it('commits accepts that arrive while a commit waits together, in the next transaction, and keeps the event loop turning', async () => {
    const store = openStore();
    // The writer thread is up.
    await store.saveDurably(runRecord());
    // Another connection holds the write lock: the writer's next commit waits for it (up to its busy timeout).
    const blocker = new DatabaseSync(store.path);
    blocker.exec('BEGIN IMMEDIATE');
    const records = Array.from({ length: 50 }, () => pendingAsyncRunRecord());
    let acknowledged = 0;
    const saves: Array<Promise<void>> = [];
    for (const record of records) {
      saves.push(store.saveDurably(record).then(() => void (acknowledged += 1)));
      // Each accept in a turn of its own, as requests arrive: the event loop turns while the commit waits.
      await new Promise((resolve) => setImmediate(resolve));
    }
    // Nothing is acknowledged before its commit: the first accept's batch waits for the lock, the rest for it.
    expect(acknowledged).toBe(0);
    expect(store.stats()).toEqual({ batches: 1, recordsWritten: 1, pending: 50 });

    blocker.exec('COMMIT');
    blocker.close();
    await Promise.all(saves);
    // The first accept's batch, then the 49 that arrived while it waited, in one transaction.
    expect(store.stats()).toEqual({ batches: 3, recordsWritten: 51, pending: 0 });
    for (const record of records) expect(readFromFile(record.id)).toEqual(record);
  });

  it('rejects the durable waiters of a failed batch, logs the error, drops their refused runs and retries the other records later', async () => {
    const { logger, lines } = capturingLogger();
    const store = openStore({ logger });
    const saboteur = new DatabaseSync(store.path);
    saboteur.exec("CREATE TRIGGER refuse BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'disk says no'); END");
    const finished = runRecord();
    const record = pendingAsyncRunRecord();

    // One batch: a finished run's plain save, and an async run's durable one, which its caller refuses (503).
    store.save(finished);
    const failure = await store.saveDurably(record).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toContain('writing a batch of 2 run records failed');
    expect(((failure as Error).cause as Error).message).toContain('disk says no');
    expect(lines.find((line) => line.level === 50)).toMatchObject({ retried: 1, refused: 1, durableWaiters: 1 });
    expect(store.stats().pending).toBe(1);
    expect(store.has(record.id)).toBe(false);

    saboteur.exec('DROP TRIGGER refuse');
    saboteur.close();
    await store.flush();
    expect(readFromFile(finished.id)).toEqual(finished);
    expect(readFromFile(record.id)).toBeUndefined();
  });

  it('refuses saves after close', async () => {
    const store = openStore();
    await store.close();
    expect(() => store.save(runRecord())).toThrow(/is closed: cannot save run/);
    await expect(store.saveDurably(runRecord())).rejects.toThrow(/is closed: cannot save run/);
  });
});

describe('SqliteRunStore durability', () => {
  it('keeps runs across close and reopen, flushing pending saves on close', async () => {
    const first = openStore();
    const durable = failedAsyncRunRecord();
    const pending = runRecord();
    await first.saveDurably(durable);
    first.save(pending);
    await first.close();

    const second = openStore();
    expect(await second.getRun(durable.projectId, durable.appName, durable.id)).toEqual(durable);
    expect(await second.getRun(pending.projectId, pending.appName, pending.id)).toEqual(pending);
  });

  it('records the schema version and refuses a database of a newer runlet', async () => {
    await openStore().close();
    const db = new DatabaseSync(join(dataDir, RUNS_DB_FILE_NAME));
    expect(db.prepare('PRAGMA user_version').get()).toEqual({ user_version: SCHEMA_VERSION });
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => openStore()).toThrow(`has schema version ${SCHEMA_VERSION + 1}, newer than ${SCHEMA_VERSION}`);
  });

  it('upgrades a file of schema version 1 in place, keeping its runs', async () => {
    const kept = runRecord();
    const db = new DatabaseSync(join(dataDir, RUNS_DB_FILE_NAME));
    db.exec(`CREATE TABLE runs (id TEXT PRIMARY KEY NOT NULL, project_id TEXT NOT NULL, app_name TEXT NOT NULL, async INTEGER NOT NULL,
      status TEXT NOT NULL, record TEXT NOT NULL) WITHOUT ROWID; PRAGMA user_version = 1`);
    db.prepare('INSERT INTO runs VALUES (?, ?, ?, 0, ?, ?)').run(kept.id, kept.projectId, kept.appName, kept.status, JSON.stringify(kept));
    db.close();
    const store = openStore();
    expect(await store.getRun(kept.projectId, kept.appName, kept.id)).toEqual(kept);
    expect(readDestination(kept.id)).toBeNull();
  });

  it("keeps a pending webhook's whole endpoint beside the record, never in it, until the delivery settles", async () => {
    const first = openStore();
    const record = pendingAsyncRunRecord();
    record.webhook = { endpoint: 'http://127.0.0.1:9/hook', state: 'pending', attempts: 0, lastStatusCode: null, lastError: null };
    rememberDestination(record.webhook, 'http://127.0.0.1:9/hook?token=t');
    await first.saveDurably(record);
    expect(readDestination(record.id)).toBe('http://127.0.0.1:9/hook?token=t');
    expect(JSON.stringify(readFromFile(record.id))).not.toContain('token');
    await first.close();

    // Read back by the next process, and saved again: the destination goes with it while still pending.
    const second = openStore();
    const [unfinished] = second.unfinishedRuns();
    expect(pendingDestination(unfinished!.webhook)).toBe('http://127.0.0.1:9/hook?token=t');
    unfinished!.status = 'failure';
    await second.saveDurably(unfinished!);
    expect(second.runsOwingWebhooks().map((run) => run.id)).toEqual([record.id]);
    expect(readDestination(record.id)).toBe('http://127.0.0.1:9/hook?token=t');
    unfinished!.webhook!.state = 'delivered';
    await second.saveDurably(unfinished!);
    expect(readDestination(record.id)).toBeNull();
    expect(second.runsOwingWebhooks()).toEqual([]);
  });

  for (const [ending, companions] of [['exit', 0], ['sigkill', 0], ['sigkill', 200]] as const) {
    const among = companions === 0 ? '' : `, among ${companions} runs saved at the same time`;
    it(`keeps a durably saved run when its process ends right after (${ending}${among})`, async () => {
      const runId = uuidv7();
      const child = spawn(process.execPath, [CRASH_CHILD, dataDir, runId, ending, String(companions)], {
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
        child.once('error', reject);
        child.once('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
      });
      expect(ending === 'sigkill' ? signal : code).toBe(ending === 'sigkill' ? 'SIGKILL' : 0);

      const store = openStore();
      expect(await store.getRun('demo', 'hello', runId)).toMatchObject({ id: runId, status: 'pending' });
      expect((await store.listRuns(query({ pageSize: 500, asyncOnly: true, status: 'pending' }))).items.map((run) => run.id)).toContain(runId);
    });
  }
});

describe('SqliteRunStore reads', () => {
  it('knows the ids it holds — saved a moment ago, committed, or by a previous process — so a held run id is taken once', async () => {
    const store = openStore();
    const saved = pendingAsyncRunRecord();
    store.save(saved);
    expect(store.has(saved.id), 'saved, not yet committed').toBe(true);
    const durable = pendingAsyncRunRecord();
    await store.saveDurably(durable);
    expect(store.has(durable.id), 'committed').toBe(true);
    expect(store.has(pendingAsyncRunRecord().id)).toBe(false);
    await store.close();
    const reopened = openStore();
    expect(reopened.has(saved.id) && reopened.has(durable.id), 'after a restart').toBe(true);
  });

  it('lists records saved a moment ago, not yet flushed', async () => {
    const store = openStore();
    const record = runRecord();
    store.save(record);
    expect((await store.listRuns(query())).items).toEqual([record]);
    expect(await store.getRun('demo', 'hello', record.id)).toEqual(record);
  });

  it('counts saves not yet committed, in their latest state, among the unfinished runs', async () => {
    const store = openStore();
    const finishedSinceCommit = runRecord({ status: 'running' });
    await store.saveDurably(finishedSinceCommit);
    finishedSinceCommit.status = 'success';
    store.save(finishedSinceCommit);
    const startedSinceCommit = runRecord({ status: 'running' });
    store.save(startedSinceCommit);
    // Read in the same turn as the saves: neither is committed yet.
    expect(store.stats().pending).toBe(2);
    expect(store.unfinishedRuns()).toEqual([startedSinceCommit]);
  });

  it('finds a run only in its own app', async () => {
    const store = openStore();
    const record = runRecord();
    await store.saveDurably(record);
    expect(await store.getRun('demo', 'other', record.id)).toBeUndefined();
    expect(await store.getRun('other', 'hello', record.id)).toBeUndefined();
  });

  it('pages through 1,234 runs newest first, with every filter, without gaps or duplicates', async () => {
    const store = openStore();
    const random = seededRandom(1234);
    const all: RunRecord[] = [];
    for (let i = 0; i < 1_234; i += 1) {
      const record = runRecord({
        // Mostly the listed app, with neighbours in the same project and an app of the same name elsewhere.
        projectId: random() < 0.9 ? 'demo' : 'elsewhere',
        appName: random() < 0.8 ? 'hello' : 'hello-2',
        async: random() < 0.4,
        status: RUN_STATUSES[Math.floor(random() * RUN_STATUSES.length)]!,
      });
      all.push(record);
      store.save(record);
    }
    await store.flush();

    const filters: Array<Pick<ListRunsQuery, 'asyncOnly' | 'status'>> = [
      { asyncOnly: false, status: null },
      { asyncOnly: true, status: null },
      { asyncOnly: false, status: 'failure' },
      { asyncOnly: true, status: 'success' },
    ];
    for (const filter of filters) {
      for (const pageSize of [1, 37, 500]) {
        const expected = expectedIds(all, filter);
        const seen: string[] = [];
        let beforeId: string | null = null;
        for (;;) {
          const page = await store.listRuns(query({ ...filter, pageSize, beforeId }));
          expect(page.items.length).toBeLessThanOrEqual(pageSize);
          seen.push(...page.items.map((run) => run.id));
          if (!page.hasMore) break;
          if (beforeId === null) {
            // A run that starts while a client pages is newer than every cursor: it must not shift the pages.
            const newer = runRecord({ async: filter.asyncOnly, status: filter.status ?? 'running' });
            all.push(newer);
            store.save(newer);
          }
          beforeId = page.items.at(-1)!.id;
        }
        expect(seen, `${JSON.stringify(filter)}, pageSize ${pageSize}`).toEqual(expected);
      }
    }
  });
});

/** Ids of demo/hello runs passing the filter, newest first: UUID v7 order is creation order. */
function expectedIds(runs: readonly RunRecord[], filter: Pick<ListRunsQuery, 'asyncOnly' | 'status'>): string[] {
  return runs
    .filter((run) => run.projectId === 'demo' && run.appName === 'hello')
    .filter((run) => (!filter.asyncOnly || run.async) && (filter.status === null || run.status === filter.status))
    .map((run) => run.id)
    .sort()
    .reverse();
}

function query(overrides: Partial<ListRunsQuery> = {}): ListRunsQuery {
  return listQuery('demo', 'hello', overrides);
}

/** Deterministic pseudo-random numbers in [0, 1) (mulberry32), so a failure can be replayed. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
