// The management API (list runs) as a fastify plugin: one handler over any RunSource — SQLite in `runlet dev`,
// the RunLog cache in the operator. Register it without fastify-plugin: its validator, error handler and 404
// handler are meant to stay inside it, whatever the host server does with its own routes.
import swagger from '@fastify/swagger';
import type { ErrorObject } from 'ajv';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEM_CONTENT_TYPE, ProblemError } from '../crds/problem.ts';
import { Problems, requestRejectedProblem } from '../crds/problems.ts';
import type { RunRecord, RunStatus } from '../crds/run-record-schema.ts';
import { resolveAppName, type AppDirectory } from './app-directory.ts';
import type { AppList, AppSummary } from './app-list.ts';
import { decodePageToken, encodePageToken, type PageScope } from './page-token.ts';
import type { ManagementAuthenticate, ManagementVerb } from './kube-auth.ts';
import type { RunCanceller } from './run-canceller.ts';
import type { RunSource } from './run-source.ts';
import {
  BEARER_SECURITY_SCHEME_NAME,
  appListSchema,
  appParamsSchema,
  jsonResponse,
  listRunsQuerySchema,
  managementDocument,
  noQuerySchema,
  problemResponse,
  projectParamsSchema,
  runItemSchema,
  runPageSchema,
  runParamsSchema,
  type AsyncOnlyValue,
} from './schemas.ts';
import { createValidatorCompiler, validationProblem } from './validation.ts';

export interface ManagementApiOptions {
  runs: RunSource;
  apps: AppDirectory;
  /** The apps of a project, for `GET /v2/projects/{project_id}/apps`. */
  appList: AppList;
  /**
   * Cluster mode: checks the caller's bearer token for the project and throws a ProblemError (401
   * `unauthorized`, 403 `forbidden`) to refuse. Runs before anything else of the request. Absent in local mode,
   * which binds to loopback; its presence also marks the operations as requiring the bearer scheme.
   */
  authenticate?: ManagementAuthenticate;
  /** Where runs in flight are stopped (the replica's own in `runlet dev`, the replicas' through their admin port in a cluster); without it no cancel operation is served. */
  canceller?: RunCanceller;
}

/** Version prefix of the management interface (interface section 9). */
const API_PREFIX = '/v2';
const APPS_PATH = '/projects/:project_id/apps';
const RUNS_PATH = '/projects/:project_id/apps/:app_id/runs';
const RUN_PATH = `${RUNS_PATH}/:run_id`;
const CANCEL_PATH = `${RUN_PATH}/cancel`;
const ALLOWED_METHODS = 'GET, HEAD';
const REFUSED_METHODS = ['DELETE', 'PATCH', 'POST', 'PUT'];

interface AppParams {
  project_id: string;
  app_id: string;
}

interface RunParams extends AppParams {
  run_id: string;
}

/** After validation: defaults applied, `pageSize` coerced to a number. */
interface ListRunsQuerystring {
  pageSize: number;
  nextToken?: string;
  asyncOnly: AsyncOnlyValue;
  status?: RunStatus;
}

interface RunPageBody {
  items: RunRecord[];
  nextToken: string | null;
}

export const managementApi: FastifyPluginAsync<ManagementApiOptions> = async (fastify, options) => {
  fastify.setValidatorCompiler(createValidatorCompiler());
  fastify.setErrorHandler(renderError);
  await fastify.register(swagger, { openapi: managementDocument, exposeHeadRoutes: true });
  // A prefixed child, so that the 404 handler covers `/v2/…` only and leaves the host's other paths alone.
  await fastify.register(async (v2) => registerRoutes(v2, options), { prefix: API_PREFIX });
};

