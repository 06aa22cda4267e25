// The run store of local mode (`runlet dev`): run records in one SQLite file of the data directory, written in
// batches, read back by the management API. The same records a cluster keeps in RunLog status.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import type { Logger } from 'pino';
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { ListRunsQuery, RunPage, RunSource } from '../management/run-source.ts';
import type { RunStore } from '../sidecar/runs/store.ts';

export const RUNS_DB_FILE_NAME = 'runs.sqlite';

/**
 * Schema migrations; entry i brings a database from `user_version` i to i + 1. Append, never edit: a file
 * written by an older runlet is upgraded in place when it is opened.
 */
const MIGRATIONS: readonly string[] = [
  // 1: filtered and sorted columns beside the whole record. `id` is a UUID v7, so its text order is creation
  // order and `ORDER BY id DESC` is newest first; WITHOUT ROWID clusters the table on it.
  `CREATE TABLE runs (
     id TEXT PRIMARY KEY NOT NULL,
     project_id TEXT NOT NULL,
     app_name TEXT NOT NULL,
     async INTEGER NOT NULL,
     status TEXT NOT NULL,
     record TEXT NOT NULL
   ) WITHOUT ROWID;
   CREATE INDEX runs_by_app ON runs (project_id, app_name, id);`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** A batch larger than this is written at once instead of waiting for its turn. */
const DEFAULT_MAX_BATCH_SIZE = 512;
/**
 * Plain saves are written at most this often. A commit costs ~40 us of CPU and a dozen syscalls (WAL frames,
 * locks) with the event loop blocked, and every run is saved at least twice (running, then finished): under
 * load, a window lets a short run's states collapse into one row written once, in a transaction shared with
 * many others. Durable saves (an async run's 202) never wait for the window; a store idle for longer than it
 * writes on the next turn, as before. What a killed process can lose is the plain saves of the last window.
 */
const DEFAULT_MIN_WRITE_INTERVAL_MS = 10;
/** How long a write waits for a lock held by another connection (a reader checkpointing, a second tool). */
const BUSY_TIMEOUT_MS = 5_000;

export interface SqliteRunStoreOptions {
  /** Directory of the database file; created when missing. */
  dataDir: string;
  logger: Logger;
  maxBatchSize?: number;
  /** Plain saves are written at most this often (see DEFAULT_MIN_WRITE_INTERVAL_MS). */
  minWriteIntervalMs?: number;
}

export interface RunStoreStats {
  /** Transactions committed by flushes. */
  batches: number;
  /** Rows upserted by those transactions. */
  recordsWritten: number;
  /** Records saved and not yet committed. */
  pending: number;
}

interface DurableWaiter {
  resolve: () => void;
  reject: (error: Error) => void;
}

export class SqliteRunStore implements RunStore, RunSource {
  readonly path: string;
  readonly #db: DatabaseSync;
  readonly #logger: Logger;
  readonly #maxBatchSize: number;
  readonly #minWriteIntervalMs: number;
  readonly #begin: StatementSync;
  readonly #commit: StatementSync;
  readonly #rollback: StatementSync;
  readonly #upsert: StatementSync;
  readonly #selectOne: StatementSync;
  /** List statements by filter shape, so each shape gets a plan that uses the index range on `id`. */
  readonly #listStatements = new Map<string, StatementSync>();
  /** Saved records by id: the reference, serialised at flush time so the latest state is written once. */
  #pending = new Map<string, RunRecord>();
  /** Callers of saveDurably waiting for the next commit. */
  #durableWaiters: DurableWaiter[] = [];
  /** The write to come: on the next turn (`soon`), at the end of the current window (`later`), or none. */
  #scheduled: { kind: 'soon'; handle: NodeJS.Immediate } | { kind: 'later'; handle: NodeJS.Timeout } | null = null;
  /** When the last batch was written (performance.now()). */
  #lastWriteAt = Number.NEGATIVE_INFINITY;
  #closed = false;
  #batches = 0;
  #recordsWritten = 0;

  constructor(options: SqliteRunStoreOptions) {
    mkdirSync(options.dataDir, { recursive: true });
    this.path = join(options.dataDir, RUNS_DB_FILE_NAME);
    this.#logger = options.logger;
    this.#maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
    this.#minWriteIntervalMs = options.minWriteIntervalMs ?? DEFAULT_MIN_WRITE_INTERVAL_MS;
    this.#db = new DatabaseSync(this.path, { timeout: BUSY_TIMEOUT_MS });
    // WAL: readers (the management API, a second `runlet` process) never block the writer, and a commit is one
    // sequential append to the -wal file. synchronous=NORMAL: a commit is not fsynced; the WAL is synced at
    // checkpoints. A commit's pages are in the -wal file (the kernel's page cache) once COMMIT returns, so a
    // process crash — exit, uncaught exception, SIGKILL right after an async run's 202 — loses nothing; only an
    // OS crash or power loss can roll back the last commits, never corrupt the file. That is the durability
    // local mode promises: the runs of a `runlet dev` session outlive the process, not the machine.
    try {
      this.#db.exec('PRAGMA journal_mode = WAL');
      this.#db.exec('PRAGMA synchronous = NORMAL');
      migrate(this.#db, this.path);
    } catch (error) {
      this.#db.close();
      throw error;
    }
    this.#begin = this.#db.prepare('BEGIN IMMEDIATE');
    this.#commit = this.#db.prepare('COMMIT');
    this.#rollback = this.#db.prepare('ROLLBACK');
    this.#upsert = this.#db.prepare(
      `INSERT INTO runs (id, project_id, app_name, async, status, record)
       VALUES (:id, :projectId, :appName, :async, :status, :record)
       ON CONFLICT (id) DO UPDATE SET
         project_id = excluded.project_id, app_name = excluded.app_name, async = excluded.async,
         status = excluded.status, record = excluded.record`,
    );
    this.#selectOne = this.#db.prepare(
      'SELECT record FROM runs WHERE id = :id AND project_id = :projectId AND app_name = :appName',
    );
    this.#logger.info({ path: this.path, schemaVersion: SCHEMA_VERSION }, 'run store opened');
  }

  save(record: RunRecord): void {
    this.#enqueue(record, false);
  }

  saveDurably(record: RunRecord): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      // Thrown here, a closed store rejects the promise before a waiter is registered that nothing would settle.
      this.#assertOpen(record);
      // The waiter is registered before the record is queued: queueing may flush at once (a full batch).
      this.#durableWaiters.push({ resolve, reject });
      this.#enqueue(record, true);
    });
  }

  async flush(): Promise<void> {
    this.#writePending();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#cancelScheduled();
    try {
      this.#writePending();
    } finally {
      this.#closed = true;
      this.#db.close();
      this.#logger.info({ path: this.path }, 'run store closed');
    }
  }

  stats(): RunStoreStats {
    return { batches: this.#batches, recordsWritten: this.#recordsWritten, pending: this.#pending.size };
  }

  async listRuns(query: ListRunsQuery): Promise<RunPage> {
    // Flush before reading: a run saved a moment ago (still pending) must be listed.
    this.#writePending();
    const params: Record<string, SQLInputValue> = {
      projectId: query.projectId,
      appName: query.appName,
      // One row past the page tells whether another page exists.
      limit: query.pageSize + 1,
    };
    if (query.beforeId !== null) params.beforeId = query.beforeId;
    if (query.status !== null) params.status = query.status;
    const rows = this.#listStatement(query).all(params);
    const hasMore = rows.length > query.pageSize;
    const items = rows.slice(0, query.pageSize).map((row) => parseRecord(row.record));
    return { items, hasMore };
  }

  async getRun(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined> {
    this.#writePending();
    const row = this.#selectOne.get({ id: runId, projectId, appName });
    return row === undefined ? undefined : parseRecord(row.record);
  }

  /** Runs left `pending` or `running` by a process that was killed: nothing will ever complete them. */
  unfinishedRuns(): RunRecord[] {
    this.#writePending();
    return this.#db
      .prepare(`SELECT record FROM runs WHERE status IN ('pending', 'running') ORDER BY id`)
      .all()
      .map((row) => parseRecord(row.record));
  }

  #assertOpen(record: RunRecord): void {
    if (this.#closed) throw new Error(`run store ${this.path} is closed: cannot save run ${record.id}`);
  }

  #enqueue(record: RunRecord, durable: boolean): void {
    this.#assertOpen(record);
    this.#pending.set(record.id, record);
    if (this.#pending.size >= this.#maxBatchSize) {
      this.#writeQuietly();
      return;
    }
    if (this.#scheduled?.kind === 'soon') return;
    const sinceLastWrite = performance.now() - this.#lastWriteAt;
    if (durable || sinceLastWrite >= this.#minWriteIntervalMs) {
      this.#cancelScheduled();
      // After the current turn of the event loop: every save of this turn joins one transaction.
      this.#scheduled = { kind: 'soon', handle: setImmediate(this.#flushFromSchedule) };
    } else if (!this.#scheduled) {
      this.#scheduled = { kind: 'later', handle: setTimeout(this.#flushFromSchedule, this.#minWriteIntervalMs - sinceLastWrite) };
    }
  }

  #cancelScheduled(): void {
    if (this.#scheduled?.kind === 'soon') clearImmediate(this.#scheduled.handle);
    else if (this.#scheduled?.kind === 'later') clearTimeout(this.#scheduled.handle);
    this.#scheduled = null;
  }

  readonly #flushFromSchedule = (): void => {
    this.#scheduled = null;
    if (!this.#closed) this.#writeQuietly();
  };

  /** A write nobody awaits (a scheduled or a full batch): a failure must not reach the caller of save. */
  #writeQuietly(): void {
    try {
      this.#writePending();
    } catch {
      // Already logged, and passed to the durable waiters, by #writePending.
    }
  }

  /**
   * Upserts every pending record in one transaction, then settles the durable waiters. On failure the records
   * go back to the queue (the next save or flush retries them), the waiters are rejected and the error
   * rethrown for callers of flush, close and the reads.
   */
  #writePending(): void {
    if (this.#pending.size === 0 && this.#durableWaiters.length === 0) return;
    const batch = this.#pending;
    const waiters = this.#durableWaiters;
    this.#pending = new Map();
    this.#durableWaiters = [];
    this.#lastWriteAt = performance.now();
    try {
      this.#begin.run();
      try {
        for (const record of batch.values()) {
          this.#upsert.run({
            id: record.id,
            projectId: record.projectId,
            appName: record.appName,
            async: record.async ? 1 : 0,
            status: record.status,
            record: JSON.stringify(record),
          });
        }
        this.#commit.run();
      } catch (error) {
        if (this.#db.isTransaction) this.#rollback.run();
        throw error;
      }
    } catch (cause) {
      for (const [id, record] of batch) {
        // Put back unless a later save already queued the record again.
        if (!this.#pending.has(id)) this.#pending.set(id, record);
      }
      const error = new Error(`run store ${this.path}: writing a batch of ${batch.size} run records failed`, {
        cause,
      });
      this.#logger.error({ err: error, records: batch.size, durableWaiters: waiters.length }, error.message);
      for (const waiter of waiters) waiter.reject(error);
      throw error;
    }
    this.#batches += 1;
    this.#recordsWritten += batch.size;
    for (const waiter of waiters) waiter.resolve();
  }

  #listStatement(query: ListRunsQuery): StatementSync {
    const hasBefore = query.beforeId !== null;
    const hasStatus = query.status !== null;
    const key = `${hasBefore}/${query.asyncOnly}/${hasStatus}`;
    let statement = this.#listStatements.get(key);
    if (statement === undefined) {
      const conditions = ['project_id = :projectId', 'app_name = :appName'];
      if (hasBefore) conditions.push('id < :beforeId');
      if (query.asyncOnly) conditions.push('async = 1');
      if (hasStatus) conditions.push('status = :status');
      statement = this.#db.prepare(
        `SELECT record FROM runs WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT :limit`,
      );
      this.#listStatements.set(key, statement);
    }
    return statement;
  }
}

