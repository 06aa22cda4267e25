// Where the management API reads runs from: SQLite in `runlet dev`, PostgreSQL (results/) or the RunLog cache in a
// cluster.
import type { RunRecord, RunStatus } from '../crds/run-record-schema.ts';

export interface ListRunsQuery {
  projectId: string;
  appName: string;
  /** 1..500 */
  pageSize: number;
  /** Return only runs whose id sorts before this one (ids are UUID v7: older). */
  beforeId: string | null;
  asyncOnly: boolean;
  status: RunStatus | null;
  functionName: string | null;
  /** Only runs created at or after this instant (ISO 8601, UTC, as Date#toISOString writes it). */
  createdAfter: string | null;
  /** Only runs created before this instant (same form): consecutive windows never overlap. */
  createdBefore: string | null;
}

export interface RunPage {
  /** Newest first. */
  items: RunRecord[];
  /** Present when more items exist past the last one returned. */
  hasMore: boolean;
}

export interface RunSource {
  listRuns(query: ListRunsQuery): Promise<RunPage>;
  getRun(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
}