async function registerRoutes(v2: FastifyInstance, options: ManagementApiOptions): Promise<void> {
  const { runs, apps, appList, authenticate, canceller } = options;
  const hookFor = (verb: ManagementVerb) =>
    authenticate === undefined
      ? undefined
      : async (request: FastifyRequest<{ Params: { project_id: string } }>) => authenticate(request, request.params.project_id, verb);
  const authHook = hookFor('list');
  // Interface section 5.5: no security at the document level, the bearer scheme on each operation. The
  // contract holds in every mode; `runlet dev` (loopback only) simply does not enforce it.
  const security = { security: [{ [BEARER_SECURITY_SCHEME_NAME]: [] }] };
  const authResponses = {
    401: problemResponse('No valid bearer token (cluster mode).'),
    403: problemResponse('The token may not list runs of this project (cluster mode).'),
    503: problemResponse(
      'The token could not be reviewed: the Kubernetes API failed (auth-unavailable), or too many tokens are being reviewed (auth-overloaded); retry after Retry-After.',
    ),
  };

  // Documentation keywords (operationId, summary, tags, security) are for @fastify/swagger, which fastify's
  // FastifySchema type does not know: the schemas are declared apart from the route options for that reason.
  const listRunsSchema = {
    operationId: 'listRuns',
    summary: 'List the runs of an app, newest first',
    tags: ['runs'],
    ...security,
    params: appParamsSchema,
    querystring: listRunsQuerySchema,
    response: {
      200: jsonResponse('A page of runs, newest first.', runPageSchema),
      400: problemResponse('A query parameter is unknown or invalid, or nextToken does not fit the request.'),
      ...authResponses,
      404: problemResponse('No such project or app.'),
      500: problemResponse('The runs could not be read; the server log has the cause.'),
    },
  };
  const getRunSchema = {
    operationId: 'getRun',
    summary: 'Get one run of an app',
    tags: ['runs'],
    ...security,
    params: runParamsSchema,
    querystring: noQuerySchema,
    response: {
      200: jsonResponse('The run.', runItemSchema),
      400: problemResponse('A query parameter was given; this operation takes none.'),
      ...authResponses,
      404: problemResponse('No such project, app or run.'),
      500: problemResponse('The run could not be read; the server log has the cause.'),
    },
  };

  const listAppsSchema = {
    operationId: 'listApps',
    summary: 'List the apps of a project, by name',
    tags: ['apps'],
    ...security,
    params: projectParamsSchema,
    querystring: noQuerySchema,
    response: {
      200: jsonResponse('The apps of the project (none: an empty list).', appListSchema),
      400: problemResponse('A query parameter was given; this operation takes none.'),
      ...authResponses,
    },
  };

  v2.get<{ Params: { project_id: string } }>(
    APPS_PATH,
    { exposeHeadRoute: true, onRequest: authHook, schema: listAppsSchema },
    async (request): Promise<{ items: AppSummary[] }> => ({
      items: appList(request.params.project_id).sort((a, b) => a.name.localeCompare(b.name)),
    }),
  );

  v2.get<{ Params: AppParams; Querystring: ListRunsQuerystring }>(
    RUNS_PATH,
    {
      exposeHeadRoute: true,
      onRequest: authHook,
      schema: listRunsSchema,
    },
    async (request): Promise<RunPageBody> => {
      const { project_id: projectId, app_id: appId } = request.params;
      const appName = requireApp(apps, projectId, appId);
      const { pageSize, nextToken, asyncOnly, status } = request.query;
      const scope: PageScope = {
        projectId,
        appName,
        asyncOnly: asyncOnly === 'true' || asyncOnly === '1',
        status: status ?? null,
      };
      const beforeId = nextToken === undefined ? null : beforeIdOf(nextToken, scope);
      const page = await runs.listRuns({ ...scope, pageSize, beforeId });
      const last = page.items.at(-1);
      const next = page.hasMore && last !== undefined ? encodePageToken(last.id, scope) : null;
      return { items: page.items, nextToken: next };
    },
  );

  v2.get<{ Params: RunParams }>(
    RUN_PATH,
    {
      exposeHeadRoute: true,
      onRequest: authHook,
      schema: getRunSchema,
    },
    async (request): Promise<{ item: RunRecord }> => {
      const { project_id: projectId, app_id: appId, run_id: runId } = request.params;
      const appName = requireApp(apps, projectId, appId);
      const item = await runs.getRun(projectId, appName, runId);
      if (item === undefined) {
        throw new ProblemError(Problems.runNotFound, `no run ${runId} in app ${projectId}/${appName}`);
      }
      return { item };
    },
  );

  if (canceller !== undefined) {
    const cancelRunSchema = {
      operationId: 'cancelRun',
      summary: 'Cancel a run: one still waiting never starts, a running one is stopped',
      description:
        'The run ends `cancelled` with reason `cancel_requested`; its caller is answered `409 run-cancelled` (a stream already answering: `event: error`), and its webhook is sent that outcome. Idempotent: a run already cancelled this way answers `202` again.',
      tags: ['runs'],
      ...security,
      params: runParamsSchema,
      querystring: noQuerySchema,
      response: {
        202: jsonResponse('The cancel is under way: the run as it stands (GET it to see it `cancelled`), or as it ended when it was cancelled already.', runItemSchema),
        400: problemResponse('A query parameter was given; this operation takes none.'),
        ...authResponses,
        403: problemResponse('The token may not cancel runs of this project (cluster mode: it needs the verb `cancel` on `runs.runlet.dev`).'),
        404: problemResponse('No such project, app or run.'),
        409: problemResponse('The run has already finished (run-finished), or is ending for another reason (its time limit, a shutdown).'),
        500: problemResponse('The run could not be read; the server log has the cause.'),
      },
    };
    v2.post<{ Params: RunParams }>(CANCEL_PATH, { onRequest: hookFor('cancel'), schema: cancelRunSchema }, async (request, reply) => {
      const { project_id: projectId, app_id: appId, run_id: runId } = request.params;
      const appName = requireApp(apps, projectId, appId);
      const stopping = await canceller.cancel(projectId, appName, runId);
      if (stopping !== null) {
        if (stopping.stoppedFor !== 'cancel_requested') {
          throw new ProblemError(Problems.runFinished, `run ${runId} is already ending (${stopping.stoppedFor}); it was not cancelled`);
        }
        return reply.code(202).send({ item: stopping.record });
      }
      const item = await runs.getRun(projectId, appName, runId);
      if (item === undefined) throw new ProblemError(Problems.runNotFound, `no run ${runId} in app ${projectId}/${appName}`);
      if (item.reason === 'cancel_requested') return reply.code(202).send({ item });
      if (item.status === 'pending' || item.status === 'running') {
        // Listed in flight, but its replica no longer runs it: it finished since its record was last written.
        throw new ProblemError(Problems.runFinished, `run ${runId} has just finished on its replica; GET it in a moment for its outcome`);
      }
      throw new ProblemError(Problems.runFinished, `run ${runId} has already finished (${item.status}); there is nothing to cancel`);
    });
  }

  v2.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'getManagementDocument',
        summary: 'This OpenAPI document',
        tags: ['meta'],
        querystring: noQuerySchema,
        response: { 200: { description: 'The OpenAPI 3.0.0 description of the management interface.', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
    (_request, reply) => {
      reply.header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(v2.swagger()));
    },
  );

  // Fastify answers a known path with an unrouted method as 404; the resource exists, so 405 with `Allow`.
  // Hidden from the OpenAPI document: these are refusals, not operations.
  const refusedMethodSchema = { hide: true, response: { 405: problemResponse('Only GET and HEAD are allowed.') } };
  for (const [url, resource] of [[APPS_PATH, 'apps'], [RUNS_PATH, 'runs'], [RUN_PATH, 'runs']] as const) {
    const refuseMethod = refuseMethodOn(resource);
    v2.route({
      method: REFUSED_METHODS,
      url,
      schema: refusedMethodSchema,
      // Refused in onRequest, before any request body is read or parsed; the handler is required by fastify
      // and never reached.
      onRequest: refuseMethod,
      handler: refuseMethod,
    });
  }

  const served = [`GET ${APPS_PATH}`, `GET ${RUNS_PATH}`, `GET ${RUN_PATH}`, ...(canceller === undefined ? [] : [`POST ${CANCEL_PATH}`])];
  const servedPaths = served.map((route) => route.replace(' ', ` ${v2.prefix}`).replaceAll(/:(\w+)/g, '{$1}'));
  v2.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?', 1)[0];
    const detail = `no route for ${request.method} ${path}; the management API serves ${servedPaths.join(', ')}`;
    return sendProblem(reply, new ProblemError(Problems.routeNotFound, detail));
  });
}

