// A call the holder kept while its app was at zero (docs/scale-to-zero.md) reaches a replica with the run id the
// caller already has (an async call's 202 named it) and how long it waited for the replica. Only the holder may
// say so: the header carries an HMAC of both under a key the holder and the sidecars share, so no caller can
// choose a run id or forge the wait. The caller's own token still authenticates the call as usual.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const HELD_RUN_HEADER = 'x-runlet-held-run';
/** The key's environment variable, for the operator (holder) and the sidecars alike. */
export const HOLDER_KEY_ENV = 'RUNLET_HOLDER_KEY';
const MIN_KEY_BYTES = 32;

export interface HeldRun {
  runId: string;
  /** Milliseconds from the call's arrival at the holder to its hand-over to this replica. */
  coldStartMs: number;
}

const RUN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function mac(key: Uint8Array, runId: string, coldStartMs: number): Buffer {
  return createHmac('sha256', key).update(`${runId};${coldStartMs}`).digest();
}

/** The key from its text (hex or plain), refused when shorter than 32 bytes. */
export function holderKeyFromText(text: string): Uint8Array {
  const trimmed = text.trim();
  const key = /^([0-9a-f]{2})+$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'utf8');
  if (key.length < MIN_KEY_BYTES) throw new Error(`${HOLDER_KEY_ENV} must hold at least ${MIN_KEY_BYTES} bytes (got ${key.length})`);
  return key;
}

/** The header's value: `<run id>;<cold start ms>;<hex HMAC-SHA256>`. */
export function heldRunHeader(key: Uint8Array, run: HeldRun): string {
  const coldStartMs = Math.round(run.coldStartMs);
  return `${run.runId};${coldStartMs};${mac(key, run.runId, coldStartMs).toString('hex')}`;
}

/** The held run the header vouches for, or null when it is absent, malformed or not signed with `key`. */
export function verifyHeldRun(key: Uint8Array | null, value: string | string[] | undefined): HeldRun | null {
  if (key === null || typeof value !== 'string') return null;
  const [runId, ms, signature, ...extra] = value.split(';');
  if (extra.length > 0 || runId === undefined || !RUN_ID.test(runId) || ms === undefined || !/^\d{1,10}$/.test(ms) || signature === undefined || !/^[0-9a-f]{64}$/.test(signature)) return null;
  const coldStartMs = Number(ms);
  return timingSafeEqual(mac(key, runId, coldStartMs), Buffer.from(signature, 'hex')) ? { runId, coldStartMs } : null;
}
