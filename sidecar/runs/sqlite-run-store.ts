// The run store of local mode (`runlet dev`, and `runlet sidecar` outside a cluster): run records in one SQLite
// file of the data directory, written in batches by a worker thread (sqlite-run-writer.ts), read back by the
// management API. The same records a cluster keeps in RunLog status.

import { accessSync, constants as fsConstants, existsSync, mkdirSync } from 'node:fs';
import { dirname, extname, join, resolve } from 'node:path';
import { DatabaseSync, type SQLInputValue, type SQLOutputValue, type StatementSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { RunRecord, RunRecordWithResult } from '../../crds/run-record-schema.ts';
import type { ListRunsQuery, RunPage } from '../../management/run-source.ts';
import { retentionCutoff, type PruneOptions, type RunCounts, type RunHistory } from '../../results/run-history.ts';
import { keptResultOf } from './kept-result.ts';
import { deliverOwed, failUnfinished } from './lost-runs.ts';
import type { RunStore } from './store.ts';
import { pendingDestination, rememberDestination } from './webhook-destination.ts';
import type { WriterReply, WriterRequest, WriterSettings } from './sqlite-run-writer.ts';

export const RUNS_DB_FILE_NAME = 'runs.sqlite';

/** The writer's module beside this one: .ts in the sources, .js in dist/. */
const WRITER_MODULE = new URL(`./sqlite-run-writer${extname(new URL(import.meta.url).pathname)}`, import.meta.url);

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
  // 2: the whole webhook endpoint (query string included) of a run whose delivery is pending, so a restarted
  // process can deliver what its predecessor owed; NULL once the delivery settles. Never in `record`, which
  // the management API shows.
  `ALTER TABLE runs ADD COLUMN webhook_destination TEXT;`,
  // 3: a run's kept result (`[runs] keep_results`) as JSON text, and when it expires; beside the record, which
  // the list shows without it. The index serves the sweep of expired results.
  `ALTER TABLE runs ADD COLUMN result TEXT;
   ALTER TABLE runs ADD COLUMN result_expires_at TEXT;
   CREATE INDEX runs_result_expiry ON runs (result_expires_at) WHERE result_expires_at IS NOT NULL;`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** Saves pending beyond this many are sent to the writer without waiting for the window. */
const DEFAULT_MAX_BATCH_SIZE = 512;
/**
 * Plain saves are sent to the writer at most this often. Every run is saved at least twice (running, then
 * finished): under load, a window lets a short run's states collapse into one row written once, in a
 * transaction shared with many others. Durable saves (an async run's 202) never wait for the window; a store
 * idle for longer than it writes on the next turn. What a killed process can lose is the plain saves of the
 * last window and of the batch being committed.
 */
const DEFAULT_MIN_WRITE_INTERVAL_MS = 10;
/** How often kept results past their ttl are dropped (a get stops returning them at once), and rows per statement. */
const RESULT_SWEEP_INTERVAL_MS = 60_000;
const RESULT_SWEEP_BATCH = 500;
/** How long a write waits for a lock held by another connection (a reader checkpointing, a second tool). */
const BUSY_TIMEOUT_MS = 5_000;

export interface SqliteRunStoreOptions {
  /** Directory of the database file; created when missing. */
  dataDir: string;
  logger: Logger;
  maxBatchSize?: number;
  /** Plain saves are written at most this often (see DEFAULT_MIN_WRITE_INTERVAL_MS). */
  minWriteIntervalMs?: number;
  /**
   * Who writes the store, named in what a killed predecessor's runs are failed with (`runlet dev stopped before
   * the run completed ...`). Default `the sidecar`.
   */
  processName?: string;
}

export interface RunStoreStats {
  /** Transactions committed. */
  batches: number;
  /** Rows upserted by those transactions. */
  recordsWritten: number;
  /** Records saved and not yet committed (waiting, or in the batch being committed). */
  pending: number;
}

interface DurableWaiter {
  resolve: () => void;
  reject: (error: Error) => void;
  /**
   * The run whose durable save this is (none: a flush). Its save refused, its caller refuses the run (an async
   * call's 503): the record is dropped, never written by a later batch, so never listed nor taken for lost.
   */
  id?: string;
}

/** How long a reader refused while the store cannot write is asked to wait. */
const READ_RETRY_AFTER_SECONDS = 5;

/** A batch posted to the writer: its records (the references, for a retry) and who waits for its commit. */
interface Batch {
  records: Map<string, RunRecord>;
  waiters: DurableWaiter[];
}

/**
 * One batch is committed at a time. Whatever is saved meanwhile waits, and goes in the next transaction as
 * soon as the current one commits: concurrent async accepts share a commit, and a slow commit (a checkpoint)
 * makes the next batch larger instead of queueing transactions behind it.
 */
export class SqliteRunStore implements RunStore, RunHistory {
  readonly path: string;
  /** The main thread's connection: opens and migrates the file, then only reads. */
  readonly #db: DatabaseSync;
  readonly #logger: Logger;
  readonly #maxBatchSize: number;
  readonly #minWriteIntervalMs: number;
  readonly #processName: string;
  readonly #selectOne: StatementSync;
  readonly #selectId: StatementSync;
  /** List statements by filter shape, so each shape gets a plan that uses the index range on `id`. */
  readonly #listStatements = new Map<string, StatementSync>();
  /** The writer thread; started on the first batch, and again after it died. */
  #writer: Worker | null = null;
  /** Saved records by id: the reference, serialised when its batch is posted so the latest state is written once. */
  #pending = new Map<string, RunRecord>();
  /** Callers of saveDurably and flush waiting for the commit of what is pending. */
  #durableWaiters: DurableWaiter[] = [];
  /** The batch the writer is committing. */
  #inFlight: Batch | null = null;
  /** The post to come: on the next turn (`soon`), at the end of the current window (`later`), or none. */
  #scheduled: { kind: 'soon'; handle: NodeJS.Immediate } | { kind: 'later'; handle: NodeJS.Timeout } | null = null;
  /** When the last batch was posted (performance.now()). */
  #lastWriteAt = Number.NEGATIVE_INFINITY;
  #closing: Promise<void> | null = null;
  #closed = false;
  #batches = 0;
  #recordsWritten = 0;
  readonly #resultSweep: NodeJS.Timeout;

  constructor(options: SqliteRunStoreOptions) {
    this.path = join(options.dataDir, RUNS_DB_FILE_NAME);
    try {
      mkdirSync(options.dataDir, { recursive: true });
    } catch (cause) {
      // mkdir under a read-only mount says ENOENT: the nearest directory that exists says why.
      const why = whyNotWritable(nearestExisting(options.dataDir)) ?? (cause as Error).message;
      throw new Error(`run store ${this.path}: cannot create its directory ${options.dataDir}: ${why}`, { cause });
    }
    this.#logger = options.logger;
    this.#maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
    this.#minWriteIntervalMs = options.minWriteIntervalMs ?? DEFAULT_MIN_WRITE_INTERVAL_MS;
    this.#processName = options.processName ?? 'the sidecar';
    this.#db = openDatabase(this.path, options.dataDir);
    // WAL: readers (the management API, a second `runlet` process) never block the writer, and a commit is one
    // sequential append to the -wal file. synchronous=NORMAL (set by the writer on its connection): a commit is
    // not fsynced; the WAL is synced at checkpoints. A commit's pages are in the -wal file (the kernel's page
    // cache) once COMMIT returns, so a process crash — exit, uncaught exception, SIGKILL right after an async
    // run's 202 — loses nothing; only an OS crash or power loss can roll back the last commits, never corrupt
    // the file. That is the durability local mode promises: the runs of a `runlet dev` session outlive the
    // process, not the machine.
    try {
      this.#db.exec('PRAGMA journal_mode = WAL');
      migrate(this.#db, this.path);
    } catch (error) {
      this.#db.close();
      throw error;
    }
    this.#selectOne = this.#db.prepare(
      'SELECT record, result, result_expires_at FROM runs WHERE id = :id AND project_id = :projectId AND app_name = :appName',
    );
    this.#selectId = this.#db.prepare('SELECT 1 FROM runs WHERE id = :id');
    this.#resultSweep = setInterval(() => {
      this.dropExpiredResults({ batchSize: RESULT_SWEEP_BATCH }).catch((err: unknown) =>
        this.#logger.warn({ err, path: this.path }, 'dropping expired run results failed; the next sweep tries again'),
      );
    }, RESULT_SWEEP_INTERVAL_MS);
    this.#resultSweep.unref();
    this.#logger.info({ path: this.path, schemaVersion: SCHEMA_VERSION }, 'run store opened');
  }

  save(record: RunRecord): void {
    this.#enqueue(record, false);
  }

  saveDurably(record: RunRecord): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      // Thrown here, a closed store rejects the promise before a waiter is registered that nothing would settle.
      this.#assertOpen(record);
      this.#durableWaiters.push({ resolve, reject, id: record.id });
      this.#enqueue(record, true);
    });
  }

  has(id: string): boolean {
    return this.#pending.has(id) || this.#inFlight?.records.has(id) === true || this.#selectId.get({ id }) !== undefined;
  }

  flush(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.#closed && this.#pending.size > 0) {
        reject(new Error(`run store ${this.path} is closed with ${this.#pending.size} run records not written`));
      } else if (this.#pending.size > 0) {
        this.#durableWaiters.push({ resolve, reject });
        this.#schedule(true);
      } else if (this.#inFlight !== null) {
        this.#inFlight.waiters.push({ resolve, reject });
      } else {
        resolve();
      }
    });
  }

  close(): Promise<void> {
    this.#closing ??= this.#closeOnce();
    return this.#closing;
  }

  async #closeOnce(): Promise<void> {
    try {
      // Saves made while the last batch commits (a webhook's state) are written too.
      while (this.#pending.size > 0 || this.#inFlight !== null) await this.flush();
    } finally {
      this.#closed = true;
      clearInterval(this.#resultSweep);
      this.#cancelScheduled();
      await this.#stopWriter();
      this.#db.close();
      this.#logger.info({ path: this.path }, 'run store closed');
    }
  }

  stats(): RunStoreStats {
    return {
      batches: this.#batches,
      recordsWritten: this.#recordsWritten,
      pending: this.#pending.size + (this.#inFlight?.records.size ?? 0),
    };
  }

  async listRuns(query: ListRunsQuery): Promise<RunPage> {
    // A run saved a moment ago (not yet committed) must be listed.
    await this.#flushForRead('list');
    const params: Record<string, SQLInputValue> = {
      projectId: query.projectId,
      appName: query.appName,
      // One row past the page tells whether another page exists.
      limit: query.pageSize + 1,
    };
    if (query.beforeId !== null) params.beforeId = query.beforeId;
    if (query.status !== null) params.status = query.status;
    if (query.functionName !== null) params.functionName = query.functionName;
    if (query.createdAfter !== null) params.createdAfter = query.createdAfter;
    if (query.createdBefore !== null) params.createdBefore = query.createdBefore;
    const rows = this.#listStatement(query).all(params);
    const hasMore = rows.length > query.pageSize;
    const items = rows.slice(0, query.pageSize).map((row) => parseRecord(row.record));
    return { items, hasMore };
  }

  async getRun(projectId: string, appName: string, runId: string): Promise<RunRecordWithResult | undefined> {
    await this.#flushForRead('get');
    const row = this.#selectOne.get({ id: runId, projectId, appName });
    if (row === undefined) return undefined;
    const record: RunRecordWithResult = parseRecord(row.record);
    // Expired and not yet swept: no longer returned.
    if (typeof row.result === 'string' && typeof row.result_expires_at === 'string' && row.result_expires_at > new Date().toISOString()) {
      record.result = JSON.parse(row.result) as unknown;
    }
    return record;
  }

  /** Forgets the results expired by `now`, `batchSize` rows per statement (each a short transaction). */
  async dropExpiredResults(options: { batchSize: number; now?: Date }): Promise<number> {
    await this.flush();
    // Closed while it flushed (a sweep as the process stops): nothing to give back.
    if (this.#closed) return 0;
    const statement = this.#db.prepare(
      `UPDATE runs SET result = NULL, result_expires_at = NULL WHERE id IN (
         SELECT id FROM runs WHERE result_expires_at IS NOT NULL AND result_expires_at <= :now LIMIT :limit)`,
    );
    const now = (options.now ?? new Date()).toISOString();
    let dropped = 0;
    for (;;) {
      const changes = Number(statement.run({ now, limit: options.batchSize }).changes);
      dropped += changes;
      if (changes < options.batchSize) return dropped;
    }
  }

  async countRuns(projectId: string, appName: string): Promise<RunCounts> {
    await this.flush();
    const row = this.#db
      .prepare(
        `SELECT count(*) AS total, coalesce(sum(status = 'success'), 0) AS success, coalesce(sum(status = 'failure'), 0) AS failure,
                coalesce(sum(status IN ('pending', 'running')), 0) AS inFlight, max(json_extract(record, '$.createdAt')) AS last
           FROM runs WHERE project_id = :projectId AND app_name = :appName`,
      )
      .get({ projectId, appName })!;
    return {
      total: Number(row.total),
      success: Number(row.success),
      failure: Number(row.failure),
      inFlight: Number(row.inFlight),
      lastRunTime: typeof row.last === 'string' ? row.last : null,
    };
  }

  /** Runs whose webhook is still owed are deleted too: past their retention, nobody will read their outcome. */
  async pruneExpired(options: PruneOptions): Promise<number> {
    await this.flush();
    const now = options.now ?? new Date();
    const createdAt = `json_extract(record, '$.createdAt')`;
    const ofApp = this.#db.prepare(
      `DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE project_id = :projectId AND app_name = :appName AND ${createdAt} < :cutoff LIMIT :limit)`,
    );
    let deleted = 0;
    const inBatches = (statement: StatementSync, params: Record<string, SQLInputValue>): void => {
      for (;;) {
        const { changes } = statement.run({ ...params, limit: options.batchSize });
        deleted += Number(changes);
        if (Number(changes) < options.batchSize) return;
      }
    };
    for (const app of options.apps) {
      inBatches(ofApp, { projectId: app.projectId, appName: app.appName, cutoff: retentionCutoff(now, app.days) });
    }
    const others = this.#db.prepare(
      `DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE ${createdAt} < :cutoff
         AND (project_id, app_name) NOT IN (SELECT value ->> 0, value ->> 1 FROM json_each(:apps)) LIMIT :limit)`,
    );
    const apps = JSON.stringify(options.apps.map((app) => [app.projectId, app.appName]));
    inBatches(others, { cutoff: retentionCutoff(now, options.defaultDays), apps });
    return deleted;
  }

  /**
   * What a killed predecessor left, settled once, as the replica starts (before it saves anything), as lost-runs.ts
   * settles it for every store: the lost runs' failures go to `deliver` unsigned (this file never keeps a secret:
   * it is what the management API reads). A run it had completed has only its record here, not its result: its
   * delivery, interrupted, is recorded failed rather than sent without it. Shared by `runlet dev` and
   * `runlet sidecar --run-store sqlite`.
   */
  deliverOwedWebhooks(deliver: (record: RunRecord) => boolean): void {
    const owing = this.runsOwingWebhooks();
    const owner = { processName: this.#processName, where: this.path, logger: this.#logger, save: (record: RunRecord) => this.save(record) };
    const abandoned = failUnfinished(this.unfinishedRuns(), owner);
    deliverOwed([...owing, ...abandoned], owner, deliver);
  }

  /**
   * Runs left `pending` or `running` by a process that was killed: nothing will ever complete them. Read at
   * start; records saved and not yet committed count in the state they were saved in.
   */
  unfinishedRuns(): RunRecord[] {
    const runs = new Map<string, RunRecord>();
    for (const row of this.#db.prepare(`SELECT record, webhook_destination FROM runs WHERE status IN ('pending', 'running')`).all()) {
      const record = parseStoredRun(row);
      runs.set(record.id, record);
    }
    for (const record of [...(this.#inFlight?.records.values() ?? []), ...this.#pending.values()]) runs.set(record.id, record);
    return [...runs.values()]
      .filter((record) => record.status === 'pending' || record.status === 'running')
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /**
   * Finished runs whose webhook delivery a killed process left pending, with their destinations: it was under
   * way or waiting for a retry, or (reason `replica_lost`) it was owed by a process killed before it could
   * deliver. Read at start, before anything is saved.
   */
  runsOwingWebhooks(): RunRecord[] {
    return this.#db
      .prepare(`SELECT record, webhook_destination FROM runs WHERE webhook_destination IS NOT NULL AND status NOT IN ('pending', 'running') ORDER BY id`)
      .all()
      .map(parseStoredRun)
      .filter((record) => pendingDestination(record.webhook) !== null);
  }

  /**
   * A read answers with every run saved so far, so what is pending is committed first. When it cannot be (a
   * full disk), the reader is told so, with the cause, rather than given a list missing runs it was told about.
   */
  async #flushForRead(what: 'list' | 'get'): Promise<void> {
    try {
      await this.flush();
    } catch (error) {
      const cause = rootMessage(error);
      this.#logger.error({ err: error, path: this.path, pending: this.#pending.size }, `run store ${this.path}: cannot answer a ${what} of runs while its records cannot be written: ${cause}`);
      throw new ProblemError(
        Problems.runStoreUnavailable,
        `the run store ${this.path} cannot write the ${this.#pending.size} run records waiting to be listed (${cause}); ` +
          'runs are read again once they are written: free space on its disk, then retry',
        { cause: error, headers: { 'retry-after': String(READ_RETRY_AFTER_SECONDS) } },
      );
    }
  }

  #assertOpen(record: RunRecord): void {
    if (this.#closed) throw new Error(`run store ${this.path} is closed: cannot save run ${record.id}`);
  }

  #enqueue(record: RunRecord, durable: boolean): void {
    this.#assertOpen(record);
    this.#pending.set(record.id, record);
    this.#schedule(durable);
  }

  /** Plans the post of what is pending: after the batch in flight commits, on the next turn, or at the window's end. */
  #schedule(durable: boolean): void {
    // The reply of the batch in flight schedules what is pending then.
    if (this.#inFlight !== null || this.#scheduled?.kind === 'soon') return;
    const sinceLastWrite = performance.now() - this.#lastWriteAt;
    if (durable || this.#pending.size >= this.#maxBatchSize || sinceLastWrite >= this.#minWriteIntervalMs) {
      this.#cancelScheduled();
      // After the current turn of the event loop: every save of this turn joins one transaction.
      this.#scheduled = { kind: 'soon', handle: setImmediate(this.#postFromSchedule) };
    } else if (!this.#scheduled) {
      this.#scheduled = { kind: 'later', handle: setTimeout(this.#postFromSchedule, this.#minWriteIntervalMs - sinceLastWrite) };
    }
  }

  #cancelScheduled(): void {
    if (this.#scheduled?.kind === 'soon') clearImmediate(this.#scheduled.handle);
    else if (this.#scheduled?.kind === 'later') clearTimeout(this.#scheduled.handle);
    this.#scheduled = null;
  }

  readonly #postFromSchedule = (): void => {
    this.#scheduled = null;
    if (!this.#closed) this.#postPending();
  };

  /** Posts every pending record to the writer as one batch, serialised now, in the state it has now. */
  #postPending(): void {
    if (this.#inFlight !== null || this.#pending.size === 0) return;
    const batch: Batch = { records: this.#pending, waiters: this.#durableWaiters };
    this.#pending = new Map();
    this.#durableWaiters = [];
    const rows: Array<string | number | null> = [];
    for (const record of batch.records.values()) {
      const kept = keptResultOf(record);
      rows.push(record.id, record.projectId, record.appName, record.async ? 1 : 0, record.status, JSON.stringify(record), pendingDestination(record.webhook), kept?.json ?? null, kept?.expiresAt ?? null);
    }
    this.#inFlight = batch;
    this.#lastWriteAt = performance.now();
    const writer = (this.#writer ??= this.#startWriter());
    // Referenced while a batch is in flight, so the process waits for its commit; idle, it never holds it open.
    writer.ref();
    writer.postMessage({ type: 'write', rows } satisfies WriterRequest);
  }

  #startWriter(): Worker {
    const settings: WriterSettings = { path: this.path, busyTimeoutMs: BUSY_TIMEOUT_MS };
    const writer = new Worker(WRITER_MODULE, { workerData: settings });
    writer.unref();
    writer.on('message', (reply: WriterReply) => this.#settle(reply));
    writer.on('error', (error) => this.#logger.error({ err: error, path: this.path }, 'the run store\'s writer thread failed'));
    writer.on('exit', (code) => {
      if (this.#writer !== writer) return;
      this.#writer = null;
      // Not asked to stop: the batch in flight was not committed (a started transaction is rolled back).
      this.#settle({ type: 'failed', error: new Error(`the writer thread exited (code ${code})`) });
    });
    return writer;
  }

  async #stopWriter(): Promise<void> {
    const writer = this.#writer;
    if (writer === null) return;
    this.#writer = null;
    const exited = new Promise<void>((resolve) => writer.once('exit', () => resolve()));
    writer.ref();
    writer.postMessage({ type: 'close' } satisfies WriterRequest);
    await exited;
  }

  /**
   * The writer's answer for the batch in flight: its waiters are resolved, or on failure rejected and its
   * records queued again; then what was saved meanwhile is scheduled. A failed batch's records are retried with
   * the next save or flush, not at once: a write that keeps failing is not retried in a loop.
   */
  #settle(reply: WriterReply): void {
    const batch = this.#inFlight;
    if (batch === null) return;
    this.#inFlight = null;
    this.#writer?.unref();
    const savedMeanwhile = this.#pending.size > 0;
    if (reply.type === 'committed') {
      this.#batches += 1;
      this.#recordsWritten += batch.records.size;
      for (const waiter of batch.waiters) waiter.resolve();
    } else {
      this.#fail(batch, reply.error);
    }
    if (savedMeanwhile && !this.#closed) this.#schedule(this.#durableWaiters.length > 0);
  }

  #fail(batch: Batch, cause: Error): void {
    const error = new Error(`run store ${this.path}: writing a batch of ${batch.records.size} run records failed`, { cause });
    // Saves of the same records since are the same references: the union is every state still to write.
    for (const [id, record] of this.#pending) batch.records.set(id, record);
    // Runs whose durable save this was are refused by their callers: never written later.
    let refused = 0;
    for (const waiter of batch.waiters) if (waiter.id !== undefined && batch.records.delete(waiter.id)) refused += 1;
    this.#pending = batch.records;
    this.#logger.error({ err: error, retried: batch.records.size, refused, durableWaiters: batch.waiters.length }, error.message);
    for (const waiter of batch.waiters) waiter.reject(error);
  }

  #listStatement(query: ListRunsQuery): StatementSync {
    const hasBefore = query.beforeId !== null;
    const hasStatus = query.status !== null;
    const { functionName, createdAfter, createdBefore } = query;
    const key = [hasBefore, query.asyncOnly, hasStatus, functionName !== null, createdAfter !== null, createdBefore !== null].join('/');
    let statement = this.#listStatements.get(key);
    if (statement === undefined) {
      const conditions = ['project_id = :projectId', 'app_name = :appName'];
      if (hasBefore) conditions.push('id < :beforeId');
      if (query.asyncOnly) conditions.push('async = 1');
      if (hasStatus) conditions.push('status = :status');
      // From the record: createdAt is always Date#toISOString's form, so text order is time order.
      if (functionName !== null) conditions.push(`json_extract(record, '$.functionName') = :functionName`);
      if (createdAfter !== null) conditions.push(`json_extract(record, '$.createdAt') >= :createdAfter`);
      if (createdBefore !== null) conditions.push(`json_extract(record, '$.createdAt') < :createdBefore`);
      statement = this.#db.prepare(
        `SELECT record FROM runs WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT :limit`,
      );
      this.#listStatements.set(key, statement);
    }
    return statement;
  }
}

/** Opens the file, saying which path could not be opened and why (SQLite says only "unable to open database file"). */
function openDatabase(path: string, dataDir: string): DatabaseSync {
  try {
    return new DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS });
  } catch (cause) {
    throw new Error(`run store ${path}: cannot open the database: ${whyNotWritable(dataDir) ?? (cause as Error).message}`, { cause });
  }
}

/** Why the directory cannot be written into, when it cannot: the cause SQLite does not name. */
function whyNotWritable(dataDir: string): string | undefined {
  try {
    accessSync(dataDir, fsConstants.W_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EROFS') return `${dataDir} is on a read-only file system (EROFS): give --data-dir a writable directory`;
    if (code === 'EACCES' || code === 'EPERM') return `${dataDir} is not writable by this user (uid ${process.getuid?.()}, ${code}): give --data-dir a writable directory`;
    return `${dataDir} cannot be written: ${(error as Error).message}`;
  }
}

/** `path` or its nearest ancestor that exists. */
function nearestExisting(path: string): string {
  let current = resolve(path);
  while (!existsSync(current) && dirname(current) !== current) current = dirname(current);
  return current;
}

/** The innermost cause's message: what the disk said, under the store's own wrapping. */
function rootMessage(error: unknown): string {
  let current = error;
  while (current instanceof Error && current.cause !== undefined) current = current.cause;
  return current instanceof Error ? current.message : String(current);
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

/** A row's record, with the destination of its pending webhook remembered so saving it again keeps the column. */
function parseStoredRun(row: Record<string, SQLOutputValue>): RunRecord {
  const record = parseRecord(row.record);
  if (record.webhook !== null && typeof row.webhook_destination === 'string') rememberDestination(record.webhook, row.webhook_destination);
  return record;
}

function parseRecord(column: unknown): RunRecord {
  if (typeof column !== 'string') {
    throw new Error(`run store: record column holds ${typeof column}, expected JSON text`);
  }
  // Written by this store from a RunRecord (#writePending); the schema version guards its shape.
  return JSON.parse(column) as RunRecord;
}