function requireApp(apps: AppDirectory, projectId: string, appId: string): string {
  const appName = resolveAppName(apps, projectId, appId);
  if (appName === undefined) {
    throw new ProblemError(
      Problems.appNotFound,
      `no app ${appId} in project ${projectId} (app_id is an app name or {project_id}-{app_name})`,
    );
  }
  return appName;
}

function beforeIdOf(nextToken: string, scope: PageScope): string {
  const decoded = decodePageToken(nextToken, scope);
  if (!decoded.ok) {
    throw new ProblemError(Problems.invalidPageToken, `nextToken ${decoded.reason}`, {
      extensions: { parameter: 'nextToken' },
    });
  }
  return decoded.beforeId;
}

function refuseMethodOn(resource: 'apps' | 'runs'): (request: FastifyRequest) => Promise<never> {
  return async (request) => {
    throw new ProblemError(
      Problems.methodNotAllowed,
      `${request.method} is not allowed on ${resource}; they are read with ${ALLOWED_METHODS}`,
      { headers: { allow: ALLOWED_METHODS } },
    );
  };
}

/** What fastify attaches to the errors it raises itself (validation, parsing, routing). */
interface FrameworkError extends Error {
  statusCode?: number;
  validation?: unknown;
  validationContext?: string;
}

function renderError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const problem = toProblem(error);
  if (problem.status >= 500) request.log.error({ err: error }, 'management API request failed');
  return sendProblem(reply, problem);
}

function toProblem(error: unknown): ProblemError {
  if (error instanceof ProblemError) return error;
  if (error instanceof Error) {
    const { statusCode, validation, validationContext } = error as FrameworkError;
    if (Array.isArray(validation)) {
      // Raised by the validator of createValidatorCompiler: verbose Ajv errors.
      return validationProblem(validation as ErrorObject[], validationContext);
    }
    if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
      return new ProblemError(requestRejectedProblem(statusCode), error.message);
    }
  }
  return new ProblemError(
    Problems.internalError,
    'the management API could not answer this request; the server log has the cause',
    { cause: error },
  );
}

function sendProblem(reply: FastifyReply, problem: ProblemError): FastifyReply {
  if (problem.headers !== undefined) reply.headers(problem.headers);
  return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problem.toBody());
}
