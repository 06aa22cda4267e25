// Creates and completes run records. Records are mutated in place and handed to the store again at each
// transition; the store writes the latest state of each in batches, so this never waits on I/O.
import type { FailureReason, RunError, RunMode, RunRecord, WebhookRecord } from '../../crds/run-record-schema.ts';
import type { AppTarget } from '../apps.ts';
import type { RunStore } from './store.ts';
import { pendingDestination } from './webhook-destination.ts';

export interface RunStart {
  id: string;
  /** Whose run: the app's target, or only its names (a held call refused before its app was looked up). */
  target: Pick<AppTarget, 'projectId' | 'appName'>;
  functionName: string;
  method: string;
  mode: RunMode;
  async: boolean;
  webhook: WebhookRecord | null;
  /** The request's arrival, from `performance.now()`, so response time covers queueing. */
  receivedAt: number;
  /** How long the holder kept the call while the app was at zero; null or absent when it did not. */
  coldStartMs?: number | null;
}

export interface RunEnd {
  statusCode: number;
  error?: RunError | null;
  reason?: FailureReason | null;
  /** Cancelled runs (the caller went away mid-stream) are neither success nor failure. */
  cancelled?: boolean;
}

export class RunRecorder {
  readonly #store: RunStore;
  readonly #replica: string;
  /** Monotonic start of each record, by id, so durations never depend on the wall clock. */
  readonly #clocks = new Map<string, { receivedAt: number; startedAt: number }>();

  constructor(store: RunStore, replica: string) {
    this.#store = store;
    this.#replica = replica;
  }

  get store(): RunStore {
    return this.#store;
  }

  /** A run waiting for a slot (async runs, and sync runs queued by admission). Not yet saved. */
  pending(start: RunStart): RunRecord {
    const record: RunRecord = {
      id: start.id,
      projectId: start.target.projectId,
      appName: start.target.appName,
      functionName: start.functionName,
      method: start.method,
      mode: start.mode,
      async: start.async,
      status: 'pending',
      statusCode: null,
      error: null,
      reason: null,
      createdAt: isoNow(),
      startedAt: null,
      completedAt: null,
      queueTimeMs: null,
      runtimeMs: null,
      responseTimeMs: null,
      replica: this.#replica,
      webhook: start.webhook,
    };
    if (typeof start.coldStartMs === 'number') record.coldStartMs = start.coldStartMs;
    this.#clocks.set(start.id, { receivedAt: start.receivedAt, startedAt: start.receivedAt });
    return record;
  }

  /** The run got its slot and is being sent to the app. */
  running(record: RunRecord): void {
    const clock = this.#clocks.get(record.id);
    const now = performance.now();
    record.status = 'running';
    record.startedAt = isoNow();
    if (clock) {
      clock.startedAt = now;
      record.queueTimeMs = roundMs(now - clock.receivedAt);
    }
    this.#store.save(record);
  }

  /** Completes the run; returns its run time in milliseconds (for the caller's envelope). */
  finish(record: RunRecord, end: RunEnd): number {
    const clock = this.#clocks.get(record.id);
    this.#clocks.delete(record.id);
    const now = performance.now();
    const runtimeMs = clock ? roundMs(now - clock.startedAt) : 0;
    record.status = end.cancelled ? 'cancelled' : end.error || end.reason ? 'failure' : 'success';
    record.statusCode = end.statusCode;
    record.error = end.error ?? null;
    record.reason = end.reason ?? null;
    record.completedAt = isoNow();
    record.runtimeMs = record.startedAt ? runtimeMs : null;
    record.responseTimeMs = clock ? roundMs(now - clock.receivedAt) : null;
    this.#store.save(record);
    return runtimeMs;
  }

  /** Re-saves a record whose webhook state changed after the run completed. */
  touch(record: RunRecord): void {
    this.#store.save(record);
  }
}

/**
 * Closes a run its replica can no longer complete (the replica was killed or lost): `failure` with the reason.
 * Its webhook stays pending when the store kept its destination (the caller delivers the failure, see
 * WebhookForwarder.forwardOwed); without one it will never be sent, and is marked failed. Used on records
 * read back from a store.
 */
export function markAbandoned(record: RunRecord, reason: FailureReason, message: string): void {
  record.status = 'failure';
  record.reason = reason;
  record.error = { type: 'ReplicaLost', message };
  record.completedAt = new Date().toISOString();
  if (record.webhook && record.webhook.state === 'pending' && pendingDestination(record.webhook) === null) {
    record.webhook.state = 'failed';
    record.webhook.lastError = `not delivered: ${message}`;
  }
}

/** The last wall-clock millisecond formatted, and its text: a run formats three, mostly in the same millisecond. */
let isoMs = Number.NaN;
let isoText = '';

/** `new Date().toISOString()`, formatted once per millisecond: under load, many runs share each one. */
function isoNow(): string {
  const now = Date.now();
  if (now !== isoMs) {
    isoMs = now;
    isoText = new Date(now).toISOString();
  }
  return isoText;
}

function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
