// What each namespace holds in the results store, read from the counters the writes keep (migrations 0003 and
// 0007: runs, record bytes and kept-result bytes per App, summed per namespace), and the database's size. The
// collector reads one namespace's usage at each batch (namespace-quotas.ts), the operator every namespace's for
// its metrics (operator/results-usage.ts): each a read of a few rows, however long the history.
import type { Pool } from 'pg';
import { textColumn } from './pg-results.ts';

/** One namespace's share of the store. Bytes are the JSON text as written, before PostgreSQL compresses it. */
export interface NamespaceUsage {
  runs: number;
  recordBytes: number;
  keptResultBytes: number;
}

/** A run of a batch, as the store keys it whatever its primary key: by project, app and id. */
export interface RunKey {
  appName: string;
  id: string;
}

/** A run the store holds: its record's bytes as written, and whether it holds a kept result. */
export interface HeldRun {
  recordBytes: number;
  keptResult: boolean;
}

export const NO_USAGE: NamespaceUsage = Object.freeze({ runs: 0, recordBytes: 0, keptResultBytes: 0 });

export class NamespaceUsageReader {
  readonly #pool: Pool;
  readonly #assertOpen: () => void;

  constructor(pool: Pool, options: { assertOpen?: () => void } = {}) {
    this.#pool = pool;
    this.#assertOpen = options.assertOpen ?? (() => {});
  }

  async usageOf(namespace: string): Promise<NamespaceUsage> {
    this.#assertOpen();
    const { rows } = await this.#pool.query<UsageRow>({
      name: 'runlet-namespace-usage',
      text: `SELECT ${USAGE_SUMS} FROM runlet_app_run_counts WHERE project_id = $1`,
      values: [textColumn(namespace)],
    });
    return rows[0] === undefined ? NO_USAGE : usage(rows[0]);
  }

  /** Every namespace that has (or had) runs kept. */
  async allUsage(): Promise<Map<string, NamespaceUsage>> {
    this.#assertOpen();
    const { rows } = await this.#pool.query<UsageRow & { project_id: string }>({
      name: 'runlet-all-namespace-usage',
      text: `SELECT project_id, ${USAGE_SUMS} FROM runlet_app_run_counts GROUP BY project_id`,
    });
    return new Map(rows.map((row) => [row.project_id, usage(row)]));
  }

  /** The database's size on disk (pg_database_size: tables, indexes, TOAST, free space not yet reused). */
  async databaseBytes(): Promise<number> {
    this.#assertOpen();
    const { rows } = await this.#pool.query<{ bytes: string }>({ name: 'runlet-database-bytes', text: 'SELECT pg_database_size(current_database())::text AS bytes' });
    return Number(rows[0]!.bytes);
  }

  /**
   * Which of `runs` the store holds already, each with its record's bytes and whether it holds its kept result: a
   * record of such a run is a later state, and its result's bytes are counted already. Matched on (project, app,
   * id), which an index leads with whichever key the table has.
   */
  async heldRuns(namespace: string, runs: readonly RunKey[]): Promise<Map<string, HeldRun>> {
    this.#assertOpen();
    if (runs.length === 0) return new Map();
    const { rows } = await this.#pool.query<{ app_name: string; id: string; record_bytes: number; kept_result: boolean }>({
      name: 'runlet-held-runs',
      text: `SELECT app_name, id::text AS id, octet_length(record::text) AS record_bytes, result IS NOT NULL AS kept_result FROM runlet_runs
              WHERE project_id = $1 AND (app_name, id) IN (SELECT * FROM unnest($2::text[], $3::uuid[]))`,
      values: [textColumn(namespace), runs.map((run) => textColumn(run.appName)), runs.map((run) => run.id)],
    });
    return new Map(rows.map((row) => [runKeyText(row.app_name, row.id), { recordBytes: row.record_bytes, keptResult: row.kept_result }]));
  }
}

/** One text per run for maps: the app as the store's column holds it, and the id in lower case as uuid::text gives it. */
export function runKeyText(appName: string, id: string): string {
  return `${textColumn(appName)}/${id.toLowerCase()}`;
}

const USAGE_SUMS = `coalesce(sum(total), 0)::text AS runs, coalesce(sum(record_bytes), 0)::text AS record_bytes,
  coalesce(sum(kept_result_bytes), 0)::text AS kept_result_bytes`;

/** Sums of bigints come back as text (numeric): well within a double's exact integers for any real store. */
interface UsageRow {
  runs: string;
  record_bytes: string;
  kept_result_bytes: string;
}

function usage(row: UsageRow): NamespaceUsage {
  return { runs: Number(row.runs), recordBytes: Number(row.record_bytes), keptResultBytes: Number(row.kept_result_bytes) };
}
