// The sidecar's side of runtime/python/PROTOCOL.md: one call of a function over the app's keep-alive connections.
import type { Readable } from 'node:stream';
import type { AppTarget } from '../apps.ts';
import { stopperOf, type CallStopper } from './runtime-connections.ts';
import { Problems } from '../../crds/problems.ts';
import { ProblemError } from '../../crds/problem.ts';
import { TIMEOUT_ERROR_TYPE } from '../../crds/run-error-types.ts';
import type { FailureReason, RunError } from '../../crds/run-record-schema.ts';

export const RUNTIME_STREAM_TYPE = 'application/x-runlet-stream';

/** How the runtime answered, in the terms the modes act on. */
export type RuntimeAnswer =
  | { kind: 'result'; json: string }
  | { kind: 'stream'; body: Readable }
  /** A large result handed over as it arrives, for the caller's answer to pass on (`relayLargeBody`). */
  | { kind: 'relayed-result'; body: Readable }
  | { kind: 'function-error'; statusCode: number; error: RunError; json: string }
  | { kind: 'problem'; statusCode: number; error: RunError; body: string; headers: Record<string, string> };

export async function callFunction(
  target: AppTarget,
  functionName: string,
  body: Buffer,
  runId: string,
  stream: boolean,
  stopper: CallStopper,
  relayLargeBody = false,
): Promise<RuntimeAnswer> {
  const connections = target.connections;
  // Paused too: the runtime takes no new calls (it drains, restarts, or was just seen going away).
  if (!connections || !target.ready) throw appUnavailable(target);
  const response = await connections.request({ path: '/' + functionName, runId, stream, body, stopper, relayLargeBody });
  const contentType = response.contentType;
  if (response.stream) {
    if (response.statusCode === 200 && contentType.startsWith(RUNTIME_STREAM_TYPE)) return { kind: 'stream', body: response.stream };
    if (response.statusCode === 200 && response.contentLength !== null) return { kind: 'relayed-result', body: response.stream };
    // Only a stream is ever chunked; anything else is read whole like any answer.
    response.body = Buffer.concat(await response.stream.toArray());
  }
  const text = response.body!.toString('utf8');
  if (response.statusCode === 200) return { kind: 'result', json: text };
  if (contentType.startsWith('application/problem+json')) return problemAnswer(response.statusCode, text, response.allow);
  const failure = parseObject(text);
  return {
    kind: 'function-error',
    statusCode: response.statusCode,
    error: { type: String(failure.type ?? 'Error'), message: String(failure.message ?? text) },
    json: text,
  };
}

/** How long the runtime may take to check an async call before its 202. */
const VALIDATE_TIMEOUT_MS = 10_000;

/**
 * Asks the runtime whether the call would run (function, body, arguments) without running it: an async call is
 * checked before its 202, so a bad one gets the same 404/422 as a sync call. Null when valid, else the
 * runtime's problem to pass on.
 */
export async function validateCall(
  target: AppTarget,
  functionName: string,
  body: Buffer,
  runId: string,
): Promise<(RuntimeAnswer & { kind: 'problem' }) | null> {
  const connections = target.connections;
  // Paused too: the runtime takes no new calls (it drains, restarts, or was just seen going away).
  if (!connections || !target.ready) throw appUnavailable(target);
  const stopper = stopperOf(AbortSignal.timeout(VALIDATE_TIMEOUT_MS));
  const response = await connections.request({ path: '/' + functionName, runId, stream: false, validateOnly: true, body, stopper });
  if (response.statusCode === 200) {
    if (response.stream) response.stream.resume();
    return null;
  }
  const text = response.body ? response.body.toString('utf8') : Buffer.concat(await response.stream!.toArray()).toString('utf8');
  return problemAnswer(response.statusCode, text, response.allow);
}

function problemAnswer(statusCode: number, text: string, allow: string | null): RuntimeAnswer & { kind: 'problem' } {
  const problem = parseObject(text);
  const headers: Record<string, string> = {};
  if (allow !== null) headers.allow = allow;
  return {
    kind: 'problem',
    statusCode,
    error: { type: String(problem.title ?? 'Problem'), message: String(problem.detail ?? text) },
    body: text,
    headers,
  };
}

export function appUnavailable(target: AppTarget): ProblemError {
  // Retrying will not help a broken app before its code changes: no Retry-After.
  if (target.brokenDetail !== null) return new ProblemError(Problems.appUnavailable, target.brokenDetail);
  return new ProblemError(
    Problems.appUnavailable,
    `The runtime of app ${target.projectId}/${target.appName} is not ready; retry shortly`,
    { headers: { 'retry-after': '1' } },
  );
}

/**
 * The call never reached the runtime: it was not attached (starting, restarting), or refused the connection
 * (its process had just died). Nothing of the call ran, so it may wait for the runtime and be sent again.
 */
export function neverReachedRuntime(err: unknown): boolean {
  return (err as { code?: string }).code === 'RUNTIME_UNREACHABLE' || (err instanceof ProblemError && err.spec === Problems.appUnavailable);
}

/** The runtime answered a result over the app's result limit: refused unread. */
export function isResultTooLarge(err: unknown): boolean {
  return (err as { code?: string }).code === 'RESULT_TOO_LARGE';
}

/** Errors of a connection to the runtime that mean it went away (exited, crashed, or was detached). */
const CRASH_CODES = new Set(['RUNTIME_CONNECTION_CLOSED', 'RUNTIME_DETACHED', 'ECONNRESET', 'ECONNREFUSED', 'EPIPE']);

/** Maps a failed exchange with the runtime to the reason recorded on the run. */
export function upstreamFailureReason(err: unknown, aborted: FailureReason | null): FailureReason {
  if (aborted) return aborted;
  const code = (err as { code?: string }).code ?? '';
  if (CRASH_CODES.has(code)) {
    return 'runtime_crashed';
  }
  return 'upstream_error';
}

/** The recorded error of a call the runtime did not finish: one type per reason, whichever mode the call was. */
export function upstreamRunError(err: unknown, reason: FailureReason): RunError {
  return { type: reason === 'timeout' ? TIMEOUT_ERROR_TYPE : 'RuntimeError', message: describeUpstreamError(err, reason) };
}

export function describeUpstreamError(err: unknown, reason: FailureReason): string {
  if (reason === 'runtime_crashed') return "The app's runtime closed the connection mid-call (it exited or crashed)";
  if (reason === 'timeout') return 'The run exceeded its time limit and was stopped';
  if (reason === 'shutdown') return 'The replica shut down before the run completed';
  return `Calling the app's runtime failed: ${(err as Error).message}`;
}

function parseObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
