// Handing a held call to a replica's sidecar once one is ready. A sync or stream call's body, read while it
// waited (within the holder's byte budget: hold-bounds.ts), is sent whole, so that a refusal the sidecar makes
// before the run starts (503 over-capacity: its queue is full) can be tried again, on that pod or another;
// any other answer is streamed back as the sidecar writes it — SSE events arrive as they are yielded. An async
// call, kept whole in its durable record, is posted whole.
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { problemTypeUri } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';

export interface ReplicaAddress {
  host: string;
  port: number;
}

/** Headers that describe one connection, not the message (RFC 9110 §7.6.1): never relayed. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host']);

function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) kept[name] = value;
  return kept;
}

/**
 * The refusals a sidecar makes before a run starts and records nothing of, which another attempt may pass: its
 * queue full, its runtime not ready, its request buffer full. Not `draining`: a run queued on a replica that
 * then shuts down is refused so too, after its record was made, and another attempt would make a second.
 */
const REFUSED_BEFORE_RUN = new Set([Problems.overCapacity, Problems.appUnavailable, Problems.requestBufferFull].map((problem) => problemTypeUri(problem.code)));
/** A refusal's problem is a few hundred bytes; more is not one. */
const REFUSAL_LIMIT_BYTES = 16 * 1024;

/** A held call's request, its body read whole. */
export interface BufferedCall {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A sidecar's refusal of a call, whole. */
export type Refusal = WholeAnswer & { headers: IncomingHttpHeaders };

/**
 * The relay's end: answered (the caller has the replica's answer), or refused before the run started (the
 * caller has nothing yet; `refusal` null: the replica accepted no connection).
 */
export type RelayOutcome = { answered: true } | { answered: false; refusal: Refusal | null };

/**
 * Sends `call` to the replica with `extraHeaders` and relays its answer to `response` — unless the replica
 * refused it before starting its run (a connection it never accepted, or with `sidecarAnswers` a problem of
 * REFUSED_BEFORE_RUN): then nothing is written to `response`, and the refusal is returned for the caller to try
 * again or pass on. `sidecarAnswers`: every problem answer is the sidecar's own (a Python app's; a custom app's
 * server may answer any problem itself, after its run started).
 */
export function relayBufferedCall(
  call: BufferedCall,
  response: ServerResponse,
  replica: ReplicaAddress,
  extraHeaders: Record<string, string>,
  sidecarAnswers: boolean,
): Promise<RelayOutcome> {
  return new Promise((settle, fail) => {
    // The caller went away before the answer ended: so does the call to the replica (the sidecar records it).
    const callerGone = () => {
      if (!response.writableFinished) upstream.destroy();
    };
    // Each attempt's listener goes with it: a call refused many times must not pile them up on its response.
    const resolve = (outcome: RelayOutcome) => {
      response.off('close', callerGone);
      settle(outcome);
    };
    const reject = (error: unknown) => {
      response.off('close', callerGone);
      fail(error);
    };
    const headers: Record<string, string | string[]> = { ...endToEnd(call.headers), ...extraHeaders, 'content-length': String(call.body.length) };
    // The body is whole: there is nothing to hold back until the sidecar says continue.
    delete headers.expect;
    const upstream = httpRequest({ host: replica.host, port: replica.port, method: call.method, path: call.url, headers, agent: false }, (answer) => {
      if (sidecarAnswers && answer.statusCode === 503 && isProblem(answer.headers)) {
        readRefusal(answer).then((body) => {
          if (REFUSED_BEFORE_RUN.has(problemType(body) ?? '')) resolve({ answered: false, refusal: { status: 503, body, headers: answer.headers } });
          else {
            sendRefusal(response, { status: 503, body, headers: answer.headers });
            resolve({ answered: true });
          }
        }, reject);
        return;
      }
      response.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
      // Each chunk as it comes: a stream's events must not wait for a buffer to fill.
      response.flushHeaders();
      pipeline(answer, response).then(() => resolve({ answered: true }), reject);
    });
    upstream.once('error', (error: NodeJS.ErrnoException) => {
      // Nothing reached a sidecar that never accepted the connection: as a refusal before the run.
      if (error.code === 'ECONNREFUSED') resolve({ answered: false, refusal: null });
      else reject(error);
    });
    response.once('close', callerGone);
    upstream.end(call.body);
  });
}

function isProblem(headers: IncomingHttpHeaders): boolean {
  return headers['content-type']?.startsWith('application/problem+json') === true;
}

function readRefusal(answer: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    answer.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length <= REFUSAL_LIMIT_BYTES) chunks.push(chunk);
    });
    answer.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    answer.once('error', reject);
  });
}

function problemType(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { type?: unknown };
    return typeof parsed.type === 'string' ? parsed.type : undefined;
  } catch {
    return undefined;
  }
}

/** Passes on a refusal `relayBufferedCall` returned: the caller's answer once no attempt is left. */
export function sendRefusal(response: ServerResponse, refusal: Refusal): void {
  const kept = endToEnd(refusal.headers);
  delete kept['content-length'];
  response.writeHead(refusal.status, kept);
  response.end(refusal.body);
}

export interface WholeCall {
  method: string;
  /** Path and query, as the caller sent them. */
  url: string;
  headers: Record<string, string>;
  body: Buffer;
}

export interface WholeAnswer {
  status: number;
  body: string;
}

/** Posts a whole call to the replica; its answer, read whole (an async call's is a small 202 or a problem). */
export function postWholeCall(call: WholeCall, replica: ReplicaAddress, extraHeaders: Record<string, string>, timeoutMs: number): Promise<WholeAnswer> {
  return new Promise((resolve, reject) => {
    const upstream = httpRequest(
      { host: replica.host, port: replica.port, method: call.method, path: call.url, headers: { ...call.headers, ...extraHeaders, 'content-length': String(call.body.length) }, agent: false, timeout: timeoutMs },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.once('end', () => resolve({ status: answer.statusCode ?? 502, body: Buffer.concat(chunks).toString('utf8') }));
        answer.once('error', reject);
      },
    );
    upstream.once('timeout', () => upstream.destroy(new Error(`no answer from ${replica.host}:${replica.port} within ${timeoutMs} ms`)));
    upstream.once('error', reject);
    upstream.end(call.body);
  });
}
