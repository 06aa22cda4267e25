// Handing a held call to a replica's sidecar once one is ready: a sync or stream call is relayed as it came
// (its body is still unread in the caller's connection, so nothing was buffered while it waited), the answer
// streamed back as the sidecar writes it — SSE events arrive as they are yielded. An async call, kept whole in
// its durable record, is posted whole.
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';

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

/** Relays `request` to the replica with `extraHeaders`, and its answer to `response`; resolves when both ended. */
export function relayCall(request: IncomingMessage, response: ServerResponse, replica: ReplicaAddress, extraHeaders: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    const upstream = httpRequest(
      { host: replica.host, port: replica.port, method: request.method, path: request.url, headers: { ...endToEnd(request.headers), ...extraHeaders }, agent: false },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
        // Each chunk as it comes: a stream's events must not wait for a buffer to fill.
        response.flushHeaders();
        pipeline(answer, response).then(resolve, reject);
      },
    );
    upstream.once('error', reject);
    // The caller went away before the answer ended: so does the call to the replica (the sidecar records it).
    response.once('close', () => {
      if (!response.writableFinished) upstream.destroy();
    });
    pipeline(request, upstream).catch(reject);
  });
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
