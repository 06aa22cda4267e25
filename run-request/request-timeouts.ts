// How long the run port (the sidecar's, and `runlet dev`'s) waits for a caller's request to arrive: its head
// whole, its body byte after byte, and the whole of it. Without these bounds a caller that trickles a request
// holds a connection, and a Python call's body buffer, for ever: the pause bound alone is reset by every byte.
import type { ServerOptions } from 'node:http';
import { Problems } from '../crds/problems.ts';
import { ProblemError } from '../crds/problem.ts';

/**
 * A head is a few hundred bytes, sent in one go by any client: 10 s covers a congested mobile link many times
 * over, and is what a request from a stalled or hostile sender costs at most before it is refused.
 */
export const DEFAULT_REQUEST_HEAD_TIMEOUT_MS = 10_000;
/**
 * The longest pause between two bytes of a body: 30 s is far past any pause of a working uploader (an ingress
 * such as nginx buffers a body before it sends it on, so behind one the sidecar sees it at full speed).
 */
export const DEFAULT_REQUEST_BODY_TIMEOUT_MS = 30_000;

/**
 * The longest a request read into memory may take to arrive, head and body: a body trickled a byte every
 * 2.5 s is cut after a minute (its pauses never reach the body timeout), while a 16 MiB body, the largest
 * limit, needs only 280 KB/s to make it. Behind an ingress that buffers bodies it arrives at once.
 */
export const DEFAULT_REQUEST_DEADLINE_MS = 60_000;

/** An hour: a longer wait for a request to arrive is no bound at all. */
export const MAX_REQUEST_TIMEOUT_SECONDS = 3600;

export interface RequestTimeouts {
  /** From a request's first byte until its head is whole. */
  headMs: number;
  /** The longest pause while a body arrives. */
  bodyMs: number;
  /**
   * From a request's first byte until it is whole, for the requests read into memory: all at the front, and
   * on node:http a Python call's body or a custom app's async one (counted from its head's end there). A
   * custom app's sync call streams its body to the app instead, bounded by the run's time limit.
   */
  deadlineMs: number;
}

/** node:http's own answer to a head that did not arrive in time (its `headersTimeout`), byte for byte. */
export const HEAD_TIMEOUT_ANSWER = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';

/**
 * The options of a node:http server that bound a head's arrival. node:http checks its connections for the
 * bound on an interval (30 s by default, which let a slow head live twice its bound): a tenth of the bound
 * keeps the check within 10% of it, and at most once a second. `requestTimeout` (the whole request) stays
 * off: a custom app's upload or a long stream is bounded by the run's own time limit, and a body read into
 * memory by the body timeout and the deadline where it is read (request-body.ts).
 */
export function headTimeoutServerOptions(headMs: number): ServerOptions {
  return {
    headersTimeout: headMs,
    requestTimeout: 0,
    connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(headMs / 10))),
  };
}

/**
 * The `408` answered when a request has not arrived whole by its deadline; closed after it, as `bodyStalled`.
 */
export function requestDeadlinePassed(deadlineMs: number, receivedBytes: number, headers?: Record<string, string>): ProblemError {
  return new ProblemError(
    Problems.requestTimeout,
    `The request did not arrive whole within ${deadlineMs / 1000} s (${receivedBytes} bytes of its body came); it was not run`,
    { headers },
  );
}

/**
 * The `408` answered when a custom app's call (its body forwarded as it comes) has not arrived whole by its
 * deadline: the app has seen part of it, and its call is aborted. Closed after it.
 */
export function uploadDeadlinePassed(deadlineMs: number): ProblemError {
  return new ProblemError(
    Problems.requestTimeout,
    `The request did not arrive whole within ${deadlineMs / 1000} s; the app's call, which had part of its body, was aborted`,
    { headers: { connection: 'close' } },
  );
}

/**
 * The `408` answered when a body stops arriving. The connection is closed after it (node:http's answer is
 * given `headers` that say so; the front's says so itself), rather than kept waiting for the rest.
 */
export function bodyStalled(bodyMs: number, receivedBytes: number, headers?: Record<string, string>): ProblemError {
  return new ProblemError(
    Problems.requestTimeout,
    `No byte of the body arrived for ${bodyMs / 1000} s (after ${receivedBytes} bytes); the request was not run`,
    { headers },
  );
}
