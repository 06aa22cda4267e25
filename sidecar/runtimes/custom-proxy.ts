// Custom runtime: any method and path after the app name goes to the app's own server unchanged (query minus
// the reserved parameters), and its answer comes back as it comes: status, headers, streamed body.
import { once } from 'node:events';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ActiveRun } from '../active-runs.ts';
import { cancelledError } from '../cancelled-run.ts';
import type { AppTarget } from '../apps.ts';
import type { RunRecorder } from '../runs/recorder.ts';
import { sendProblem } from '../../run-request/problem-answer.ts';
import { uploadDeadlinePassed } from '../../run-request/request-timeouts.ts';
import { appUnavailable } from './runtime-client.ts';
import type { RunOutcome } from '../modes/outcome.ts';
import { recordFailedExchange, waitForRuntime } from './python-call.ts';

/** Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus those undici sets itself. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
]);

export interface CustomProxyOptions {
  /** Path and query to send to the app: everything after the app name, reserved parameters removed. */
  forwardPath: string;
  /** Keep the app's response (up to this many bytes) for the webhook; 0 keeps nothing. */
  captureBytes: number;
  /** The sidecar verified the caller's token: it is the platform's credential, not the app's to see. */
  dropAuthorization: boolean;
  /**
   * The request deadline (`--request-deadline`) and when it passes (a `performance.now()` time): a body still
   * arriving then is cut, as the Python door cuts one, even though the app has seen part of it already.
   */
  arrival: { deadlineMs: number; passesAt: number };
}

export async function proxyCustom(
  run: ActiveRun,
  target: AppTarget,
  recorder: RunRecorder,
  request: IncomingMessage,
  raw: ServerResponse,
  options: CustomProxyOptions,
): Promise<RunOutcome> {
  // A run that waited in the queue waits for a runtime that is down (restarting); its body is not read yet.
  let pool = target.ready ? target.pool : null;
  while (pool === null) {
    await waitForRuntime(run, target, recorder);
    pool = target.ready ? target.pool : null;
  }
  const body = hasBody(request) ? request : null;
  const upload = body !== null && !body.complete ? new UploadDeadline(run, raw, options.arrival) : null;
  let response: Dispatcher.ResponseData;
  try {
    response = await pool.request({
      method: (request.method ?? 'GET') as Dispatcher.HttpMethod,
      path: options.forwardPath,
      headers: forwardedRequestHeaders(request, run.record.id, options.dropAuthorization),
      body,
      signal: upload?.signal ?? run.signal,
    });
  } catch (err) {
    if (upload?.passed) {
      const runTimeMs = recorder.finish(run.record, { statusCode: 408, error: upload.error });
      return { statusCode: 408, success: false, resultJson: null, error: upload.error, runTimeMs };
    }
    if (!connectionRefused(err)) {
      if (connectionLost(err) && target.pool === pool) target.runtimeGone();
      throw recordFailedExchange(run, recorder, err);
    }
    // Refused: the app's server has just gone down; this call is answered as one arriving while it is down.
    if (target.pool === pool) target.runtimeGone();
    throw recordFailedExchange(run, recorder, appUnavailable(target));
  } finally {
    // Once the app answers, its answer is bounded by the run's time limit, whatever is left of the upload.
    upload?.stop();
  }

  raw.writeHead(response.statusCode, forwardedResponseHeaders(response.headers, run.record.id));
  run.watchCaller(raw.socket);
  const captured: Buffer[] = [];
  let answerBytes = 0;
  let cut: unknown = null;
  // A caller that goes away stops the run: the upstream request is aborted and no write waits on it.
  const callerGone = (): void => {
    if (!raw.writableFinished) run.stop('client_closed');
  };
  raw.once('close', callerGone);
  try {
    for await (const chunk of response.body) {
      answerBytes += (chunk as Buffer).length;
      if (answerBytes <= options.captureBytes) captured.push(chunk as Buffer);
      if (!raw.write(chunk)) await once(raw, 'drain', { signal: run.signal });
    }
    raw.end();
  } catch (err) {
    cut = err;
    raw.destroy();
  } finally {
    raw.off('close', callerGone);
  }

  if (cut && (run.stoppedFor === 'client_closed' || run.stoppedFor === 'client_stalled')) {
    const runTimeMs = recorder.finish(run.record, { statusCode: response.statusCode, cancelled: true, reason: run.stoppedFor });
    const message =
      run.stoppedFor === 'client_closed'
        ? 'the caller closed the connection before the answer ended'
        : "the caller read nothing of the app's answer for the client stall timeout; the answer was cut";
    return { statusCode: response.statusCode, success: false, resultJson: null, error: { type: 'Cancelled', message }, runTimeMs };
  }
  if (cut && run.stoppedFor === 'cancel_requested') {
    // Recorded with the status the caller was sent, as a stream cancelled mid-answer is.
    const error = cancelledError("The run was cancelled at request; the app's answer was cut");
    const runTimeMs = recorder.finish(run.record, { statusCode: response.statusCode, error, reason: 'cancel_requested', cancelled: true });
    return { statusCode: response.statusCode, success: false, resultJson: null, error, runTimeMs };
  }
  if (cut) {
    // Headers are gone already: the caller sees a cut body; the run records why.
    recordFailedExchange(run, recorder, cut);
    return { statusCode: 502, success: false, resultJson: null, error: run.record.error, runTimeMs: run.record.runtimeMs ?? 0 };
  }
  const success = response.statusCode < 400;
  const error = success ? null : { type: `HTTP ${response.statusCode}`, message: `The app answered ${response.statusCode}` };
  const runTimeMs = recorder.finish(run.record, { statusCode: response.statusCode, error });
  const resultJson =
    options.captureBytes === 0
      ? null
      : answerBytes > options.captureBytes
        ? JSON.stringify(`[the app's answer of ${answerBytes} bytes is over the ${options.captureBytes}-byte webhook limit and is not forwarded]`)
        : capturedAsJson(captured, response.headers['content-type']);
  return { statusCode: response.statusCode, success, resultJson, error, runTimeMs };
}

