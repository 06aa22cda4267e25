// The run interface, `/v4/{project_id}/{app_name}/{function}`, read top to bottom:
// request id → app → options → body → mode (sync | stream | custom proxy) → record.
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { ActiveRun, type ActiveRuns } from './active-runs.ts';
import type { AppRegistry, AppTarget } from './apps.ts';
import { Problems } from './errors.ts';
import { acceptsEventStream, acceptsGzip, functionNameProblem } from './http-negotiation.ts';
import { proxyCustom } from './modes/custom-proxy.ts';
import type { RunOutcome } from './modes/outcome.ts';
import { runStream } from './modes/stream.ts';
import { runSync } from './modes/sync.ts';
import { PROBLEM_CONTENT_TYPE, ProblemError } from './problem.ts';
import { readJsonObjectBody } from './request-body.ts';
import { forwardedQuery, parseRunOptions } from './run-options.ts';
import type { RunMode, RunRecord } from './runs/record.ts';
import { newRunId, type RunRecorder } from './runs/recorder.ts';
import { appUnavailable } from './runtime-client.ts';

export const DEFAULT_BODY_LIMIT_BYTES = 16 * 1024 * 1024;

export interface RunInterfaceOptions {
  apps: AppRegistry;
  recorder: RunRecorder;
  activeRuns: ActiveRuns;
  logger: Logger;
  bodyLimitBytes?: number;
  /** True once the replica is draining: new runs are refused. */
  isDraining: () => boolean;
}

interface RunParams {
  projectId: string;
  appName: string;
  '*'?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The run id of a run-interface request; also its `X-Request-Id`. */
    runId: string;
  }
}

/** Registers the run interface on a fastify instance (its own error handling, encapsulated). */
export function runInterface(options: RunInterfaceOptions) {
  const { apps, recorder, activeRuns, logger, isDraining } = options;
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;

  async function handleRun(request: FastifyRequest<{ Params: RunParams }>, reply: FastifyReply): Promise<void> {
    const receivedAt = performance.now();
    const runId = newRunId();
    request.runId = runId;
    reply.header('x-request-id', runId);

    if (isDraining()) throw new ProblemError(Problems.draining, 'This replica is shutting down; retry on another', { headers: { 'retry-after': '1' } });
    const { projectId, appName } = request.params;
    const target = apps.find(projectId, appName);
    if (!target) throw new ProblemError(Problems.appNotFound, `No app named "${appName}" in project "${projectId}"`);
    const runOptions = parseRunOptions(request.query as Record<string, string | string[] | undefined>);
    const rest = request.params['*'] ?? '';

    if (target.runtime === 'custom') {
      if (!target.ready) throw appUnavailable(target);
      const forwardPath = customForwardPath(request.url, rest);
      const run = begin(target, runId, rest, request.method, 'sync', runOptions.async, receivedAt);
      await settled(run, proxyCustom(run, target, recorder, request, reply, { forwardPath, captureBytes: 0 }));
      return;
    }

    if (request.method !== 'POST') {
      throw new ProblemError(Problems.methodNotAllowed, `Functions are called with POST, not ${request.method}`, {
        headers: { allow: 'POST' },
      });
    }
    const nameProblem = functionNameProblem(rest);
    if (nameProblem) throw new ProblemError(Problems.functionNotFound, nameProblem);
    const body = await readJsonObjectBody(
      request.body as Readable | undefined,
      request.headers['content-length'],
      bodyLimitBytes,
    );
    if (!target.ready) throw appUnavailable(target);

    if (acceptsEventStream(request.headers.accept)) {
      const run = begin(target, runId, rest, 'POST', 'stream', false, receivedAt);
      const gzip = acceptsGzip(request.headers['accept-encoding']);
      await settled(run, runStream(run, target, recorder, body, reply, { gzip, keepItems: false }));
      return;
    }
    const run = begin(target, runId, rest, 'POST', 'sync', false, receivedAt);
    await settled(run, runSync(run, target, recorder, body, reply));
  }

  function begin(
    target: AppTarget,
    runId: string,
    functionName: string,
    method: string,
    mode: RunMode,
    isAsync: boolean,
    receivedAt: number,
  ): ActiveRun {
    const record = recorder.pending({ id: runId, target, functionName, method, mode, async: isAsync, webhook: null, receivedAt });
    const run = new ActiveRun(record, target.runTimeLimitMs);
    activeRuns.add(run);
    recorder.running(record);
    return run;
  }

  async function settled(run: ActiveRun, outcome: Promise<RunOutcome>): Promise<void> {
    try {
      await outcome;
    } finally {
      activeRuns.delete(run);
      logRun(logger, run.record);
    }
  }

  return async function register(app: FastifyInstance): Promise<void> {
    app.decorateRequest('runId', '');
    app.removeAllContentTypeParsers();
    // The body stays a stream: Python calls read it with a limit, custom apps get it streamed through.
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    app.setErrorHandler((error, request, reply) => sendProblem(request, reply, toProblem(error), logger));
    app.setNotFoundHandler((request, reply) => {
      request.runId = newRunId();
      sendProblem(request, reply, new ProblemError(Problems.routeNotFound, `${request.method} ${request.url.split('?', 1)[0]} is not a route of the run interface`), logger);
    });
    app.all('/v4/:projectId/:appName', handleRun);
    app.all('/v4/:projectId/:appName/*', handleRun);
  };
}

function customForwardPath(url: string, rest: string): string {
  const queryStart = url.indexOf('?');
  const query = queryStart === -1 ? '' : forwardedQuery(url.slice(queryStart + 1));
  return '/' + rest + (query ? '?' + query : '');
}

function toProblem(error: unknown): ProblemError {
  if (error instanceof ProblemError) return error;
  const code = (error as { code?: string }).code;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ProblemError(Problems.bodyTooLarge, (error as Error).message);
  return new ProblemError(
    { code: 'internal', status: 500, title: 'Internal error' },
    'The sidecar failed to handle the request; the error is in its log',
    { cause: error },
  );
}

export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: ProblemError, logger: Logger): void {
  if (problem.status >= 500 && problem.spec.code === 'internal') {
    logger.error({ err: problem.cause, runId: request.runId, url: request.url }, 'run interface error');
  }
  if (reply.sent || reply.raw.headersSent) {
    reply.raw.destroy();
    return;
  }
  if (request.runId) reply.header('x-request-id', request.runId);
  if (problem.headers) reply.headers(problem.headers);
  reply.code(problem.status).header('content-type', PROBLEM_CONTENT_TYPE).send(JSON.stringify(problem.toBody()));
}

function logRun(logger: Logger, record: RunRecord): void {
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
