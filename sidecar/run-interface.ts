// The run interface, `/v4/{project_id}/{app_name}/{function}`, read top to bottom:
// request id → app → options (async, webhook) → body → admission → mode (sync | stream | async | custom)
// → record → webhook.
import type { Readable } from 'node:stream';
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ActiveRun } from './active-runs.ts';
import type { AppTarget } from './apps.ts';
import { Problems } from './errors.ts';
import { acceptsEventStream, acceptsGzip, functionNameProblem } from './http-negotiation.ts';
import { callCustomBuffered } from './modes/custom-call.ts';
import { forwardedRequestHeaders, proxyCustom } from './modes/custom-proxy.ts';
import type { RunOutcome } from './modes/outcome.ts';
import { callRecorded } from './modes/python-call.ts';
import { runStream } from './modes/stream.ts';
import { JSON_CONTENT_TYPE, runSync, settle } from './modes/sync.ts';
import { PROBLEM_CONTENT_TYPE, ProblemError } from './problem.ts';
import type { Replica } from './replica.ts';
import { assertDeclaredLength, readJsonObjectBody, readLimitedBody } from './request-body.ts';
import {
  customAppSchema,
  documentSchema,
  runFunctionSchema,
  runInterfaceDocument,
  SHARED_SCHEMAS,
  WEBHOOK_CALLBACK_PARAMETERS,
} from './run-interface-schemas.ts';
import { forwardedQuery, parseRunOptions } from './run-options.ts';
import type { RunMode, RunRecord } from './runs/record.ts';
import { newRunId } from './runs/recorder.ts';
import { appUnavailable, validateCall } from './runtime-client.ts';
import { parseWebhookRequest, pendingWebhookRecord, type WebhookRequest } from './webhook-forwarding.ts';

export const DEFAULT_BODY_LIMIT_BYTES = 16 * 1024 * 1024;

