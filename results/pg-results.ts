// The results store on PostgreSQL: run records written in idempotent batches (the collector's, results/
// collector.ts), read back by the management API (it is a RunSource), counted for App.status, and pruned by age.
// Every query is a named prepared statement: PostgreSQL plans each once per pooled connection.
import type { Pool, QueryConfig } from 'pg';
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { ListRunsQuery, RunPage } from '../management/run-source.ts';
import { recordVersion } from './record-version.ts';
import { retentionCutoff, type PruneOptions, type RunCounts, type RunHistory } from './run-history.ts';

const UPSERT: QueryConfig['text'] = `
  INSERT INTO runlet_runs AS r (id, project_id, app_name, function_name, async, status, created_at, replica, version, unfinished, record)
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::text[], $7::timestamptz[], $8::text[], $9::bigint[], $10::boolean[], $11::json[])
  ON CONFLICT (id) DO UPDATE SET
    status = excluded.status, version = excluded.version, unfinished = excluded.unfinished, record = excluded.record
  WHERE r.version < excluded.version`;

export class PgResults implements RunHistory {
  readonly #pool: Pool;
  /** List statements by filter shape: each shape gets its own plan, using the index its filters fit. */
  readonly #listStatements = new Map<string, { name: string; text: string }>();

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /**
   * Upserts the records in one statement; resolves with the number of rows written. A record older than, or
   * as old as, its row writes nothing: a replayed batch writes nothing twice.
   */
  async writeBatch(records: readonly RunRecord[]): Promise<number> {
    // ON CONFLICT may touch a row once per statement: of one run's states in a batch, the latest goes.
    const latest = new Map<string, { record: RunRecord; version: number }>();
    for (const record of records) {
      const version = recordVersion(record);
      const seen = latest.get(record.id);
      if (seen === undefined || seen.version < version) latest.set(record.id, { record, version });
    }
    if (latest.size === 0) return 0;
    const columns: unknown[][] = [[], [], [], [], [], [], [], [], [], [], []];
    for (const { record, version } of latest.values()) {
      const row = [record.id, textColumn(record.projectId), textColumn(record.appName), textColumn(record.functionName), record.async, record.status, record.createdAt, textColumn(record.replica), version, isUnfinished(record), JSON.stringify(record)];
      row.forEach((value, index) => columns[index]!.push(value));
    }
    const result = await this.#pool.query({ name: 'runlet-upsert-runs', text: UPSERT, values: columns });
    return result.rowCount ?? 0;
  }

  async listRuns(query: ListRunsQuery): Promise<RunPage> {
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
    if (query.createdAfter !== null) add('after', (p) => `created_at >= ${p}::timestamptz`, query.createdAfter);
    if (query.createdBefore !== null) add('until', (p) => `created_at < ${p}::timestamptz`, query.createdBefore);
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

  async getRun(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined> {
    // Not a UUID: no such run (the uuid cast would raise instead).
    if (!UUID.test(runId)) return undefined;
    const { rows } = await this.#pool.query<{ record: RunRecord }>({
      name: 'runlet-get-run',
      text: 'SELECT record FROM runlet_runs WHERE id = $1::uuid AND project_id = $2 AND app_name = $3',
      values: [runId, textColumn(projectId), textColumn(appName)],
    });
    return rows[0]?.record;
  }

  /** Runs only their pod can finish (in flight, or a webhook owed), oldest first, after the run `afterId`. */
  async unfinishedRuns(afterId: string | null, limit: number): Promise<RunRecord[]> {
    const { rows } = await this.#pool.query<{ record: RunRecord }>({
      name: 'runlet-unfinished-runs',
      text: 'SELECT record FROM runlet_runs WHERE unfinished AND id > $1::uuid ORDER BY id LIMIT $2',
      values: [afterId ?? '00000000-0000-0000-0000-000000000000', limit],
    });
    return rows.map((row) => row.record);
  }

  async countRuns(projectId: string, appName: string): Promise<RunCounts> {
    const { rows } = await this.#pool.query<{ total: string; success: string; failure: string; in_flight: string; last: Date | null }>({
      name: 'runlet-count-runs',
      text: `SELECT count(*) AS total,
                    count(*) FILTER (WHERE status = 'success') AS success,
                    count(*) FILTER (WHERE status = 'failure') AS failure,
                    count(*) FILTER (WHERE status IN ('pending', 'running')) AS in_flight,
                    max(created_at) AS last
               FROM runlet_runs WHERE project_id = $1 AND app_name = $2`,
      values: [textColumn(projectId), textColumn(appName)],
    });
    const row = rows[0]!;
    return {
      total: Number(row.total),
      success: Number(row.success),
      failure: Number(row.failure),
      inFlight: Number(row.in_flight),
      lastRunTime: row.last === null ? null : row.last.toISOString(),
    };
  }

  /** Oldest first, `batchSize` rows per statement (each its own short transaction), until none is left. */
  async pruneExpired(options: PruneOptions): Promise<number> {
    const now = options.now ?? new Date();
    const cutoff = (days: number) => retentionCutoff(now, days);
    let deleted = 0;
    for (const app of options.apps) {
      deleted += await this.#deleteInBatches({
        name: 'runlet-prune-app',
        text: `DELETE FROM runlet_runs WHERE id IN (
                 SELECT id FROM runlet_runs WHERE project_id = $1 AND app_name = $2 AND created_at < $3::timestamptz LIMIT $4)`,
        values: [app.projectId, app.appName, cutoff(app.days), options.batchSize],
      });
    }
    deleted += await this.#deleteInBatches({
      name: 'runlet-prune-default',
      text: `DELETE FROM runlet_runs WHERE id IN (
               SELECT id FROM runlet_runs WHERE created_at < $1::timestamptz
                 AND (project_id, app_name) NOT IN (SELECT * FROM unnest($2::text[], $3::text[]))
               ORDER BY created_at LIMIT $4)`,
      values: [cutoff(options.defaultDays), options.apps.map((app) => app.projectId), options.apps.map((app) => app.appName), options.batchSize],
    });
    return deleted;
  }

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

/** Something only the run's pod can finish: the run itself, or its webhook delivery. */
function isUnfinished(record: RunRecord): boolean {
  return record.status === 'pending' || record.status === 'running' || record.webhook?.state === 'pending';
}

/**
 * PostgreSQL's text cannot hold U+0000 (a batch holding one would be refused whole, and retried for ever): the
 * filtered columns hold U+FFFD instead, and a filter is written the same way. The record (a json column, which
 * keeps the escape) is shown unchanged.
 */
function textColumn(value: string): string {
  return value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
