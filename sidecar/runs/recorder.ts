// Creates and completes run records. Records are mutated in place and handed to the store again at each
// transition; the store writes the latest state of each in batches, so this never waits on I/O.
import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import type { FailureReason, RunError, RunMode, RunRecord, WebhookRecord } from '../../crds/run-record-schema.ts';
import type { AppTarget } from '../apps.ts';
import type { RunStore } from './store.ts';
import { pendingDestination } from './webhook-destination.ts';

/**
 * Random bytes for 256 ids, drawn at once: on its own, `uuid` draws 16 bytes from the system per id, which
 * profiled at ~4% of a sync run's CPU in the sidecar.
 */
const randomPool = new Uint8Array(16 * 256);
let randomOffset = randomPool.length;
/** `uuid`'s monotonic state (ids of one millisecond still sort in creation order), which it skips when given bytes. */
let lastMs = Number.NEGATIVE_INFINITY;
let sequence = 0;

export function newRunId(): string {
  if (randomOffset === randomPool.length) {
    randomFillSync(randomPool);
    randomOffset = 0;
  }
  const random = randomPool.subarray(randomOffset, (randomOffset += 16));
  const now = Date.now();
  if (now > lastMs) {
    // As `uuid` seeds it: 31 random bits, so a millisecond has room for 2^31 more ids.
    sequence = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
    lastMs = now;
  } else {
    sequence = (sequence + 1) | 0;
    if (sequence === 0) lastMs++;
  }
  uuidv7({ random, msecs: lastMs, seq: sequence }, idBytes, 0);
  return formatUuid(idBytes);
}

const idBytes = new Uint8Array(16);
const idText = Buffer.alloc(36);
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

/**
 * The UUID's text form, written into one buffer and read out as one flat string: `uuid`'s own formatter joins
 * 36 pieces, ~700 bytes of garbage per id (measured with the sampling heap profiler).
 */
function formatUuid(bytes: Uint8Array): string {
  let at = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) idText[at++] = 0x2d;
    const byte = bytes[i]!;
    idText[at++] = HEX_DIGITS[byte >> 4]!;
    idText[at++] = HEX_DIGITS[byte & 0x0f]!;
  }
  return idText.toString('latin1', 0, 36);
}

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
 * WebhookForwarder.forwardAbandoned); without one it will never be sent, and is marked failed. Used on records
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
