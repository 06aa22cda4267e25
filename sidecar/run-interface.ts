// The run interface, `/v4/{project_id}/{app_name}/{function}`, read top to bottom:
// route → drain → auth → app → options (async, webhook) → body → mode (sync | stream | async | custom), each
// mode's run taken through admission, recording and its webhook by the run lifecycle (run-lifecycle.ts). A
// refused async call the holder had already answered 202 becomes a failed run instead (modes/held-refusal.ts),
// unless the refusal is of the caller (401, 403) or of the hand-over itself (a run id taken, another body).
//
// It answers two kinds of request (exchange.ts). The pod sidecar's run port (run-server.ts) reads a Python
// app's call — a POST with its whole body in hand — with its own front (run-front/) and hands it over as a
// `WholeRequest`, the hot path of every call; a stream's answer is written through node:http's response, which
// the front lends its connection. Everything else arrives as node:http's request and response: on the run
// port whatever the front passes on (custom apps, anything unusual), which in `runlet dev` goes through
// fastify routes (run-interface-routes.ts), as does everything for the OpenAPI document.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import { PROBLEM_CONTENT_TYPE, ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { StreamableAnswerSink } from '../run-request/answer-sink.ts';
import { nodeExchange, nodeHttpExchange, streamedResponse, webhookSecretOf, wholeExchange, type Exchange, type WholeRequest } from './exchange.ts';
import { acceptsEventStream, acceptsGzip, functionNameProblem } from '../run-request/http-negotiation.ts';
import { sendProblem } from '../run-request/problem-answer.ts';
import { acceptAsync, executeAsync } from './modes/async.ts';
import { recordRefusedHeldCall, refusalBecomesFailure, refusalOf, refusedAsyncCall } from './modes/held-refusal.ts';
import { runStream } from './modes/stream.ts';
import { runSync, settle } from './modes/sync.ts';
import type { Replica } from './replica.ts';
import { assertBodyWithinLimit, assertDeclaredLength, checkJsonObjectBody, DEFAULT_BODY_LIMIT_BYTES, readJsonObjectBody, readLimitedBody, type BodyBounds } from '../run-request/request-body.ts';
import type { RequestBudget } from '../run-request/request-budget.ts';
import { DEFAULT_REQUEST_BODY_TIMEOUT_MS, DEFAULT_REQUEST_DEADLINE_MS } from '../run-request/request-timeouts.ts';
import { RunLifecycle, type Call } from './run-lifecycle.ts';
import { forwardedQuery, NO_OPTIONS, parseRunOptions } from '../run-request/run-options.ts';
import { parseRunPath, parseRunPathOrNull, pathOf, type RunPath } from '../run-request/run-path.ts';
import { bodySha256, HELD_RUN_HEADER, verifyHeldRun, type VerifiedHeldRun } from '../run-request/auth/held-run.ts';
import { HeldRunClaims } from './auth/held-run-claims.ts';
import { newRunId } from '../run-request/run-id.ts';
import { callCustomBuffered } from './runtimes/custom-call.ts';
import { forwardedRequestHeaders, hasBody, proxyCustom } from './runtimes/custom-proxy.ts';
import { callRecorded } from './runtimes/python-call.ts';
import { appUnavailable, neverReachedRuntime, validateCall } from './runtimes/runtime-client.ts';
import { parseWebhookRequest } from './webhook-forwarding.ts';

const EMPTY_BODY = Buffer.alloc(0);

/** `screenHead`'s answer for a request node:http is to read (a custom app's call, a path that is not a run's). */
export const PASS_ON = 'pass-on';

/**
 * What to do with a request whose head the front has whole and whose body it has not: read the body (null),
 * leave the connection to node:http (`PASS_ON`), refuse the request now (the problem), or — while a new token
 * is verified — wait, reading nothing, for one of the first or third.
 */
export type HeadScreening = null | typeof PASS_ON | ProblemError | Promise<ProblemError | typeof PASS_ON | null>;

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
  /**
   * The refusals of a run's call that its head alone decides — route, drain, auth, app — as `handle` would
   * make them, for a request whose body is still arriving: a caller refused is answered before it has sent
   * (and the front has held) its body. A held call the holder vouches for is refused here only for what is
   * never its run's failure (drain, auth); an unknown app may have to become one, which takes the whole
   * pipeline (modes/held-refusal.ts).
   */
  screenHead(url: string, headers: IncomingHttpHeaders): HeadScreening;
  /** How a request body read into memory is bounded, on node:http and at the front alike. */
  readonly bodyBounds: BodyBounds & { budget: RequestBudget };
  /** The front refused a request as it arrived (too slow, too large, no buffer left): counted in the metrics. */
  requestRefused(problem: ProblemError): void;
}

