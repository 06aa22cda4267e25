// A request of the run interface as the pipeline sees it, whichever way it arrived: read whole by the run
// port's front (the hot path), or as node:http's request and response (everything else). What the pipeline
// asks of it — where a stream is written, the request's raw webhook secret — is answered here for both.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { AnswerSink, StreamableAnswerSink } from '../run-request/answer-sink.ts';
import type { AppTarget } from './apps.ts';
import { webhookSecretSent } from './webhook-forwarding.ts';

/** A POST the run port's front read whole: what it hands to `handleWhole`. */
export interface WholeRequest {
  method: string;
  url: string;
  /** Lower-case names, one value each (the front passes requests with a repeated header on to node:http). */
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface Exchange {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  answer: AnswerSink;
  /** The body, when the front read it whole; null when it is still to be read from `node.request`. */
  body: Buffer | null;
  /** node:http's request and response, for a body read as it comes and an answer streamed; null for a whole request. */
  node: { request: IncomingMessage; response: ServerResponse } | null;
  /** The front's answer to a whole request, which lends its connection to a node:http response for a stream. */
  front: StreamableAnswerSink | null;
}

export function nodeHttpExchange(request: IncomingMessage, response: ServerResponse): Exchange {
  return { method: request.method ?? 'GET', url: request.url ?? '/', headers: request.headers, answer: response, body: null, node: { request, response }, front: null };
}

export function wholeExchange(request: WholeRequest, answer: StreamableAnswerSink): Exchange {
  return { method: request.method, url: request.url, headers: request.headers, answer, body: request.body, node: null, front: answer };
}

/** Where a stream is written: node's response, or the one the front lends its connection to. */
export function streamedResponse(exchange: Exchange): ServerResponse {
  if (exchange.node !== null) return exchange.node.response;
  if (exchange.front !== null) return exchange.front.stream(exchange.headers);
  throw new Error("an exchange with neither node:http's response nor the front's answer");
}

/**
 * node:http's request and response of a custom app's call, which streams the request's body. A whole request
 * never gets here unless its app changed to a custom one after the front asked (`handleWhole`): the caller is
 * told to retry, which the front then passes on to node:http.
 */
export function nodeExchange(exchange: Exchange, target: AppTarget): { request: IncomingMessage; response: ServerResponse } {
  if (exchange.node !== null) return exchange.node;
  throw new ProblemError(Problems.appUnavailable, `App ${target.projectId}/${target.appName} changed while the call arrived; retry`, {
    headers: { 'retry-after': '1' },
  });
}

/**
 * `X-Webhook-Secret` as the caller sent it: node:http joins a repeated header into one value, so its raw
 * headers are read; the front passes a request with a repeated header on to node:http, so its one value is.
 */
export function webhookSecretOf(exchange: Exchange): string | string[] | undefined {
  return exchange.node === null ? exchange.headers['x-webhook-secret'] : webhookSecretSent(exchange.node.request.rawHeaders);
}
