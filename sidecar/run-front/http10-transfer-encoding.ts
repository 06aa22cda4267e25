// An HTTP/1.0 request carrying Transfer-Encoding. HTTP/1.0 has no transfer codings: a server that reads such a
// body as chunked and a proxy before it that reads it by its Content-Length (or until the connection ends)
// disagree on where the request stops, which is how requests are smuggled past the proxy. RFC 9112 §6.1: a
// server "MUST treat the message as if the framing is faulty, even if a Content-Length is present, and close
// the connection after processing the message". node:http (llhttp) reads it as chunked and serves it, so the
// run port refuses it before any handler: 400, then the connection is closed. The front never reads one
// itself (request-head.ts takes only `HTTP/1.1` heads, and none with Transfer-Encoding): it reaches node:http.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PROBLEM_CONTENT_TYPE, ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import { newRunId } from '../../run-request/run-id.ts';

const REFUSAL = new ProblemError(
  Problems.malformedRequest,
  'an HTTP/1.0 request may not carry Transfer-Encoding (RFC 9112 §6.1: its framing is faulty); send HTTP/1.1, or a Content-Length without Transfer-Encoding',
);
const REFUSAL_BODY = JSON.stringify(REFUSAL.toBody());

/** True when `request` is HTTP/1.0 with a Transfer-Encoding header: it has been answered 400, and the connection closes after. */
export function refusedHttp10TransferEncoding(request: IncomingMessage, response: ServerResponse): boolean {
  if (request.httpVersionMajor !== 1 || request.httpVersionMinor !== 0 || request.headers['transfer-encoding'] === undefined) return false;
  // Nothing more of this connection is read as requests: its bytes after the head may be anything. The length
  // is given: an HTTP/1.0 answer without one would be read until the connection closes.
  response.shouldKeepAlive = false;
  response.writeHead(REFUSAL.status, {
    'content-type': PROBLEM_CONTENT_TYPE,
    'content-length': Buffer.byteLength(REFUSAL_BODY),
    connection: 'close',
    'x-request-id': newRunId(),
  });
  response.end(REFUSAL_BODY);
  return true;
}