/** A verified hand-over, and whether this call took its run id (which is given back when nothing is recorded). */
interface HeldCall {
  run: VerifiedHeldRun;
  taken: boolean;
}

export function createRunInterface(replica: Replica): RunInterface {
  const { apps, recorder, metrics, logger, auth } = replica;
  const lifecycle = new RunLifecycle(replica);
  const heldClaims = new HeldRunClaims(recorder.store);
  const bodyLimitBytes = replica.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const bodyBounds: BodyBounds & { budget: RequestBudget } = {
    limitBytes: bodyLimitBytes,
    idleMs: replica.bodyTimeoutMs ?? DEFAULT_REQUEST_BODY_TIMEOUT_MS,
    deadlineMs: replica.requestDeadlineMs ?? DEFAULT_REQUEST_DEADLINE_MS,
    budget: replica.requestBudget,
  };

  function handle(request: IncomingMessage, response: ServerResponse): void {
    serve(nodeHttpExchange(request, response));
  }

  function handleWhole(request: WholeRequest, answer: StreamableAnswerSink): boolean {
    const route = parseRunPathOrNull(pathOf(request.url));
    if (route === null || apps.find(route.projectId, route.appName)?.runtime === 'custom') return false;
    serve(wholeExchange(request, answer), route);
    return true;
  }

  function screenHead(url: string, headers: IncomingHttpHeaders): HeadScreening {
    const route = parseRunPathOrNull(pathOf(url));
    if (route === null) return PASS_ON;
    if (replica.draining) return drainingProblem();
    const heldRun = headers[HELD_RUN_HEADER] === undefined ? null : heldRunOf(headers, 'POST', url);
    const next = () => (heldRun !== null ? (apps.find(route.projectId, route.appName)?.runtime === 'custom' ? PASS_ON : null) : screenApp(route));
    // The holder authenticated the caller of a call it vouches for (auth/held-run.ts): there is no token to ask for.
    if (heldRun?.callerVerified === true) return next();
    const pending = auth?.authenticate(headers.authorization, route.projectId);
    if (pending) return pending.then(next, (error: unknown) => toProblem(error));
    return next();
  }

  /** The hand-over a held call's header vouches for, under this replica's key, or null. */
  function heldRunOf(headers: IncomingHttpHeaders, method: string, url: string): VerifiedHeldRun | null {
    if (replica.holderKey === null) return null;
    return verifyHeldRun(replica.holderKey, headers[HELD_RUN_HEADER], { method, url, authorization: headers.authorization });
  }

  /** `screenHead`'s last step, once the caller is known to be let in: the app must exist. */
  function screenApp(route: RunPath): ProblemError | typeof PASS_ON | null {
    const target = apps.find(route.projectId, route.appName);
    if (!target) return appNotFound(route);
    return target.runtime === 'custom' ? PASS_ON : null;
  }

  /** `route`: the exchange's path, when the caller has parsed it already. */
  function serve(exchange: Exchange, route?: RunPath): void {
    const receivedAt = performance.now();
    // A call the holder kept while the app was at zero keeps the run id its caller may already have.
    const heldRun = heldRunOf(exchange.headers, exchange.method, exchange.url);
    const held: HeldCall | null = heldRun === null ? null : { run: heldRun, taken: false };
    const runId = heldRun === null ? newRunId() : heldRun.runId;
    handleRun(exchange, runId, receivedAt, route, held).catch((error: unknown) => {
      const problem = toProblem(error);
      metrics.requestRefused(problem);
      closeIfBodyUnread(exchange);
      if (held === null) sendProblem(exchange.answer, runId, problem);
      else refuseHeld(exchange, held, receivedAt, problem);
    });
  }

  /**
   * A request refused before any of its body was read (no token, say) ends its connection once answered, as the
   * front does: node:http would otherwise read and drop the body for as long as the caller sends it, or wait
   * for it, with no deadline, so a caller with no token could hold connections for ever. A body refused while
   * read (413) was bounded as it came, and its connection goes on.
   */
  function closeIfBodyUnread(exchange: Exchange): void {
    const node = exchange.node;
    if (node !== null && !node.request.complete && !node.request.readableDidRead && !node.response.headersSent) node.response.setHeader('connection', 'close');
  }

  /**
   * A held call refused (modes/held-refusal.ts): an async one's caller already has its 202, so the refusal
   * becomes its run's failure. Here, where every refusal of the pipeline ends up and only once a call is
   * refused, rather than at each check: one place sees them all, and no call that runs pays for it.
   */
  function refuseHeld(exchange: Exchange, held: HeldCall, receivedAt: number, problem: ProblemError): void {
    const { run } = held;
    const call = held.taken && refusalBecomesFailure(problem.status) && !exchange.answer.headersSent ? refusedAsyncCall(exchange, run, receivedAt) : null;
    // Nothing recorded under the run id: the holder may hand the call over again (after a 503) under it.
    const giveBack = () => {
      if (held.taken && !recorder.store.has(run.runId)) heldClaims.giveBack(run.runId);
    };
    if (call === null) {
      giveBack();
      return sendProblem(exchange.answer, run.runId, problem);
    }
    recordRefusedHeldCall(replica, lifecycle, call, refusalOf(problem), exchange.answer).catch((error: unknown) => {
      giveBack();
      sendProblem(exchange.answer, run.runId, toProblem(error));
    });
  }

  /** A held call's body, read first when the holder signed it, and refused when it is another. */
  async function readHeldBody(exchange: Exchange, sha256: string): Promise<Buffer> {
    const body = exchange.node === null ? (exchange.body ?? EMPTY_BODY) : await readLimitedBody(exchange.node.request, bodyBounds);
    if (bodySha256(body) !== sha256) throw new ProblemError(Problems.heldBodyMismatch, 'The body is not the one the held-run header was signed for; nothing was recorded');
    return body;
  }

  async function handleRun(exchange: Exchange, runId: string, receivedAt: number, parsedRoute: RunPath | undefined, held: HeldCall | null): Promise<void> {
    const { url, method, headers } = exchange;
    const queryStart = url.indexOf('?');
    const path = pathOf(url);
    const route = parsedRoute ?? parseRunPath(path);
    if (route === null) throw new ProblemError(Problems.routeNotFound, `${method} ${path} is not a route of the run interface`);
    if (replica.draining) throw drainingProblem();
    const { projectId, appName, rest } = route;
    // A held call whose caller the holder authenticated when it took it (and answered 202) carries no token.
    if (auth && held?.run.callerVerified !== true) {
      // Before the app lookup: a caller without a valid token learns nothing about which apps exist.
      const pending = auth.authenticate(headers.authorization, projectId);
      if (pending) await pending;
    }
    // After auth: only a caller let in may take a run id. Before anything else: no refusal of a call that did
    // not take it is ever recorded under it.
    if (held !== null) {
      if (!heldClaims.take(runId)) throw new ProblemError(Problems.heldRunTaken, `Run ${runId} was handed over already; nothing was recorded`);
      held.taken = true;
    }
    const target = apps.find(projectId, appName);
    if (!target) throw appNotFound(route);
    const options = queryStart === -1 ? NO_OPTIONS : parseRunOptions(parseQuery(url.slice(queryStart + 1)));
    const webhook = options.webhookEndpoint === null ? null : parseWebhookRequest(options.webhookEndpoint, webhookSecretOf(exchange));
    const coldStartMs = held === null ? null : held.run.coldStartMs;
    const call: Call = { target, runId, functionName: rest, method, receivedAt, webhook, coldStartMs };
    const heldBody = held?.run.bodySha256 ? await readHeldBody(exchange, held.run.bodySha256) : null;

    if (target.runtime === 'custom') {
      const forwardPath = '/' + route.rawRest + (queryStart === -1 ? '' : withQuery(forwardedQuery(url.slice(queryStart + 1))));
      const { request, response } = nodeExchange(exchange, target);
      return handleCustom(call, request, response, forwardPath, options.async, heldBody);
    }

    if (method !== 'POST') {
      throw new ProblemError(Problems.methodNotAllowed, `Functions are called with POST, not ${method}`, { headers: { allow: 'POST' } });
    }
    const nameProblem = functionNameProblem(rest);
    if (nameProblem) throw new ProblemError(Problems.functionNotFound, nameProblem);
    // A whole request's body is checked at once; only node's request is read, and waited for.
    const body = heldBody !== null || exchange.node === null ? checkWholeBody(heldBody ?? exchange.body) : await readJsonObjectBody(exchange.node.request, bodyBounds);
    if (!target.ready) throw appUnavailable(target);

    if (options.async) {
      // Checked before the 202, so a bad call gets the same answer as sync: nothing is accepted that cannot run.
      const refusal = await validateCall(target, rest, body, runId).catch((err: unknown) => {
        // A runtime that has just gone down is answered as one that is down: retry shortly, nothing ran.
        if (neverReachedRuntime(err)) throw appUnavailable(target);
        throw new ProblemError(Problems.upstreamFailed, `The app's runtime could not check the call: ${(err as Error).message}`, { cause: err });
      });
      if (refusal) {
        // The runtime's refusal is answered here, not thrown: a held call's (it alone has a cold start) becomes
        // its run's failure here too, as in `refuseHeld`.
        if (coldStartMs !== null && refusalBecomesFailure(refusal.statusCode)) return recordRefusedHeldCall(replica, lifecycle, call, refusal, exchange.answer);
        exchange.answer.writeHead(refusal.statusCode, { ...refusal.headers, 'content-type': PROBLEM_CONTENT_TYPE, 'x-request-id': runId });
        exchange.answer.end(refusal.body);
        return;
      }
      // Async with `Accept: text/event-stream` runs as async: a generator's items become the result list.
      const run = await acceptAsync(replica, lifecycle, call, exchange.answer);
      void executeAsync(lifecycle, run, call, () => callRecorded(run, target, recorder, body, false).then((answer) => settle(run, recorder, answer)));
      return;
    }
    if (acceptsEventStream(headers.accept)) {
      const response = streamedResponse(exchange);
      const gzip = acceptsGzip(headers['accept-encoding']);
      const run = lifecycle.admitNow(call, 'stream') ?? (await lifecycle.admitQueued(call, 'stream'));
      await lifecycle.complete(run, call, runStream(run, target, recorder, body, response, { gzip, keepItems: webhook !== null || target.resultKeeping !== null }));
      return;
    }
    const run = lifecycle.admitNow(call, 'sync') ?? (await lifecycle.admitQueued(call, 'sync'));
    await lifecycle.complete(run, call, runSync(run, target, recorder, body, exchange, webhook !== null || target.resultKeeping !== null));
  }

  /** The body of a Python function's call that the front read whole, checked. */
  function checkWholeBody(body: Buffer | null): Buffer {
    const whole = body ?? EMPTY_BODY;
    assertBodyWithinLimit(whole, bodyLimitBytes);
    return checkJsonObjectBody(whole);
  }

  /** `heldBody`: the body a held call's header was checked against, read already. */
  async function handleCustom(call: Call, request: IncomingMessage, response: ServerResponse, forwardPath: string, isAsync: boolean, heldBody: Buffer | null): Promise<void> {
    const { target } = call;
    if (!target.ready) throw appUnavailable(target);
    if (isAsync) {
      const body = heldBody ?? (hasBody(request) ? await readLimitedBody(request, bodyBounds) : null);
      const run = await acceptAsync(replica, lifecycle, call, response);
      const headers = forwardedRequestHeaders(request, call.runId, auth !== null);
      const buffered = { method: call.method, forwardPath, headers, body, answerLimitBytes: bodyLimitBytes };
      void executeAsync(lifecycle, run, call, () => callCustomBuffered(run, target, recorder, buffered));
      return;
    }
    // A streamed body is forwarded as it comes; one declared too large is refused before anything runs.
    assertDeclaredLength(request, bodyLimitBytes);
    const run = lifecycle.admitNow(call, 'sync') ?? (await lifecycle.admitQueued(call, 'sync'));
    const captureBytes = call.webhook || target.resultKeeping ? bodyLimitBytes : 0;
    const arrival = { deadlineMs: bodyBounds.deadlineMs, passesAt: call.receivedAt + bodyBounds.deadlineMs };
    await lifecycle.complete(run, call, proxyCustom(run, target, recorder, request, response, { forwardPath, captureBytes, dropAuthorization: auth !== null, arrival }));
  }

  function drainingProblem(): ProblemError {
    metrics.refused.labels('draining').inc();
    return new ProblemError(Problems.draining, 'This replica is shutting down; retry on another', { headers: { 'retry-after': '1' } });
  }

  function toProblem(error: unknown): ProblemError {
    if (error instanceof ProblemError) return error;
    logger.error({ err: error }, 'run interface error');
    return new ProblemError(Problems.internalError, 'The sidecar failed to handle the request; the error is in its log', { cause: error });
  }

  return { handle, handleWhole, screenHead, bodyBounds, requestRefused: (problem) => metrics.requestRefused(problem) };
}

function appNotFound(route: RunPath): ProblemError {
  return new ProblemError(Problems.appNotFound, `No app named "${route.appName}" in project "${route.projectId}"`);
}

function withQuery(query: string): string {
  return query ? '?' + query : '';
}
