// The results store on PostgreSQL: run records written in idempotent batches (the collector's, results/
// collector.ts), read back by the management API (it is a RunSource), counted for App.status, and pruned by age.
// Every query is a named prepared statement: PostgreSQL plans each once per pooled connection.
import type { Pool, QueryConfig } from 'pg';
import type { RunRecord, RunRecordWithResult } from '../crds/run-record-schema.ts';
import type { ListRunsQuery, RunPage } from '../management/run-source.ts';
import { recordVersion } from './record-version.ts';
import { retentionCutoff, type PruneOptions, type RunCounts, type RunHistory } from './run-history.ts';

// A kept result is written once it arrives, even with a record as new as the row's (the finished record may
// have been collected a batch before its result), and never erased by a record without one (a run closed by
// the operator's sweep).
//
// A row is one App's run: keyed by (project_id, app_name, id) (migration 0006), so a record never writes another
// App's run of the same id, and the update never changes a row's App.
//
// The order its locks are taken in, so that no two writers of the store can deadlock (see LOCK ORDER below):
// the run rows first, in key order (the rows are given sorted); then, once every row is written (the sort of
// `taken` reads `written` whole), the counters' rows of every App written, in one statement in key order. Those
// are inserted if new and locked if not (ON CONFLICT DO UPDATE locks a row even where its WHERE updates none),
// so the counting triggers (migration 0003), which fire at the end of the statement, one for the runs inserted
// and one for those updated, find every counters' row they write already held. Without this, the two triggers
// could take two Apps' rows in opposite orders, and two batches holding runs of the same two Apps deadlocked.
const UPSERT: QueryConfig['text'] = `
  WITH written AS (
    INSERT INTO runlet_runs AS r (id, project_id, app_name, function_name, async, status, created_at, replica, version, unfinished, record, result, result_expires_at)
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::text[], $7::timestamptz[], $8::text[], $9::bigint[], $10::boolean[], $11::json[], $12::json[], $13::timestamptz[])
    ON CONFLICT (project_id, app_name, id) DO UPDATE SET
      status = excluded.status, version = excluded.version, unfinished = excluded.unfinished, record = excluded.record,
      result = coalesce(excluded.result, r.result), result_expires_at = coalesce(excluded.result_expires_at, r.result_expires_at)
    WHERE r.version < excluded.version OR (r.result IS NULL AND excluded.result IS NOT NULL)
    RETURNING project_id, app_name
  ), taken AS (
    INSERT INTO runlet_app_run_counts AS c (project_id, app_name, total, success, failure, in_flight)
    SELECT DISTINCT project_id, app_name, 0, 0, 0, 0 FROM written ORDER BY project_id, app_name
    ON CONFLICT (project_id, app_name) DO UPDATE SET total = c.total WHERE false
  )
  SELECT count(*)::int AS written FROM written`;

// LOCK ORDER. Every statement that writes runlet_runs takes its run rows before any counters' row (the
// counting triggers run after the rows are written), and
//   - takes its run rows in key order (RUN_KEY_ORDER: id, then project and app, bytewise): the upsert writes them
//     sorted; the deletes and the results' expiry lock the batch they chose in that order first (FOR UPDATE after
//     ORDER BY locks in the sorted order);
//   - takes every counters' row it touches in one statement, in (project_id, app_name) order: the upsert's
//     `taken`, a delete's one trigger.
// A statement holding counters' rows waits only for other counters' rows, so a cycle of waits would lie either
// among run rows or among counters' rows, each taken in one global order by every writer: there is none, and
// PostgreSQL never has to abort a batch to break one. (Each statement is its own transaction.)

/** One App's counters, as the store keeps them. */
export interface AppRunCountsRow {
  projectId: string;
  appName: string;
  counts: RunCounts;
}

export class PgResults implements RunHistory {
  readonly #pool: Pool;
  /** List statements by filter shape: each shape gets its own plan, using the index its filters fit. */
  readonly #listStatements = new Map<string, { name: string; text: string }>();

  /** Throws (503 run-store-unavailable) while the store cannot be used yet: see open.ts's openResultsWhenReachable. */
  readonly #assertOpen: () => void;