interface RunParams {
  project_id: string;
  app_name: string;
  /** One path segment: a Python function, or a custom app's path. */
  function?: string;
  /** Deeper custom-app paths. */
  '*'?: string;
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

declare module 'fastify' {
  interface FastifyRequest {
    /** The run id of a run-interface request; also its `X-Request-Id`. */
    runId: string;
  }
}

/** Registers the run interface of a replica on a fastify instance (encapsulated: its own error handling). */
export function runInterface(replica: Replica) {
  const { apps, recorder, activeRuns, metrics, webhooks, logger, auth } = replica;
  const bodyLimitBytes = replica.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;

  async function handleRun(request: FastifyRequest<{ Params: RunParams }>, reply: FastifyReply): Promise<void> {
    const receivedAt = performance.now();
    const runId = newRunId();
    request.runId = runId;
    reply.header('x-request-id', runId);

    if (replica.draining) {
      metrics.refused.labels('draining').inc();
      throw new ProblemError(Problems.draining, 'This replica is shutting down; retry on another', { headers: { 'retry-after': '1' } });
    }
    const { project_id: projectId, app_name: appName } = request.params;
    if (auth) {
      // Before the app lookup: a caller without a valid token learns nothing about which apps exist.
      const pending = auth.authenticate(request.headers.authorization, projectId);
      if (pending) await pending;
    }
    const target = apps.find(projectId, appName);
    if (!target) throw new ProblemError(Problems.appNotFound, `No app named "${appName}" in project "${projectId}"`);
    const options = parseRunOptions(request.query as Record<string, string | string[] | undefined>);
    const webhook = options.webhookEndpoint === null ? null : parseWebhookRequest(options.webhookEndpoint, request.headers['x-webhook-secret']);
    const rest = request.params.function ?? request.params['*'] ?? '';
    const call: Call = { target, runId, functionName: rest, method: request.method, receivedAt, webhook };

    if (target.runtime === 'custom') return handleCustom(call, request, reply, options.async);

    if (request.method !== 'POST') {
      throw new ProblemError(Problems.methodNotAllowed, `Functions are called with POST, not ${request.method}`, { headers: { allow: 'POST' } });
    }
    const nameProblem = functionNameProblem(rest);
    if (nameProblem) throw new ProblemError(Problems.functionNotFound, nameProblem);
    const body = await readJsonObjectBody(request.body as Readable | undefined, request.headers['content-length'], bodyLimitBytes);
    if (!target.ready) throw appUnavailable(target);

    if (options.async) {
      // Checked before the 202, so a bad call gets the same answer as sync: nothing is accepted that cannot run.
      const refusal = await validateCall(target, rest, body, runId).catch((err: unknown) => {
        throw new ProblemError(Problems.upstreamFailed, `The app's runtime could not check the call: ${(err as Error).message}`, { cause: err });
      });
      if (refusal) {
        reply.code(refusal.statusCode).header('content-type', PROBLEM_CONTENT_TYPE).send(refusal.body);
        return;
      }
      // Async with `Accept: text/event-stream` runs as async: a generator's items become the result list.
      const run = await acceptAsync(call, reply);
      void executeAsync(run, call, () => callRecorded(run, target, recorder, body, false).then((answer) => settle(run, recorder, answer)));
      return;
    }
    if (acceptsEventStream(request.headers.accept)) {
      const gzip = acceptsGzip(request.headers['accept-encoding']);
      const run = await admit(call, 'stream');
      await complete(run, call, runStream(run, target, recorder, body, reply, { gzip, keepItems: webhook !== null }));
      return;
    }
    const run = await admit(call, 'sync');
    await complete(run, call, runSync(run, target, recorder, body, reply));
  }

  async function handleCustom(call: Call, request: FastifyRequest, reply: FastifyReply, isAsync: boolean): Promise<void> {
    const { target } = call;
    if (!target.ready) throw appUnavailable(target);
    const forwardPath = customForwardPath(request.url, call.functionName);
    if (isAsync) {
      const body = request.body ? await readLimitedBody(request.body as Readable, request.headers['content-length'], bodyLimitBytes) : null;
      const run = await acceptAsync(call, reply);
      const headers = forwardedRequestHeaders(request, call.runId, auth !== null);
      const buffered = { method: request.method, forwardPath, headers, body, answerLimitBytes: bodyLimitBytes };
      void executeAsync(run, call, () => callCustomBuffered(run, target, recorder, buffered));
      return;
    }
    // A streamed body is forwarded as it comes; one declared too large is refused before anything runs.
    assertDeclaredLength(request.body as Readable | undefined, request.headers['content-length'], bodyLimitBytes);
    const run = await admit(call, 'sync');
    const captureBytes = call.webhook ? bodyLimitBytes : 0;
    await complete(run, call, proxyCustom(run, target, recorder, request, reply, { forwardPath, captureBytes, dropAuthorization: auth !== null }));
  }

  /** Sync and stream runs: a slot now, or a wait in the queue (recorded `pending`), or 503 when it is full. */
  async function admit(call: Call, mode: RunMode): Promise<ActiveRun> {
    const admission = call.target.admission;
    if (admission.tryAcquire()) return start(track(call, mode, false));
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
  async function acceptAsync(call: Call, reply: FastifyReply): Promise<ActiveRun> {
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
    reply.code(202).header('content-type', JSON_CONTENT_TYPE).send('{"run_id":"' + call.runId + '"}');
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
    const run = new ActiveRun(record, call.target.runTimeLimitMs);
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
    logRun(run.record);
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

  return async function register(app: FastifyInstance): Promise<void> {
    app.decorateRequest('runId', '');
    app.removeAllContentTypeParsers();
    // The body stays a stream: Python calls read it with a limit, custom apps get it streamed through.
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    // The schemas are the documented contract; the pipeline validates (see run-interface-schemas.ts).
    app.setValidatorCompiler(() => () => true);
    app.setErrorHandler((error, request, reply) => sendProblem(request, reply, toProblem(error, logger)));
    app.setNotFoundHandler((request, reply) => {
      request.runId = newRunId();
      const path = request.url.split('?', 1)[0];
      sendProblem(request, reply, new ProblemError(Problems.routeNotFound, `${request.method} ${path} is not a route of the run interface`));
    });
    for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
    await app.register(swagger, {
      openapi: runInterfaceDocument,
      exposeHeadRoutes: true,
      // Components named after the shared schemas' ids (Problem, SyncResult, ...) rather than def-N.
      refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
      transformObject: (document) => ('openapiObject' in document ? withCallbackHeaders(document.openapiObject) : document.swaggerObject),
    });

    app.get('/v4/openapi.json', { schema: documentSchema }, (_request, reply) => {
      reply.header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(app.swagger()));
    });
    app.post('/v4/:project_id/:app_name/:function', { schema: runFunctionSchema }, handleRun);
    for (const method of CUSTOM_APP_METHODS) {
      app.route({ method, url: '/v4/:project_id/:app_name/:function', schema: customAppSchema(method, 'path'), handler: handleRun, exposeHeadRoute: false });
    }
    for (const method of ['POST', ...CUSTOM_APP_METHODS] as const) {
      app.route({ method, url: '/v4/:project_id/:app_name', schema: customAppSchema(method, 'root'), handler: handleRun, exposeHeadRoute: false });
    }
    // Deeper custom-app paths: the same operations as /{function}, which OpenAPI 3.0 paths cannot template.
    app.all('/v4/:project_id/:app_name/*', { schema: { hide: true } }, handleRun);
  };
}

/** Methods a custom app answers besides POST (POST on /{function} is runFunction, shared with Python apps). */
const CUSTOM_APP_METHODS = ['GET', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

/** Adds the webhook's header parameters to every callback operation (see WEBHOOK_CALLBACK_PARAMETERS). */
function withCallbackHeaders<T>(document: T): T {
  const paths = (document as { paths?: Record<string, Record<string, { callbacks?: Record<string, Record<string, Record<string, object>>> }>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      for (const callback of Object.values(operation.callbacks ?? {})) {
        for (const expression of Object.values(callback)) {
          for (const callbackOperation of Object.values(expression)) Object.assign(callbackOperation, { parameters: WEBHOOK_CALLBACK_PARAMETERS });
        }
      }
    }
  }
  return document;
}

/** The outcome of a run that ended in a recorded failure (the mode threw after recording it). */
function outcomeOf(record: RunRecord): RunOutcome {
  return { statusCode: record.statusCode ?? 500, success: false, resultJson: null, error: record.error, runTimeMs: record.runtimeMs ?? 0 };
}

function customForwardPath(url: string, rest: string): string {
  const queryStart = url.indexOf('?');
  const query = queryStart === -1 ? '' : forwardedQuery(url.slice(queryStart + 1));
  return '/' + rest + (query ? '?' + query : '');
}

function toProblem(error: unknown, logger: Replica['logger']): ProblemError {
  if (error instanceof ProblemError) return error;
  const code = (error as { code?: string }).code;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ProblemError(Problems.bodyTooLarge, (error as Error).message);
  logger.error({ err: error }, 'run interface error');
  return new ProblemError(Problems.internal, 'The sidecar failed to handle the request; the error is in its log', { cause: error });
}

export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: ProblemError): void {
  if (reply.sent || reply.raw.headersSent) {
    reply.raw.destroy();
    return;
  }
  if (request.runId) reply.header('x-request-id', request.runId);
  if (problem.headers) reply.headers(problem.headers);
  reply.code(problem.status).header('content-type', PROBLEM_CONTENT_TYPE).send(JSON.stringify(problem.toBody()));
}