function migrate(db: DatabaseSync, path: string): void {
  const current = readUserVersion(db);
  if (current > SCHEMA_VERSION) {
    throw new Error(
      `run store ${path} has schema version ${current}, newer than ${SCHEMA_VERSION} known to this runlet: ` +
        'upgrade runlet or use another data directory',
    );
  }
  for (let version = current; version < SCHEMA_VERSION; version += 1) {
    db.exec('BEGIN IMMEDIATE');
    try {
      db.exec(MIGRATIONS[version]!);
      // PRAGMA takes no bound parameters; `version` is a loop counter, not input.
      db.exec(`PRAGMA user_version = ${version + 1}`);
      db.exec('COMMIT');
    } catch (cause) {
      db.exec('ROLLBACK');
      throw new Error(`run store ${path}: migrating schema from version ${version} to ${version + 1} failed`, {
        cause,
      });
    }
  }
}

function readUserVersion(db: DatabaseSync): number {
  const row = db.prepare('PRAGMA user_version').get();
  return Number(row?.user_version ?? 0);
}

function parseRecord(column: unknown): RunRecord {
  if (typeof column !== 'string') {
    throw new Error(`run store: record column holds ${typeof column}, expected JSON text`);
  }
  // Written by this store from a RunRecord (#writePending); the schema version guards its shape.
  return JSON.parse(column) as RunRecord;
}