  constructor(pool: Pool, options: { assertOpen?: () => void } = {}) {
    this.#pool = pool;
    this.#assertOpen = options.assertOpen ?? (() => {});
  }

  /**
   * Upserts the records in one statement; resolves with the number of rows written. A record older than, or
   * as old as, its row writes nothing: a replayed batch writes nothing twice. A record's `result` (a kept
   * result, as the shipper carries it) goes in its own column, with `resultExpiresAt`, never in `record`.
   */
  async writeBatch(records: readonly RunRecordWithResult[]): Promise<number> {
    this.#assertOpen();
    // ON CONFLICT may touch a row once per statement: of one run's states in a batch, the latest goes, with
    // the result any of them carried. A run is its App's: the same id in two Apps is two runs.
    const latest = new Map<string, { record: RunRecordWithResult; version: number; result: unknown }>();
    for (const record of records) {
      const version = recordVersion(record);
      const key = JSON.stringify([record.id.toLowerCase(), textColumn(record.projectId), textColumn(record.appName)]);
      const seen = latest.get(key);
      const result = record.result !== undefined ? record.result : seen?.result;
      if (seen === undefined || seen.version < version) latest.set(key, { record, version, result });
      else seen.result = result;
    }
    if (latest.size === 0) return 0;
    const columns: unknown[][] = [[], [], [], [], [], [], [], [], [], [], [], [], []];
    // Rows are locked in key order, so two batches holding the same runs (a retry overtaking itself on another
    // operator replica) wait for one another rather than deadlock.
    const rows = [...latest.values()].sort((a, b) => compareRunKeys(a.record, b.record));
    for (const { record: withResult, version, result } of rows) {
      const { result: _carried, ...record } = withResult;
      const kept = result !== undefined && record.resultExpiresAt !== undefined;
      const row = [record.id, textColumn(record.projectId), textColumn(record.appName), textColumn(record.functionName), record.async, record.status, record.createdAt, textColumn(record.replica), version, isUnfinished(record), JSON.stringify(record), kept ? JSON.stringify(result) : null, kept ? record.resultExpiresAt : null];
      row.forEach((value, index) => columns[index]!.push(value));
    }
    // Nothing is retried here: no deadlock can abort the statement (LOCK ORDER), and at READ COMMITTED it meets
    // no serialization failure. Whatever else fails it fails the batch whole, which its sender sends again (the
    // collector answers 503 and the pod retries; the sweep tries on its next pass).
    const { rows: [written] } = await this.#pool.query<{ written: number }>({ name: 'runlet-upsert-runs', text: UPSERT, values: columns });
    return written!.written;
  }

  async listRuns(query: ListRunsQuery): Promise<RunPage> {
    this.#assertOpen();
    const values: unknown[] = [textColumn(query.projectId), textColumn(query.appName)];
    const conditions = ['project_id = $1', 'app_name = $2'];
    const shape: string[] = [];
    const add = (key: string, condition: (placeholder: string) => string, value: unknown): void => {
      values.push(value);
      conditions.push(condition(`$${values.length}`));
      shape.push(key);
    };
    if (query.beforeId !== null) add('before', (p) => `id < ${p}::uuid`, query.beforeId);
    if (query.asyncOnly) conditions.push('async'), shape.push('async');
    if (query.status !== null) add('status', (p) => `status = ${p}`, query.status);
    if (query.functionName !== null) add('function', (p) => `function_name = ${p}`, textColumn(query.functionName));
    // Each time bound also bounds the ids (see idRangeOf): the scan down the id index starts at the window's end
    // and stops at its start, rather than walking the app's whole history for rows outside it.
    if (query.createdAfter !== null) {
      add('after', (p) => `created_at >= ${p}::timestamptz`, query.createdAfter);
      const from = idRangeOf(query.createdAfter).from;
      if (from !== null) add('from-id', (p) => `id >= ${p}::uuid`, from);
    }
    if (query.createdBefore !== null) {
      add('until', (p) => `created_at < ${p}::timestamptz`, query.createdBefore);
      const below = idRangeOf(query.createdBefore).below;
      if (below !== null) add('below-id', (p) => `id < ${p}::uuid`, below);
    }
    // One row past the page tells whether another page exists.
    values.push(query.pageSize + 1);
    const key = shape.join('+');
    let statement = this.#listStatements.get(key);
    if (statement === undefined) {
      statement = {
        name: `runlet-list-runs:${key}`,
        text: `SELECT record FROM runlet_runs WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT $${values.length}`,
      };
      this.#listStatements.set(key, statement);
    }
    const { rows } = await this.#pool.query<{ record: RunRecord }>({ ...statement, values });
    return { items: rows.slice(0, query.pageSize).map((row) => row.record), hasMore: rows.length > query.pageSize };
  }

