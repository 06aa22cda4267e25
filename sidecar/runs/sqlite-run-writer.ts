// The SQLite run store's writer: a worker thread that owns the store's write connection. Each batch the store
// posts is upserted in one transaction, and the reply follows the commit. The commits, and the checkpoints
// SQLite runs inside some of them (a checkpoint fsyncs the WAL and the database file: tens of milliseconds on
// a busy disk), happen here, never on the event loop that answers calls.
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

/** Columns of one run in a batch's flat `rows`, in this order. */
const ROW_COLUMNS = ['id', 'project_id', 'app_name', 'async', 'status', 'record', 'webhook_destination', 'result', 'result_expires_at'] as const;
/** Written only when a save carries them: a record read back from the file (a lost run) holds no result. */
const KEPT_COLUMNS: ReadonlySet<string> = new Set(['result', 'result_expires_at']);

export interface WriterSettings {
  /** The database file, already created and migrated by the store. */
  path: string;
  /** How long a write waits for a lock held by another connection. */
  busyTimeoutMs: number;
}

/**
 * From the store: upsert `rows` in one transaction, or close. `rows` is flat (cheap to post): per run, one after
 * another, its id, project id, app name, async (1 or 0), status, record (JSON), pending webhook's
 * destination (or null), and its kept result's JSON and expiry (or nulls).
 */
export type WriterRequest = { type: 'write'; rows: Array<string | number | null> } | { type: 'close' };

/** To the store, one per write, in order. */
export type WriterReply = { type: 'committed' } | { type: 'failed'; error: Error };

/** The write connection and its statements, opened on the first write (an open failure fails that write). */
interface Connection {
  db: DatabaseSync;
  begin: StatementSync;
  commit: StatementSync;
  rollback: StatementSync;
  upsert: StatementSync;
}

function open(settings: WriterSettings): Connection {
  const db = new DatabaseSync(settings.path, { timeout: settings.busyTimeoutMs });
  try {
    // Per connection (the WAL mode is the file's): see the store's constructor for what NORMAL promises.
    db.exec('PRAGMA synchronous = NORMAL');
    const placeholders = ROW_COLUMNS.map(() => '?').join(', ');
    const updates = ROW_COLUMNS.filter((column) => column !== 'id').map((column) =>
      KEPT_COLUMNS.has(column) ? `${column} = coalesce(excluded.${column}, ${column})` : `${column} = excluded.${column}`,
    );
    return {
      db,
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      // Positional parameters: binding them costs less than named ones, per row of every batch.
      upsert: db.prepare(
        `INSERT INTO runs (${ROW_COLUMNS.join(', ')}) VALUES (${placeholders}) ON CONFLICT (id) DO UPDATE SET ${updates.join(', ')}`,
      ),
    };
  } catch (error) {
    db.close();
    throw error;
  }
}

function write(connection: Connection, rows: Array<string | number | null>): void {
  const width = ROW_COLUMNS.length;
  connection.begin.run();
  try {
    for (let i = 0; i < rows.length; i += width) {
      connection.upsert.run(rows[i]!, rows[i + 1]!, rows[i + 2]!, rows[i + 3]!, rows[i + 4]!, rows[i + 5]!, rows[i + 6] ?? null, rows[i + 7] ?? null, rows[i + 8] ?? null);
    }
    connection.commit.run();
  } catch (error) {
    if (connection.db.isTransaction) connection.rollback.run();
    throw error;
  }
}

function serve(port: NonNullable<typeof parentPort>, settings: WriterSettings): void {
  let connection: Connection | null = null;
  port.on('message', (request: WriterRequest) => {
    if (request.type === 'close') {
      connection?.db.close();
      // Nothing else keeps the thread alive: it exits, and the store sees its 'exit'.
      port.close();
      return;
    }
    let reply: WriterReply;
    try {
      connection ??= open(settings);
      write(connection, request.rows);
      reply = { type: 'committed' };
    } catch (error) {
      reply = { type: 'failed', error: error instanceof Error ? error : new Error(String(error)) };
    }
    port.postMessage(reply);
  });
}

if (parentPort === null) throw new Error('sqlite-run-writer.ts runs as a worker thread of the SQLite run store, not on its own');
serve(parentPort, workerData as WriterSettings);
