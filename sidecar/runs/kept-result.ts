// A run's result kept for later (`[runs] keep_results`): the JSON text the caller was answered with, held by
// reference beside its record, never in it. The record is what RunLogs and the list show; only the stores that
// keep results (SQLite, the results store) write the text, in a column of its own, and the get of the run
// returns it until it expires.
import type { RunRecord } from '../../crds/run-record-schema.ts';
import type { RunOutcome } from '../modes/outcome.ts';

/** An App's setting, from spec.runs. */
export interface ResultKeeping {
  maxBytes: number;
  ttlSeconds: number;
}

export interface KeptResult {
  /** The result as JSON text: the function's result, a stream's items as a list, or a failed run's error. */
  json: string;
  expiresAt: string;
}

/** Keyed by the record: it lives as long as the record the store holds. */
const kept = new WeakMap<RunRecord, KeptResult>();

/**
 * Keeps the outcome of a finished run, or marks it not kept when it is larger than the App allows. The text is
 * the one already built for the caller's answer or the webhook; a failed run keeps its error.
 */
export function keepResult(record: RunRecord, outcome: RunOutcome, keeping: ResultKeeping, now = Date.now()): void {
  // A successful run without its text had a result past the app's result limit (a stream's list): not kept.
  const json = record.status === 'success' ? (outcome.success ? outcome.resultJson : null) : JSON.stringify(record.error ?? outcome.error);
  // A UTF-16 length at most a third of the bound cannot exceed it in UTF-8: most results skip the count.
  const fits = json !== null && (json.length * 3 <= keeping.maxBytes || Buffer.byteLength(json) <= keeping.maxBytes);
  record.resultKept = fits;
  if (json === null || !fits) return;
  const expiresAt = new Date(now + keeping.ttlSeconds * 1000).toISOString();
  record.resultExpiresAt = expiresAt;
  kept.set(record, { json, expiresAt });
}

/** Keeps `result` beside `record` again: a result a journal held across a restart of the sidecar. */
export function restoreKeptResult(record: RunRecord, result: KeptResult): void {
  kept.set(record, result);
}

export function keptResultOf(record: RunRecord): KeptResult | undefined {
  return kept.get(record);
}

/**
 * Lets a run's kept result go, and says so in its record: where the result cannot travel (a store refused the
 * record with it), the run is still recorded, as a run whose result was not kept.
 */
export function forgetKeptResult(record: RunRecord): void {
  kept.delete(record);
  record.resultKept = false;
  delete record.resultExpiresAt;
}