  async getRun(projectId: string, appName: string, runId: string): Promise<RunRecordWithResult | undefined> {
    this.#assertOpen();
    // Not a UUID: no such run (the uuid cast would raise instead).
    if (!UUID.test(runId)) return undefined;
    // A result past its expiry and not yet swept is no longer returned. The json column comes back parsed.
    const { rows } = await this.#pool.query<{ record: RunRecord; result: unknown; live: boolean }>({
      name: 'runlet-get-run',
      text: `SELECT record, result, result_expires_at > now() AS live
               FROM runlet_runs WHERE id = $1::uuid AND project_id = $2 AND app_name = $3`,
      values: [runId, textColumn(projectId), textColumn(appName)],
    });
    const row = rows[0];
    if (row === undefined) return undefined;
    return row.live === true ? { ...row.record, result: row.result } : row.record;
  }

  /** Forgets the results expired by `now`, `batchSize` rows per statement (each its own short transaction). */
  async dropExpiredResults(options: { batchSize: number; now?: Date }): Promise<number> {
    this.#assertOpen();
    return this.#deleteInBatches({
      name: 'runlet-drop-expired-results',
      text: inIdOrder({
        // A run's result and its expiry come with its finished record, and a replay brings the same: a row chosen
        // stays expired, whatever is written to it meanwhile.
        choose: 'SELECT project_id, app_name, id FROM runlet_runs WHERE result_expires_at <= $1::timestamptz LIMIT $2',
        change: 'UPDATE runlet_runs SET result = NULL, result_expires_at = NULL',
      }),
      values: [(options.now ?? new Date()).toISOString(), options.batchSize],
    });
  }

  /**
   * Runs only their pod can finish (in flight, or a webhook owed), oldest first, after the run `after` (the last
   * of the previous page; null for the first). Paged by the whole key: one id may stand for runs of two Apps.
   */
  async unfinishedRuns(after: RunKey | null, limit: number): Promise<RunRecord[]> {
    this.#assertOpen();
    const { rows } = await this.#pool.query<{ record: RunRecord }>({
      name: 'runlet-unfinished-runs',
      text: `SELECT record FROM runlet_runs WHERE unfinished AND (id, project_id, app_name) > ($1::uuid, $2, $3)
              ORDER BY id, project_id, app_name LIMIT $4`,
      values: after === null ? ['00000000-0000-0000-0000-000000000000', '', '', limit] : [after.id, textColumn(after.projectId), textColumn(after.appName), limit],
    });
    return rows.map((row) => row.record);
  }

  /** From the counters the writes keep (migration 0003): one row, however long the App's history. */
  async countRuns(projectId: string, appName: string): Promise<RunCounts> {
    this.#assertOpen();
    const { rows } = await this.#pool.query<CountsRow>({
      name: 'runlet-count-runs',
      text: `SELECT ${COUNTS_COLUMNS} FROM runlet_app_run_counts WHERE project_id = $1 AND app_name = $2`,
      values: [textColumn(projectId), textColumn(appName)],
    });
    const row = rows[0];
    return row === undefined ? { total: 0, success: 0, failure: 0, inFlight: 0, lastRunTime: null } : runCounts(row);
  }

  /** Every App's counters that has runs kept (or had): one row per App, for App.status.runs. */
  async allRunCounts(): Promise<AppRunCountsRow[]> {
    const { rows } = await this.#pool.query<CountsRow & { project_id: string; app_name: string }>({
      name: 'runlet-all-run-counts',
      text: `SELECT project_id, app_name, ${COUNTS_COLUMNS} FROM runlet_app_run_counts`,
    });
    return rows.map((row) => ({ projectId: row.project_id, appName: row.app_name, counts: runCounts(row) }));
  }

  /** Marks the operator replica `identity` present now (migration 0005); forgets replicas unseen for a day. */
  async seeOperatorReplica(identity: string): Promise<void> {
    this.#assertOpen();
    await this.#pool.query({
      name: 'runlet-see-operator-replica',
      text: `WITH forgotten AS (DELETE FROM runlet_operator_replicas WHERE seen_at < now() - interval '1 day')
             INSERT INTO runlet_operator_replicas (identity, seen_at) VALUES ($1, now())
             ON CONFLICT (identity) DO UPDATE SET seen_at = now()`,
      values: [textColumn(identity)],
    });
  }

  /**
   * Marks the operator replica `identity` gone (it stopped): it finishes nothing more. Known still, as unseen
   * (what it left pending is then closed as an operator replica's), until the day's forgetting.
   */
  async markOperatorReplicaGone(identity: string): Promise<void> {
    this.#assertOpen();
    await this.#pool.query({
      name: 'runlet-operator-replica-gone',
      text: "UPDATE runlet_operator_replicas SET seen_at = '-infinity' WHERE identity = $1",
      values: [textColumn(identity)],
    });
  }

  /**
   * The operator replicas known to the store, each with whether it was seen in the last `withinSeconds` (by the
   * database's clock, which marked them: no two nodes' clocks are compared).
   */
  async operatorReplicas(withinSeconds: number): Promise<Map<string, { seen: boolean }>> {
    this.#assertOpen();
    const { rows } = await this.#pool.query<{ identity: string; seen: boolean }>({
      name: 'runlet-operator-replicas',
      text: 'SELECT identity, seen_at > now() - make_interval(secs => $1) AS seen FROM runlet_operator_replicas',
      values: [withinSeconds],
    });
    return new Map(rows.map((row) => [row.identity, { seen: row.seen }]));
  }

  /** Oldest first, `batchSize` rows per statement (each its own short transaction), until none is left. */
  async pruneExpired(options: PruneOptions): Promise<number> {
    this.#assertOpen();
    const now = options.now ?? new Date();
    const cutoff = (days: number) => retentionCutoff(now, days);
    let deleted = 0;
    for (const app of options.apps) {
      deleted += await this.#deleteInBatches({
        name: 'runlet-prune-app',
        text: inIdOrder({
          choose: 'SELECT project_id, app_name, id FROM runlet_runs WHERE project_id = $1 AND app_name = $2 AND created_at < $3::timestamptz LIMIT $4',
          change: 'DELETE FROM runlet_runs',
        }),
        values: [app.projectId, app.appName, cutoff(app.days), options.batchSize],
      });
    }
    deleted += await this.#deleteInBatches({
      name: 'runlet-prune-default',
      text: inIdOrder({
        choose: `SELECT project_id, app_name, id FROM runlet_runs WHERE created_at < $1::timestamptz
                   AND (project_id, app_name) NOT IN (SELECT * FROM unnest($2::text[], $3::text[]))
                 ORDER BY created_at LIMIT $4`,
        change: 'DELETE FROM runlet_runs',
      }),
      values: [cutoff(options.defaultDays), options.apps.map((app) => app.projectId), options.apps.map((app) => app.appName), options.batchSize],
    });
    return deleted;
  }

  /** Runs the statement until it touches fewer rows than its last parameter, the batch size. */
  async #deleteInBatches(statement: QueryConfig): Promise<number> {
    const batchSize = statement.values!.at(-1) as number;
    let deleted = 0;
    for (;;) {
      const { rowCount } = await this.#pool.query(statement);
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < batchSize) return deleted;
    }
  }
}

