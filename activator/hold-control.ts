// The operator's way to the calls a holder holds: list them (the management API shows them `pending`, so a call
// waiting at zero can be found and cancelled by id) and cancel a sync or stream one (its caller is answered
// `409 run-cancelled`). Served on the holder's own port, under a prefix no run path has, to requests signed
// with the holder control key (operator/autoscaling/holder-key.ts: the operator's and activators' alone, never
// copied into an App namespace), each within a minute of when it was signed.
//
// Why ask the holders rather than have them write what they hold: a hold then costs no API write at all (a
// burst of 1,000 held sync calls would otherwise be 1,000 writes, or a summary rewritten every second while it
// lasts), and a list of an App at zero costs one request to each holder (two by default), answered from memory.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RunMode, RunRecord } from '../crds/run-record-schema.ts';
import { heldRun, type HeldCallLine } from './held-run.ts';

export const HOLD_CONTROL_PREFIX = '/.runlet/held/';
export const HOLD_CONTROL_HEADER = 'x-runlet-holder-control';
/** How far a signed request's time may be from the holder's clock: skew between nodes, never a replay later. */
const CONTROL_WINDOW_MS = 60_000;

/**
 * Where the calls held for an App are listed; with `runId`, where that one is cancelled (a sync or stream call),
 * or forgotten (`forget`: an async call whose record a cancel deleted, no longer listed).
 */
export function holdControlPath(namespace: string, appName: string, runId?: string, action: 'cancel' | 'forget' = 'cancel'): string {
  const app = `${HOLD_CONTROL_PREFIX}${encodeURIComponent(namespace)}/${encodeURIComponent(appName)}`;
  return runId === undefined ? app : `${app}/${encodeURIComponent(runId)}/${action}`;
}

function mac(key: Uint8Array, method: string, path: string, at: number): Buffer {
  return createHmac('sha256', key).update(`${method} ${path} ${at}`).digest();
}

/** The header value that signs `method path` at `nowMs`. */
export function signHoldControl(key: Uint8Array, method: string, path: string, nowMs: number): string {
  return `${nowMs}.${mac(key, method, path, nowMs).toString('hex')}`;
}

function verified(key: Uint8Array, method: string, path: string, header: string | undefined, nowMs: number): boolean {
  const dot = header?.indexOf('.') ?? -1;
  if (header === undefined || dot <= 0) return false;
  const at = Number(header.slice(0, dot));
  if (!Number.isSafeInteger(at) || Math.abs(nowMs - at) > CONTROL_WINDOW_MS) return false;
  const given = Buffer.from(header.slice(dot + 1), 'hex');
  const expected = mac(key, method, path, at);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** A call this holder holds now, as listed and cancelled. */
export interface HeldEntry extends HeldCallLine {
  namespace: string;
  appName: string;
  mode: RunMode;
  /**
   * Stops a sync or stream call still waiting for a replica (its caller is answered 409 run-cancelled); absent
   * for an async call, whose record the operator cancels, and while the call is being relayed (it is the
   * replica's then: a cancel reaches it there).
   */
  cancel?: () => void;
  /**
   * An async call only: stops listing it, once a cancel deleted its record (its hand-over, finding the record
   * gone, then drops it).
   */
  forget?: () => void;
}

/** The answer to a cancel: what the operator records the cancelled run from. */
export interface HeldCancelAnswer {
  call: HeldCallLine & { mode: RunMode };
}

/** The calls held here, by App. */
export class HeldCallIndex {
  readonly #byApp = new Map<string, Map<string, HeldEntry>>();

  /** Lists `entry` until the returned function is called. */
  add(entry: HeldEntry): () => void {
    const key = `${entry.namespace}/${entry.appName}`;
    let calls = this.#byApp.get(key);
    if (calls === undefined) this.#byApp.set(key, (calls = new Map()));
    calls.set(entry.runId, entry);
    const held = calls;
    return () => {
      if (held.get(entry.runId) !== entry) return;
      held.delete(entry.runId);
      if (held.size === 0) this.#byApp.delete(key);
    };
  }

  ofApp(namespace: string, appName: string): HeldEntry[] {
    return [...(this.#byApp.get(`${namespace}/${appName}`)?.values() ?? [])];
  }

  get(namespace: string, appName: string, runId: string): HeldEntry | undefined {
    return this.#byApp.get(`${namespace}/${appName}`)?.get(runId);
  }
}

/** What a held call is listed as: pending, on this holder, its webhook secret left out. */
function listed(entry: HeldEntry, identity: string): RunRecord {
  return heldRun(entry, entry.mode, entry.namespace, entry.appName, identity).run;
}

/**
 * Answers a control request (`request.url` under HOLD_CONTROL_PREFIX): 403 unsigned, 404 no such route or no
 * such call (cancelled or relayed already), 200 `{ runs }` for a list, 202 HeldCancelAnswer for a cancel, 204
 * for a forget.
 */
export function answerHoldControl(request: IncomingMessage, response: ServerResponse, options: { key: Uint8Array; index: HeldCallIndex; identity: string; now?: () => number }): void {
  const url = request.url ?? '/';
  const path = url.split('?', 1)[0]!;
  const send = (status: number, body: unknown) => {
    if (status === 204) return void response.writeHead(204, { 'cache-control': 'no-store' }).end();
    response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    response.end(JSON.stringify(body));
  };
  if (!verified(options.key, request.method ?? '', path, request.headers[HOLD_CONTROL_HEADER] as string | undefined, (options.now ?? Date.now)())) {
    // Refused on its head: the connection is closed rather than drained, so an unsigned caller cannot make the
    // holder read (and discard) a body of any size.
    response.shouldKeepAlive = false;
    return send(403, { error: 'not signed with the holder control key, or signed more than a minute away from now' });
  }
  // A signed request's body is never read: drained, so the connection stays usable.
  request.resume();
  let parts: string[];
  try {
    parts = path.slice(HOLD_CONTROL_PREFIX.length).split('/').map((part) => decodeURIComponent(part));
  } catch {
    return send(404, { error: `${path} is not a holder control route: it does not decode` });
  }
  if (request.method === 'GET' && parts.length === 2) {
    const [namespace, appName] = parts as [string, string];
    return send(200, { runs: options.index.ofApp(namespace, appName).map((entry) => listed(entry, options.identity)) });
  }
  if (request.method === 'POST' && parts.length === 4 && parts[3] === 'cancel') {
    const [namespace, appName, runId] = parts as [string, string, string];
    const entry = options.index.get(namespace, appName, runId);
    if (entry?.cancel === undefined) return send(404, { error: `no sync or stream call ${runId} waits here for a replica of ${namespace}/${appName}` });
    entry.cancel();
    const answer: HeldCancelAnswer = { call: { runId, method: entry.method, url: entry.url, headers: entry.headers, acceptedAt: entry.acceptedAt, mode: entry.mode } };
    return send(202, answer);
  }
  if (request.method === 'POST' && parts.length === 4 && parts[3] === 'forget') {
    const [namespace, appName, runId] = parts as [string, string, string];
    const entry = options.index.get(namespace, appName, runId);
    if (entry?.forget === undefined) return send(404, { error: `no async call ${runId} of ${namespace}/${appName} is in hand here` });
    entry.forget();
    return send(204, null);
  }
  return send(404, { error: `${request.method} ${path} is not a holder control route` });
}
