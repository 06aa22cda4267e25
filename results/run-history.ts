// What a store of run history answers beyond the management API's list and get: an App's counters and retention
// by age. PostgreSQL (pg-results.ts) in a cluster, SQLite (sidecar/runs/sqlite-run-store.ts) in `runlet dev`;
// one contract suite (test/results/run-history-contract.ts) holds both to the same behaviour.
import type { RunSource } from '../management/run-source.ts';

/** An App's runs as App.status shows them. */
export interface RunCounts {
  total: number;
  success: number;
  failure: number;
  inFlight: number;
  /** Creation time of the newest run; null without runs. */
  lastRunTime: string | null;
}

/** One App whose runs are kept for other than the default retention. */
export interface AppRetention {
  projectId: string;
  appName: string;
  days: number;
}

export interface PruneOptions {
  /** Runs of every App not in `apps` (deleted Apps included) are kept this many days. */
  defaultDays: number;
  apps: readonly AppRetention[];
  /** Rows deleted per statement: a short transaction each, so writers are never held up for long. */
  batchSize: number;
  now?: Date;
}

export interface RunHistory extends RunSource {
  countRuns(projectId: string, appName: string): Promise<RunCounts>;
  /** Deletes the runs older than their App's retention, in batches; resolves with the number deleted. */
  pruneExpired(options: PruneOptions): Promise<number>;
  /**
   * Forgets the kept results past their expiry (`[runs] result_ttl`), `batchSize` rows per statement; resolves
   * with how many. A get stops returning a result once it expires, swept or not: this gives the space back.
   */
  dropExpiredResults(options: { batchSize: number; now?: Date }): Promise<number>;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** The creation time before which runs kept `days` days are deleted, as createdAt is written. */
export function retentionCutoff(now: Date, days: number): string {
  return new Date(now.getTime() - days * DAY_MS).toISOString();
}