/**
 * `change` (an UPDATE or DELETE of runlet_runs, without its WHERE) applied to the rows `choose` picks (their
 * keys: project_id, app_name, id; by whatever index fits its filter), those rows locked in key order first (LOCK
 * ORDER); one deleted meanwhile is skipped. `choose` must pick rows that stay chosen whatever a batch writes to
 * them meanwhile: nothing is checked again once they are locked.
 */
function inIdOrder(statement: { choose: string; change: string }): string {
  return `WITH chosen AS MATERIALIZED (${statement.choose}),
            locked AS MATERIALIZED (SELECT project_id, app_name, id FROM runlet_runs WHERE (project_id, app_name, id) IN (SELECT project_id, app_name, id FROM chosen)
                                     ORDER BY ${RUN_KEY_ORDER} FOR UPDATE)
          ${statement.change} WHERE (project_id, app_name, id) IN (SELECT project_id, app_name, id FROM locked)`;
}

/** A run's key in the store (migration 0006): its App's and its id. */
export type RunKey = Pick<RunRecord, 'id' | 'projectId' | 'appName'>;

/**
 * The one order every writer locks run rows in (LOCK ORDER): id, then project and app compared bytewise (COLLATE
 * "C"), as compareRunKeys sorts a batch (code units: the same order for the ASCII names Kubernetes allows).
 */
