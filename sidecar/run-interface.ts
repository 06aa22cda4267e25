// The run interface, `/v4/{project_id}/{app_name}/{function}`, read top to bottom:
// request id → app → options (async, webhook) → body → admission → mode (sync | stream | async | custom)
// → record → webhook.
//
// It answers two kinds of request. The pod sidecar's run port (run-server.ts) reads a Python app's call — a
// POST with its whole body in hand — with its own front (run-front/) and hands it over as a `WholeRequest`,
// the hot path of every call; a stream's answer is written through node:http's response, which the front
// lends its connection. Everything else arrives as node:http's request and response: on the run port
// whatever the front passes on (custom apps, anything unusual), which in `runlet dev` goes through fastify
// routes (run-interface-routes.ts), as does everything for the OpenAPI document.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import { PROBLEM_CONTENT_TYPE, ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { RunMode, RunRecord } from '../crds/run-record-schema.ts';
import { ActiveRun } from './active-runs.ts';
import type { AnswerSink, StreamableAnswerSink } from './answer-sink.ts';
import type { AppTarget } from './apps.ts';
import { acceptsEventStream, acceptsGzip, functionNameProblem } from './http-negotiation.ts';
import { callCustomBuffered } from './runtimes/custom-call.ts';
import { forwardedRequestHeaders, hasBody, proxyCustom } from './runtimes/custom-proxy.ts';
import type { RunOutcome } from './modes/outcome.ts';
import { callRecorded } from './runtimes/python-call.ts';
import { runStream } from './modes/stream.ts';
import { JSON_CONTENT_TYPE, runSync, settle } from './modes/sync.ts';
import type { Replica } from './replica.ts';
import { assertBodyWithinLimit, assertDeclaredLength, checkJsonObjectBody, readJsonObjectBody, readLimitedBody, type BodyBounds } from './request-body.ts';
import { DEFAULT_REQUEST_BODY_TIMEOUT_MS } from './request-timeouts.ts';
import { forwardedQuery, NO_OPTIONS, parseRunOptions } from './run-options.ts';
import { newRunId } from './runs/recorder.ts';
import { appUnavailable, validateCall } from './runtimes/runtime-client.ts';
import { parseWebhookRequest, pendingWebhookRecord, webhookSecretSent, type WebhookRequest } from './webhook-forwarding.ts';

export const DEFAULT_BODY_LIMIT_BYTES = 16 * 1024 * 1024;
const RUN_PATH_PREFIX = '/v4/';

/** Where a request of the run interface goes: `/v4/{project_id}/{app_name}[/{rest}]`, segments decoded. */
export interface RunPath {
  projectId: string;
  appName: string;
  /** A Python function's name, or a custom app's path after the app name (any depth; '' for none). */
  rest: string;
  /** `rest` as the caller sent it, percent-encoding kept: what a custom app is sent. */
  rawRest: string;
}

