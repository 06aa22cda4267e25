// A call the holder kept while its app was at zero (docs/scale-to-zero.md) reaches a replica with the run id the
// caller already has (an async call's 202 named it) and how long it waited for the replica. Only the holder may
// say so: the header carries an HMAC under a key the holder shares with the sidecars of the App's namespace (a
// key per namespace, derived by the operator: one tenant's copy is worthless in another's namespace), so no
// caller can choose a run id or forge the wait. The HMAC covers everything the header vouches for: the request
// line (method, path and query), the caller's Authorization header, the body (its SHA-256, when the holder sends
// it whole; a relayed sync or stream call's body streams through and is not covered) and when the header was
// made. So a header seen on the cluster network vouches for nothing but that very call, by that very caller, and
// only for minutes; the sidecar also takes each run id once (held-run-claims.ts). The caller's own token still
// authenticates the call as usual, before the header counts for anything.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export const HELD_RUN_HEADER = 'x-runlet-held-run';
/** The key's environment variable, for the operator (holder) and the sidecars alike. */
export const HOLDER_KEY_ENV = 'RUNLET_HOLDER_KEY';
const MIN_KEY_BYTES = 32;
/** The body field of a header whose call's body is streamed, not signed. */
export const STREAMED_BODY = '-';

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

/** A verified header: the run, and the SHA-256 (hex) the call's body must have, or null for a streamed body. */
export interface VerifiedHeldRun extends HeldRun {
  bodySha256: string | null;
}

/** The call the header is good for, as the caller sent it. */
export interface HeldCallLine {
  method: string;
  /** Path and query. */
  url: string;
  /** The caller's Authorization header, if any. */
  authorization: string | undefined;
}

const RUN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** The body field of a header for a call sent whole: its SHA-256 in hex. */
export function bodySha256(body: Uint8Array): string {
  return createHash('sha256').update(body).digest('hex');
}

function mac(key: Uint8Array, runId: string, coldStartMs: number, issuedAt: number, body: string, line: HeldCallLine): Buffer {
  // The Authorization header is hashed so that its length and characters cannot blur the fields' boundaries.
  const authorization = createHash('sha256').update(line.authorization ?? '').digest('hex');
  return createHmac('sha256', key).update(`${runId};${coldStartMs};${issuedAt};${body};${authorization};${line.method} ${line.url}`).digest();
}

/** The key from its text (hex or plain), refused when shorter than 32 bytes. */
export function holderKeyFromText(text: string): Uint8Array {
  const trimmed = text.trim();
  const key = /^([0-9a-f]{2})+$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'utf8');
  if (key.length < MIN_KEY_BYTES) throw new Error(`${HOLDER_KEY_ENV} must hold at least ${MIN_KEY_BYTES} bytes (got ${key.length})`);
  return key;
}

/**
 * The header's value for the call `line` with `body` (null: streamed, not signed), made at `now` (epoch ms):
 * `<run id>;<cold start ms>;<issued at ms>;<body SHA-256 hex | ->;<hex HMAC-SHA256>`.
 */
export function heldRunHeader(key: Uint8Array, run: HeldRun, line: HeldCallLine, body: Uint8Array | null, now = Date.now()): string {
  const coldStartMs = Math.round(run.coldStartMs);
  const issuedAt = Math.round(now);
  const bodyField = body === null ? STREAMED_BODY : bodySha256(body);
  return `${run.runId};${coldStartMs};${issuedAt};${bodyField};${mac(key, run.runId, coldStartMs, issuedAt, bodyField, line).toString('hex')}`;
}

/**
 * The held run the header vouches for on the call `line`, or null when it is absent, malformed, not signed with
 * `key` for this call and caller, or made more than HELD_RUN_MAX_AGE_MS from `now`. The body it names is the
 * caller's to check once it has it (`bodySha256`).
 */
export function verifyHeldRun(key: Uint8Array | null, value: string | string[] | undefined, line: HeldCallLine, now = Date.now()): VerifiedHeldRun | null {
  if (key === null || typeof value !== 'string') return null;
  const [runId, ms, issued, body, signature, ...extra] = value.split(';');
  if (extra.length > 0 || runId === undefined || !RUN_ID.test(runId) || signature === undefined || !SHA256_HEX.test(signature)) return null;
  if (ms === undefined || !/^\d{1,10}$/.test(ms) || issued === undefined || !/^\d{1,15}$/.test(issued)) return null;
  if (body === undefined || (body !== STREAMED_BODY && !SHA256_HEX.test(body))) return null;
  const coldStartMs = Number(ms);
  const issuedAt = Number(issued);
  if (Math.abs(now - issuedAt) > HELD_RUN_MAX_AGE_MS) return null;
  if (!timingSafeEqual(mac(key, runId, coldStartMs, issuedAt, body, line), Buffer.from(signature, 'hex'))) return null;
  return { runId, coldStartMs, bodySha256: body === STREAMED_BODY ? null : body };
}