/**
 * A custom app's call whose body is still arriving: at the request deadline, the caller is answered `408` (the
 * connection closed) and the call to the app aborted. A signal of its own rather than the run's: a run stopped
 * for a reason of the platform's (timeout, shutdown) is recorded as such, this one as the request's failure.
 */
class UploadDeadline {
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout;
  readonly signal: AbortSignal;
  passed = false;
  readonly error: { type: string; message: string };

  constructor(run: ActiveRun, raw: ServerResponse, arrival: { deadlineMs: number; passesAt: number }) {
    this.signal = AbortSignal.any([run.signal, this.#controller.signal]);
    const problem = uploadDeadlinePassed(arrival.deadlineMs);
    this.error = { type: problem.spec.title, message: problem.detail };
    this.#timer = setTimeout(() => {
      this.passed = true;
      sendProblem(raw, run.record.id, problem);
      this.#controller.abort(new Error(problem.detail));
    }, Math.max(0, arrival.passesAt - performance.now()));
  }

  stop(): void {
    clearTimeout(this.#timer);
  }
}

/** The app's server refused the connection: nothing listens, so nothing of the call reached it. */
export function connectionRefused(err: unknown): boolean {
  return (err as { code?: string }).code === 'ECONNREFUSED';
}

/**
 * The app's server closed or reset the connection of a call it had not answered: it is most likely going down.
 * Marked so (`runtimeGone`) before the call gives up its slot, so that a run queued behind it waits for the
 * server's return rather than meet the same end before the supervisor or the readiness watch has seen the exit;
 * a server that lives on is taken back at once by the return probe. (Its idle connections it may close at will:
 * only a call's counts.)
 */
export function connectionLost(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
}

/** A request with a body to forward: a declared length over 0, or a chunked one. */
export function hasBody(request: IncomingMessage): boolean {
  const contentLength = request.headers['content-length'];
  return contentLength !== undefined ? contentLength !== '0' : request.headers['transfer-encoding'] !== undefined;
}

/**
 * Whether a caller's header is Runlet's own, never the app's to see: the webhook's signing secret (an app that
 * logs its headers would log it) and the `x-runlet-` namespace (the holder's `x-runlet-held-run`, the runtime
 * protocol's headers), which only Runlet's parts may send.
 */
function isRunletsOwn(name: string): boolean {
  return name === 'x-webhook-secret' || name.startsWith('x-runlet-');
}

export function forwardedRequestHeaders(request: IncomingMessage, runId: string, dropAuthorization: boolean): IncomingHttpHeaders {
  const headers: IncomingHttpHeaders = {};
  for (const name in request.headers) {
    if (!HOP_BY_HOP.has(name) && !isRunletsOwn(name)) headers[name] = request.headers[name];
  }
  if (dropAuthorization) delete headers.authorization;
  // A chunked body is forwarded chunked; a sized one keeps its size.
  if (request.headers['content-length'] !== undefined) headers['content-length'] = request.headers['content-length'];
  headers['x-request-id'] = runId;
  // The peer as the sidecar sees it (the ingress controller, in a cluster); the sidecar's port has no TLS.
  if (request.socket.remoteAddress) headers['x-forwarded-for'] = request.socket.remoteAddress;
  headers['x-forwarded-proto'] = 'http';
  if (request.headers.host) headers['x-forwarded-host'] = request.headers.host;
  return headers;
}

function forwardedResponseHeaders(
  upstream: Record<string, string | string[] | undefined>,
  runId: string,
): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const name in upstream) {
    const value = upstream[name];
    if (value !== undefined && (name === 'content-length' || !HOP_BY_HOP.has(name))) headers[name] = value;
  }
  headers['x-request-id'] = runId;
  return headers;
}

/** The app's response as the webhook forwards it: its JSON when it is JSON, else its text as a JSON string. */
export function capturedAsJson(chunks: Buffer[], contentType: string | string[] | undefined): string {
  const text = Buffer.concat(chunks).toString('utf8');
  if (String(contentType ?? '').includes('json')) {
    try {
      JSON.parse(text);
      return text;
    } catch {
      // Declared JSON but not parseable: forwarded as text.
    }
  }
  return JSON.stringify(text);
}