/** A POST the run port's front read whole: what it hands to `handleWhole`. */
export interface WholeRequest {
  method: string;
  url: string;
  /** Lower-case names, one value each (the front passes requests with a repeated header on to node:http). */
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A request as the pipeline sees it, whichever way it arrived. */
interface Exchange {
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

/** What every mode needs to know about the call, decided before anything runs. */
interface Call {
  target: AppTarget;
  runId: string;
  functionName: string;
  method: string;
  receivedAt: number;
  webhook: WebhookRequest | null;
}

export interface RunInterface {
  /**
   * Answers a request for a path of the run interface: a run, or a problem (404 for a path that is not a
   * run's). Never throws; failures become problem answers, or a cut connection once an answer has begun.
   */
  handle(request: IncomingMessage, response: ServerResponse): void;
  /**
   * Answers a request the run port's front read whole, as `handle` would, and returns true — unless it is a
   * custom app's call (which streams the request's body to the app) or a path that is not a run's: then it
   * returns false having done nothing, and the front passes the connection on to node:http.
   */
  handleWhole(request: WholeRequest, answer: StreamableAnswerSink): boolean;
}

export function createRunInterface(replica: Replica): RunInterface {
  const { apps, recorder, activeRuns, metrics, webhooks, logger, auth } = replica;
  const bodyLimitBytes = replica.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const bodyBounds: BodyBounds = { limitBytes: bodyLimitBytes, idleMs: replica.bodyTimeoutMs ?? DEFAULT_REQUEST_BODY_TIMEOUT_MS };

  function handle(request: IncomingMessage, response: ServerResponse): void {
    const exchange: Exchange = {
      method: request.method ?? 'GET',
      url: request.url ?? '/',
      headers: request.headers,
      answer: response,
      body: null,
      node: { request, response },
      front: null,
    };
    serve(exchange);
  }

  function handleWhole(request: WholeRequest, answer: StreamableAnswerSink): boolean {
    const route = parseRunPathOrNull(pathOf(request.url));
    if (route === null || apps.find(route.projectId, route.appName)?.runtime === 'custom') return false;
    serve({ method: request.method, url: request.url, headers: request.headers, answer, body: request.body, node: null, front: answer }, route);
    return true;
  }

  /** `route`: the exchange's path, when the caller has parsed it already. */
  function serve(exchange: Exchange, route?: RunPath): void {
    const runId = newRunId();
    handleRun(exchange, runId, route).catch((error: unknown) => sendProblem(exchange.answer, runId, toProblem(error)));
  }

  async function handleRun(exchange: Exchange, runId: string, parsedRoute: RunPath | undefined): Promise<void> {
    const receivedAt = performance.now();
    const { url, method, headers } = exchange;
    const queryStart = url.indexOf('?');
    const path = queryStart === -1 ? url : url.slice(0, queryStart);
    const route = parsedRoute ?? parseRunPath(path);
    if (route === null) throw new ProblemError(Problems.routeNotFound, `${method} ${path} is not a route of the run interface`);
    if (replica.draining) {
      metrics.refused.labels('draining').inc();
      throw new ProblemError(Problems.draining, 'This replica is shutting down; retry on another', { headers: { 'retry-after': '1' } });
    }
    const { projectId, appName, rest } = route;
    if (auth) {
      // Before the app lookup: a caller without a valid token learns nothing about which apps exist.
      const pending = auth.authenticate(headers.authorization, projectId);
      if (pending) await pending;
    }
    const target = apps.find(projectId, appName);
    if (!target) throw new ProblemError(Problems.appNotFound, `No app named "${appName}" in project "${projectId}"`);
    const options = queryStart === -1 ? NO_OPTIONS : parseRunOptions(parseQuery(url.slice(queryStart + 1)));
    const webhook = options.webhookEndpoint === null ? null : parseWebhookRequest(options.webhookEndpoint, webhookSecretOf(exchange));
    const call: Call = { target, runId, functionName: rest, method, receivedAt, webhook };

    if (target.runtime === 'custom') {
      const forwardPath = '/' + route.rawRest + (queryStart === -1 ? '' : withQuery(forwardedQuery(url.slice(queryStart + 1))));
      const { request, response } = nodeExchange(exchange, target);
      return handleCustom(call, request, response, forwardPath, options.async);
    }

    if (method !== 'POST') {
      throw new ProblemError(Problems.methodNotAllowed, `Functions are called with POST, not ${method}`, { headers: { allow: 'POST' } });
    }
    const nameProblem = functionNameProblem(rest);
    if (nameProblem) throw new ProblemError(Problems.functionNotFound, nameProblem);
    // A whole request's body is checked at once; only node's request is read, and waited for.
    const body = exchange.node === null ? checkWholeBody(exchange.body) : await readJsonObjectBody(exchange.node.request, bodyBounds);
    if (!target.ready) throw appUnavailable(target);

    if (options.async) {
      // Checked before the 202, so a bad call gets the same answer as sync: nothing is accepted that cannot run.
      const refusal = await validateCall(target, rest, body, runId).catch((err: unknown) => {
        throw new ProblemError(Problems.upstreamFailed, `The app's runtime could not check the call: ${(err as Error).message}`, { cause: err });
      });
      if (refusal) {
        exchange.answer.writeHead(refusal.statusCode, { ...refusal.headers, 'content-type': PROBLEM_CONTENT_TYPE, 'x-request-id': runId });
        exchange.answer.end(refusal.body);
        return;
      }
      // Async with `Accept: text/event-stream` runs as async: a generator's items become the result list.
      const run = await acceptAsync(call, exchange.answer);
      void executeAsync(run, call, () => callRecorded(run, target, recorder, body, false).then((answer) => settle(run, recorder, answer)));
      return;
    }
    if (acceptsEventStream(headers.accept)) {
      const response = streamedResponse(exchange);
      const gzip = acceptsGzip(headers['accept-encoding']);
      const run = admitNow(call, 'stream') ?? (await admitQueued(call, 'stream'));
      await complete(run, call, runStream(run, target, recorder, body, response, { gzip, keepItems: webhook !== null }));
      return;
    }
    const run = admitNow(call, 'sync') ?? (await admitQueued(call, 'sync'));
    const relay = { response: () => streamedResponse(exchange), keepResult: webhook !== null };
    await complete(run, call, runSync(run, target, recorder, body, exchange.answer, relay));
  }

  /** The body of a Python function's call that the front read whole, checked. */
  function checkWholeBody(body: Buffer | null): Buffer {
    const whole = body ?? EMPTY_BODY;
    assertBodyWithinLimit(whole, bodyLimitBytes);
    return checkJsonObjectBody(whole);
  }

  async function handleCustom(call: Call, request: IncomingMessage, response: ServerResponse, forwardPath: string, isAsync: boolean): Promise<void> {
    const { target } = call;
    if (!target.ready) throw appUnavailable(target);
    if (isAsync) {
      const body = hasBody(request) ? await readLimitedBody(request, bodyBounds) : null;
      const run = await acceptAsync(call, response);
      const headers = forwardedRequestHeaders(request, call.runId, auth !== null);
      const buffered = { method: call.method, forwardPath, headers, body, answerLimitBytes: bodyLimitBytes };
      void executeAsync(run, call, () => callCustomBuffered(run, target, recorder, buffered));
      return;
    }
    // A streamed body is forwarded as it comes; one declared too large is refused before anything runs.
    assertDeclaredLength(request, bodyLimitBytes);
    const run = admitNow(call, 'sync') ?? (await admitQueued(call, 'sync'));
    const captureBytes = call.webhook ? bodyLimitBytes : 0;
    await complete(run, call, proxyCustom(run, target, recorder, request, response, { forwardPath, captureBytes, dropAuthorization: auth !== null }));
  }

  /**
   * Sync and stream runs: a slot now, the common case, answered without a promise; null when there is none,
   * and the run must wait in the queue (`admitQueued`).
   */
  function admitNow(call: Call, mode: RunMode): ActiveRun | null {
    return call.target.admission.tryAcquire() ? start(track(call, mode, false)) : null;
  }

  /** A wait in the queue for a slot (recorded `pending`), or 503 when the queue is full. */
  async function admitQueued(call: Call, mode: RunMode): Promise<ActiveRun> {
    const admission = call.target.admission;
    try {
      admission.reserve();
    } catch (err) {
      metrics.refused.labels('over_capacity').inc();
      throw err;
    }
    const run = track(call, mode, false);
    recorder.store.save(run.record);
    try {
      await waitForSlot(run, call);
    } catch (err) {
      finalize(run, call, outcomeOf(run.record));
      throw err;
    }
    return start(run);
  }

  /** Async runs: a queue place, then the `pending` record made durable, then `202` — in that order. */
  async function acceptAsync(call: Call, response: AnswerSink): Promise<ActiveRun> {
    try {
      call.target.admission.reserve();
    } catch (err) {
      metrics.refused.labels('over_capacity').inc();
      throw err;
    }
    const run = track(call, 'async', true);
    try {
      await recorder.store.saveDurably(run.record);
    } catch (err) {
      call.target.admission.unreserve();
      activeRuns.delete(run);
      metrics.refused.labels('run_store').inc();
      throw new ProblemError(Problems.runStoreUnavailable, 'The run could not be recorded durably, so it was not accepted; retry shortly', {
        cause: err,
        headers: { 'retry-after': '1' },
      });
    }
    response.writeHead(202, ['content-type', JSON_CONTENT_TYPE, 'x-request-id', call.runId]);
    response.end('{"run_id":"' + call.runId + '"}');
    return run;
  }

  async function executeAsync(run: ActiveRun, call: Call, execute: () => Promise<RunOutcome>): Promise<void> {
    try {
      await waitForSlot(run, call);
    } catch {
      finalize(run, call, outcomeOf(run.record));
      return;
    }
    start(run);
    try {
      await complete(run, call, execute());
    } catch {
      // Recorded (and forwarded) by complete(); nobody is waiting for an answer.
    }
  }

  function track(call: Call, mode: RunMode, isAsync: boolean): ActiveRun {
    const record = recorder.pending({
      id: call.runId,
      target: call.target,
      functionName: call.functionName,
      method: call.method,
      mode,
      async: isAsync,
      webhook: call.webhook ? pendingWebhookRecord(call.webhook) : null,
      receivedAt: call.receivedAt,
    });
    // The time limit counts from the request's arrival, read once for both.
    const run = new ActiveRun(record, call.receivedAt + call.target.runTimeLimitMs);
    activeRuns.add(run);
    return run;
  }

  /** Waits in the queue; a run stopped while waiting is recorded, and the caller finalizes it. */
  async function waitForSlot(run: ActiveRun, call: Call): Promise<void> {
    try {
      await call.target.admission.acquire(run.signal, true);
    } catch (err) {
      const reason = run.stoppedFor ?? 'shutdown';
      const problem =
        reason === 'timeout'
          ? new ProblemError(Problems.timeout, 'The run waited for a slot past its time limit')
          : new ProblemError(Problems.draining, 'The replica shut down before the run started', { headers: { 'retry-after': '1' } });
      recorder.finish(run.record, { statusCode: problem.status, error: { type: problem.spec.title, message: problem.detail }, reason });
      throw err instanceof ProblemError ? err : problem;
    }
  }

  function start(run: ActiveRun): ActiveRun {
    recorder.running(run.record);
    return run;
  }

  /** Waits for the mode, then frees the slot and forwards the outcome — whether the mode succeeded or threw. */
  async function complete(run: ActiveRun, call: Call, mode: Promise<RunOutcome>): Promise<void> {
    let outcome: RunOutcome | null = null;
    try {
      outcome = await mode;
    } finally {
      call.target.admission.release();
      if (run.record.completedAt === null) {
        // A mode that throws records why first; this only guards against a bug leaving a run `running` forever.
        recorder.finish(run.record, { statusCode: 500, error: { type: 'InternalError', message: 'the sidecar failed mid-run' }, reason: 'upstream_error' });
      }
      finalize(run, call, outcome ?? outcomeOf(run.record));
    }
  }

  function finalize(run: ActiveRun, call: Call, outcome: RunOutcome): void {
    activeRuns.delete(run);
    metrics.runCompleted(run.record.mode, run.record.status, run.record.runtimeMs);
    // Checked first: the log line's object would otherwise be built for every run and thrown away.
    if (logger.isLevelEnabled('info')) logRun(run.record);
    if (call.webhook) webhooks.forward(run.record, call.webhook, outcome);
  }

  function logRun(record: RunRecord): void {
    logger.info(
      {
        runId: record.id,
        app: `${record.projectId}/${record.appName}`,
        function: record.functionName,
        mode: record.mode,
        status: record.status,
        statusCode: record.statusCode,
        durationMs: record.responseTimeMs,
        ...(record.reason ? { reason: record.reason } : {}),
      },
      'run',
    );
  }

  function toProblem(error: unknown): ProblemError {
    if (error instanceof ProblemError) return error;
    logger.error({ err: error }, 'run interface error');
    return new ProblemError(Problems.internalError, 'The sidecar failed to handle the request; the error is in its log', { cause: error });
  }

  return { handle, handleWhole };
}

/** Where a stream is written: node's response, or the one the front lends its connection to. */
function streamedResponse(exchange: Exchange): ServerResponse {
  if (exchange.node !== null) return exchange.node.response;
  if (exchange.front !== null) return exchange.front.stream(exchange.headers);
  throw new Error('an exchange with neither node:http\'s response nor the front\'s answer');
}

/**
 * `X-Webhook-Secret` as the caller sent it: node:http joins a repeated header into one value, so its raw
 * headers are read; the front passes a request with a repeated header on to node:http, so its one value is.
 */
function webhookSecretOf(exchange: Exchange): string | string[] | undefined {
  return exchange.node === null ? exchange.headers['x-webhook-secret'] : webhookSecretSent(exchange.node.request.rawHeaders);
}

/**
 * node:http's request and response of a custom app's call, which streams the request's body. A whole request
 * never gets here unless its app changed to a custom one after the front asked (`handleWhole`): the caller is
 * told to retry, which the front then passes on to node:http.
 */
function nodeExchange(exchange: Exchange, target: AppTarget): { request: IncomingMessage; response: ServerResponse } {
  if (exchange.node !== null) return exchange.node;
  throw new ProblemError(Problems.appUnavailable, `App ${target.projectId}/${target.appName} changed while the call arrived; retry`, {
    headers: { 'retry-after': '1' },
  });
}

const EMPTY_BODY = Buffer.alloc(0);

function pathOf(url: string): string {
  const queryStart = url.indexOf('?');
  return queryStart === -1 ? url : url.slice(0, queryStart);
}

/** As parseRunPath, with a path that is not valid percent-encoding as null too (node:http then answers it). */
function parseRunPathOrNull(path: string): RunPath | null {
  try {
    return parseRunPath(path);
  } catch {
    return null;
  }
}

/**
 * Splits `/v4/{project_id}/{app_name}[/{rest}]`; null for any other path (`/v4/openapi.json` among them, which
 * its server answers). Segments are percent-decoded; a path that is not valid percent-encoding is refused.
 */
function parseRunPath(path: string): RunPath | null {
  if (!path.startsWith(RUN_PATH_PREFIX)) return null;
  const projectEnd = path.indexOf('/', RUN_PATH_PREFIX.length);
  if (projectEnd === -1 || projectEnd === RUN_PATH_PREFIX.length) return null;
  const appEnd = path.indexOf('/', projectEnd + 1);
  const rawApp = appEnd === -1 ? path.slice(projectEnd + 1) : path.slice(projectEnd + 1, appEnd);
  if (rawApp === '') return null;
  const rawRest = appEnd === -1 ? '' : path.slice(appEnd + 1);
  return {
    projectId: decodeSegment(path.slice(RUN_PATH_PREFIX.length, projectEnd), path),
    appName: decodeSegment(rawApp, path),
    rest: decodeSegment(rawRest, path),
    rawRest,
  };
}

function decodeSegment(segment: string, path: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ProblemError(Problems.routeNotFound, `${path} is not a valid path: it has a malformed percent-encoding`);
  }
}

function withQuery(query: string): string {
  return query ? '?' + query : '';
}

/** The outcome of a run that ended in a recorded failure (the mode threw after recording it). */
function outcomeOf(record: RunRecord): RunOutcome {
  return { statusCode: record.statusCode ?? 500, success: false, resultJson: null, error: record.error, runTimeMs: record.runtimeMs ?? 0 };
}

/** Answers with a problem; once an answer has begun, the connection is cut instead (the body is torn). */
export function sendProblem(response: AnswerSink, runId: string, problem: ProblemError): void {
  if (response.headersSent || response.destroyed) {
    response.destroy();
    return;
  }
  response.writeHead(problem.status, { ...problem.headers, 'content-type': PROBLEM_CONTENT_TYPE, 'x-request-id': runId });
  response.end(JSON.stringify(problem.toBody()));
}