const RUN_KEY_ORDER = 'id, project_id COLLATE "C", app_name COLLATE "C"';

function compareRunKeys(a: RunKey, b: RunKey): number {
  for (const [x, y] of [[a.id.toLowerCase(), b.id.toLowerCase()], [textColumn(a.projectId), textColumn(b.projectId)], [textColumn(a.appName), textColumn(b.appName)]] as const) {
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

const COUNTS_COLUMNS = 'total, success, failure, in_flight, last_run_at';

/** bigint columns come back as strings. */
interface CountsRow {
  total: string;
  success: string;
  failure: string;
  in_flight: string;
  last_run_at: Date | null;
}

function runCounts(row: CountsRow): RunCounts {
  return {
    total: Number(row.total),
    success: Number(row.success),
    failure: Number(row.failure),
    inFlight: Number(row.in_flight),
    lastRunTime: row.last_run_at === null ? null : row.last_run_at.toISOString(),
  };
}

/** Something only the run's pod can finish: the run itself, or its webhook delivery. */
function isUnfinished(record: RunRecord): boolean {
  return record.status === 'pending' || record.status === 'running' || record.webhook?.state === 'pending';
}

/**
 * PostgreSQL's text cannot hold U+0000 (a batch holding one would be refused whole, and retried for ever): the
 * filtered columns hold U+FFFD instead, and a filter is written the same way. The record (a json column, which
 * keeps the escape) is shown unchanged.
 */
export function textColumn(value: string): string {
  return value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * How far a run's `createdAt` can stray from the instant its UUID v7 id was minted. The id comes first: the
 * sidecar mints it as the call arrives and records the run at once, while a call held at zero gets its id
 * from the activator and its record from the sidecar that takes it, at most the holder's held-call TTL later
 * (activator/holder.ts DEFAULT_HELD_CALL_TTL_MS, 24 h; a sync call's wait is shorter). Either may run on another
 * node, whose clock may be ahead or behind by as much as a hand-over header tolerates (HELD_RUN_MAX_AGE_MS, 5
 * min). Tests hold these to their sources.
 */
export const ID_LEAD_MS = 5 * 60_000;
export const ID_LAG_MS = 24 * 3_600_000 + ID_LEAD_MS;

const MAX_UUID_MS = 2 ** 48 - 1;

/**
 * The ids a run created at or after `instant` can have (`from`: `id >= from`), and those one created before it
 * can have (`below`: `id < below`): the smallest UUID v7 of `instant - ID_LAG_MS`, and of `instant + ID_LEAD_MS`.
 * null where the bound would leave UUID v7's 48-bit millisecond range, so nothing is excluded.
 */
export function idRangeOf(instant: string): { from: string | null; below: string | null } {
  const ms = Date.parse(instant);
  if (Number.isNaN(ms)) return { from: null, below: null };
  return { from: smallestIdAt(ms - ID_LAG_MS), below: smallestIdAt(ms + ID_LEAD_MS) };
}

/** The smallest UUID whose first 48 bits are `ms`: every UUID v7 minted in that millisecond or later sorts at or above it. */
function smallestIdAt(ms: number): string | null {
  if (ms <= 0 || ms > MAX_UUID_MS) return null;
  const hex = Math.floor(ms).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8)}-0000-0000-000000000000`;
}
