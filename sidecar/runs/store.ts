import type { RunRecord, RunStatus } from '../../crds/run-record-schema.ts';

/**
 * Where the sidecar writes run records. Implementations batch: a record saved several times before a flush
 * is written once, in its latest state (the store keeps the reference and serialises it when it writes).
 */
export interface RunStore {
  /** Upserts the record in a coming batch; never blocks the caller (sync and stream runs). */
  save(record: RunRecord): void;
  /**
   * Upserts the record and resolves once it is durably committed — an async run is answered `202` only
   * after this. Concurrent calls share one write. Rejects when the record could not be made durable.
   */
  saveDurably(record: RunRecord): Promise<void>;
  /** Resolves once everything saved so far is committed. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface ListRunsQuery {
  projectId: string;
  appName: string;
  /** 1..500 */
  pageSize: number;
  /** Return only runs whose id sorts before this one (ids are UUID v7: older). */
  beforeId: string | null;
  asyncOnly: boolean;
  status: RunStatus | null;
}

export interface RunPage {
  /** Newest first. */
  items: RunRecord[];
  /** Present when more items exist past the last one returned. */
  hasMore: boolean;
}

/** Where the management API reads runs from: SQLite in `runlet dev`, the RunLog cache in a cluster. */
export interface RunSource {
  listRuns(query: ListRunsQuery): Promise<RunPage>;
  getRun(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
}
