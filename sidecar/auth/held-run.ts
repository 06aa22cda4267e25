// A call the holder kept while its app was at zero (docs/scale-to-zero.md) reaches a replica with the run id the
// caller already has (an async call's 202 named it) and how long it waited for the replica. Only the holder may
// say so: the header carries an HMAC under a key the holder and the sidecars share, so no caller can choose a run
// id or forge the wait. The HMAC also covers the request line (method, path and query) and when the header was
// made, so a header seen on the cluster network vouches for nothing but that call, and only for minutes: replayed
// on another call (another app, project or webhook address) or later, it is ignored. The caller's own token
// still authenticates the call as usual.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const HELD_RUN_HEADER = 'x-runlet-held-run';
/** The key's environment variable, for the operator (holder) and the sidecars alike. */
export const HOLDER_KEY_ENV = 'RUNLET_HOLDER_KEY';
const MIN_KEY_BYTES = 32;

/**
 * How long a header stays good, either way from the sidecar's clock: a hand-over uses it at once (each attempt
 * signs anew), so this only has to cover the skew between the operator's node's clock and the app's.
 */
export const HELD_RUN_MAX_AGE_MS = 5 * 60_000;

export interface HeldRun {
  runId: string;
  /** Milliseconds from the call's arrival at the holder to its hand-over to this replica. */
  coldStartMs: number;
}

/** The request line the header is good for: the call as the caller sent it. */
export interface HeldCallLine {
  method: string;
  /** Path and query. */
  url: string;
}

const RUN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function mac(key: Uint8Array, runId: string, coldStartMs: number, issuedAt: number, line: HeldCallLine): Buffer {
  return createHmac('sha256', key).update(`${runId};${coldStartMs};${issuedAt};${line.method} ${line.url}`).digest();
}

/** The key from its text (hex or plain), refused when shorter than 32 bytes. */
export function holderKeyFromText(text: string): Uint8Array {
  const trimmed = text.trim();
  const key = /^([0-9a-f]{2})+$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'utf8');
  if (key.length < MIN_KEY_BYTES) throw new Error(`${HOLDER_KEY_ENV} must hold at least ${MIN_KEY_BYTES} bytes (got ${key.length})`);
  return key;
}

/** The header's value for the call `line`, made at `now` (epoch ms): `<run id>;<cold start ms>;<issued at ms>;<hex HMAC-SHA256>`. */
export function heldRunHeader(key: Uint8Array, run: HeldRun, line: HeldCallLine, now = Date.now()): string {
  const coldStartMs = Math.round(run.coldStartMs);
  const issuedAt = Math.round(now);
  return `${run.runId};${coldStartMs};${issuedAt};${mac(key, run.runId, coldStartMs, issuedAt, line).toString('hex')}`;
}

/**
 * The held run the header vouches for on the call `line`, or null when it is absent, malformed, not signed with
 * `key` for this call, or made more than HELD_RUN_MAX_AGE_MS from `now`.
 */
export function verifyHeldRun(key: Uint8Array | null, value: string | string[] | undefined, line: HeldCallLine, now = Date.now()): HeldRun | null {
  if (key === null || typeof value !== 'string') return null;
  const [runId, ms, issued, signature, ...extra] = value.split(';');
  if (extra.length > 0 || runId === undefined || !RUN_ID.test(runId) || signature === undefined || !/^[0-9a-f]{64}$/.test(signature)) return null;
  if (ms === undefined || !/^\d{1,10}$/.test(ms) || issued === undefined || !/^\d{1,15}$/.test(issued)) return null;
  const coldStartMs = Number(ms);
  const issuedAt = Number(issued);
  if (Math.abs(now - issuedAt) > HELD_RUN_MAX_AGE_MS) return null;
  return timingSafeEqual(mac(key, runId, coldStartMs, issuedAt, line), Buffer.from(signature, 'hex')) ? { runId, coldStartMs } : null;
}
