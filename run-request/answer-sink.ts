import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';

/**
 * Where a plain (not streamed) answer is written: node's ServerResponse, or the run port's own front
 * (run-front/front-answer.ts), which answers the common call without node:http's per-request objects.
 * ServerResponse satisfies it as it is.
 */
export interface AnswerSink {
  /** True once `writeHead` was called. */
  readonly headersSent: boolean;
  /** True once the connection is gone: nothing written reaches the caller. */
  readonly destroyed: boolean;
  /** A flat list (`[name, value, name, value]`) or an object; values must be valid header text. */
  writeHead(statusCode: number, headers: OutgoingHttpHeaders | string[]): unknown;
  end(body: string): unknown;
  /** Cuts the connection: how a torn answer is signalled once its head is out. */
  destroy(): unknown;
}

/** The run port front's answer: a plain one, or node:http's response on the same connection for a stream. */
export interface StreamableAnswerSink extends AnswerSink {
  /** A response to write the answer into as it comes; only before anything else was written. */
  stream(requestHeaders: IncomingHttpHeaders): ServerResponse;
}
