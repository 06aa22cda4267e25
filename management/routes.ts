// The management API (list runs) as a fastify plugin: one handler over any RunSource — SQLite in `runlet dev`,
// the RunLog cache in the operator. Register it without fastify-plugin: its validator, error handler and 404
// handler are meant to stay inside it, whatever the host server does with its own routes.
import swagger from '@fastify/swagger';
import type { ErrorObject } from 'ajv';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEM_CONTENT_TYPE, ProblemError } from '../crds/problem.ts';
import { Problems, requestRejectedProblem } from '../crds/problems.ts';
import type { RunRecord, RunStatus } from '../crds/run-record-schema.ts';
import { CANCEL_RUNS, CREATE_KEYS, DELETE_KEYS, LIST_KEYS, LIST_RUNS, type ManagementAccess } from './access.ts';
import { DEFAULT_MAX_KEY_LIFETIME_MS, MIN_KEY_LIFETIME_MS, type ApiKey, type ApiKeyStore, type CreatedApiKey } from './api-keys.ts';
import { KEY_NAME, ROUTE_PARAMETERS, checkName } from '../crds/route-names.ts';
import { resolveAppName, type AppDirectory } from './app-directory.ts';
import type { AppList, AppSummary } from './app-list.ts';
import { decodePageToken, encodePageToken, type PageScope } from './page-token.ts';
import type { ManagementAuthenticate } from './kube-auth.ts';
import type { RunCanceller } from './run-canceller.ts';
import type { RunSource } from './run-source.ts';
import {
  BEARER_SECURITY_SCHEME_NAME,
  apiKeyListSchema,
  appListSchema,
  appParamsSchema,
  createApiKeySchema,
  createdApiKeySchema,
  keyParamsSchema,
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
   * Cluster mode: checks the caller's bearer token for the project and the operation's access, and throws a
   * ProblemError (401 `unauthorized`, 403 `forbidden`) to refuse. Runs before anything else of the request.
   * Absent in local mode, which binds to loopback; its presence also marks the operations as requiring the
   * bearer scheme.
   */
  authenticate?: ManagementAuthenticate;
  /** Where runs in flight are stopped (the replica's own in `runlet dev`, the replicas' through their admin port in a cluster); without it no cancel operation is served. */
  canceller?: RunCanceller;
  /** The API keys of projects; without it (`runlet dev` without an auth key) no key operation is served. */
  keys?: ApiKeyStore;
  /** The longest lifetime a key may be made with; a later `expiresAt` is refused (400). Default a year. */
  maxKeyLifetimeMs?: number;
}

/** Version prefix of the management interface (interface section 9). */
const API_PREFIX = '/v2';
const APPS_PATH = '/projects/:project_id/apps';
const RUNS_PATH = '/projects/:project_id/apps/:app_id/runs';
const RUN_PATH = `${RUNS_PATH}/:run_id`;
const CANCEL_PATH = `${RUN_PATH}/cancel`;
const KEYS_PATH = '/projects/:project_id/keys';
const KEY_PATH = `${KEYS_PATH}/:key_name`;
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
  functionName?: string;
  createdAfter?: string;
  createdBefore?: string;
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
  const { runs, apps, appList, authenticate, canceller, keys } = options;
  // Every operation's path parameters are checked first, before the caller's token is reviewed for the project
  // they name, and before any of them reaches a store or a Kubernetes API path.
  const authHookFor = (access: ManagementAccess) =>
    authenticate === undefined
      ? [checkRouteParameters]
      : [checkRouteParameters, async (request: FastifyRequest<{ Params: { project_id: string } }>) => authenticate(request, request.params.project_id, access)];
  const authHook = authHookFor(LIST_RUNS);
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
      503: problemResponse('The run store cannot write the records it holds (runlet dev: its disk is full), so it cannot list them, or (a cluster) the results store has not opened yet; retry after Retry-After.'),
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
      503: problemResponse('The run store cannot write the records it holds (runlet dev: its disk is full), so it cannot read them, or (a cluster) the results store has not opened yet; retry after Retry-After.'),
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
      const { pageSize, nextToken, asyncOnly, status, functionName, createdAfter, createdBefore } = request.query;
      const scope: PageScope = {
        projectId,
        appName,
        asyncOnly: asyncOnly === 'true' || asyncOnly === '1',
        status: status ?? null,
        functionName: functionName ?? null,
        createdAfter: instantOf('createdAfter', createdAfter),
        createdBefore: instantOf('createdBefore', createdBefore),
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
    v2.post<{ Params: RunParams }>(CANCEL_PATH, { onRequest: authHookFor(CANCEL_RUNS), schema: cancelRunSchema }, async (request, reply) => {
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

  if (keys !== undefined) registerKeyRoutes(v2, keys, authHookFor, { ...security, authResponses }, options.maxKeyLifetimeMs ?? DEFAULT_MAX_KEY_LIFETIME_MS);

  const served = [
    `GET ${APPS_PATH}`,
    `GET ${RUNS_PATH}`,
    `GET ${RUN_PATH}`,
    ...(canceller === undefined ? [] : [`POST ${CANCEL_PATH}`]),
    ...(keys === undefined ? [] : [`GET ${KEYS_PATH}`, `POST ${KEYS_PATH}`, `DELETE ${KEY_PATH}`]),
  ];
  const servedPaths = served.map((route) => route.replace(' ', ` ${v2.prefix}`).replaceAll(/:(\w+)/g, '{$1}'));
  v2.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?', 1)[0];
    const detail = `no route for ${request.method} ${path}; the management API serves ${servedPaths.join(', ')}`;
    return sendProblem(reply, new ProblemError(Problems.routeNotFound, detail));
  });
}

type AuthHookFor = (access: ManagementAccess) => Array<(request: FastifyRequest<{ Params: { project_id: string } }>) => Promise<void>>;

/** The 400 `invalid-parameter` for the first path parameter that breaks its rule (crds/route-names.ts). */
async function checkRouteParameters(request: FastifyRequest): Promise<void> {
  const params = request.params as Record<string, string>;
  for (const [name, rule] of Object.entries(ROUTE_PARAMETERS)) {
    const value = params[name];
    if (value !== undefined) checkName(name, rule, value);
  }
}

function registerKeyRoutes(
  v2: FastifyInstance,
  keys: ApiKeyStore,
  authHookFor: AuthHookFor,
  { authResponses, ...security }: { security: Array<Record<string, string[]>>; authResponses: Record<number, object> },
  maxKeyLifetimeMs: number,
): void {
  v2.get<{ Params: { project_id: string } }>(
    KEYS_PATH,
    {
      exposeHeadRoute: true,
      onRequest: authHookFor(LIST_KEYS),
      schema: {
        operationId: 'listApiKeys',
        summary: "List a project's API keys that have not been revoked (expired ones too, to revoke), by name",
        tags: ['keys'],
        ...security,
        params: projectParamsSchema,
        querystring: noQuerySchema,
        response: { 200: jsonResponse('The keys (never their tokens).', apiKeyListSchema), 400: problemResponse('A query parameter was given; this operation takes none.'), ...authResponses },
      },
    },
    async (request): Promise<{ items: ApiKey[] }> => ({ items: (await keys.list(request.params.project_id)).sort((a, b) => a.name.localeCompare(b.name)) }),
  );

  v2.post<{ Params: { project_id: string }; Body: { name: string; expiresAt: string } }>(
    KEYS_PATH,
    {
      onRequest: authHookFor(CREATE_KEYS),
      schema: {
        operationId: 'createApiKey',
        summary: 'Create an API key: a named credential of the project with an expiry date; its token is in this answer only',
        tags: ['keys'],
        ...security,
        params: projectParamsSchema,
        querystring: noQuerySchema,
        body: createApiKeySchema,
        response: {
          201: jsonResponse('The key and its token. The token is not stored: copy it now.', createdApiKeySchema),
          400: problemResponse('The name or the expiry is invalid, or the expiry is past the longest lifetime a key may have (invalid-parameter, naming it).'),
          ...authResponses,
          409: problemResponse('The project has a key of that name already (key-exists).'),
        },
      },
    },
    async (request, reply): Promise<CreatedApiKey> => {
      const { name, expiresAt } = request.body;
      const expiry = keyExpiry(expiresAt, maxKeyLifetimeMs);
      checkName('name', KEY_NAME, name, 'body field');
      const created = await keys.create(request.params.project_id, name, expiry);
      reply.code(201);
      return created;
    },
  );

  v2.delete<{ Params: { project_id: string; key_name: string } }>(
    KEY_PATH,
    {
      onRequest: authHookFor(DELETE_KEYS),
      schema: {
        operationId: 'revokeApiKey',
        summary: 'Revoke an API key: its token is refused from then on (in a cluster, within a minute)',
        tags: ['keys'],
        ...security,
        params: keyParamsSchema,
        querystring: noQuerySchema,
        response: {
          204: { description: 'Revoked.' },
          400: problemResponse('A query parameter was given; this operation takes none.'),
          ...authResponses,
          404: problemResponse('The project has no key of that name (key-not-found).'),
        },
      },
    },
    async (request, reply) => {
      await keys.revoke(request.params.project_id, request.params.key_name);
      return reply.code(204).send();
    },
  );
}

/** The requested expiry: an RFC 3339 date-time, at least MIN_KEY_LIFETIME_MS and at most `maxLifetimeMs` ahead. */
function keyExpiry(expiresAt: string, maxLifetimeMs: number): Date {
  const expiry = new Date(expiresAt);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(expiresAt) || Number.isNaN(expiry.getTime())) {
    throw bodyProblem('expiresAt', `expiresAt must be an RFC 3339 date-time such as 2027-01-31T00:00:00Z; got ${JSON.stringify(expiresAt)}`);
  }
  if (expiry.getTime() - Date.now() < MIN_KEY_LIFETIME_MS) {
    throw bodyProblem('expiresAt', `expiresAt must be at least ${MIN_KEY_LIFETIME_MS / 60_000} minutes from now; got ${expiresAt}`);
  }
  if (expiry.getTime() - Date.now() > maxLifetimeMs) {
    const latest = new Date(Date.now() + maxLifetimeMs).toISOString();
    throw bodyProblem('expiresAt', `expiresAt must be at most ${describeLifetime(maxLifetimeMs)} from now (the longest lifetime of a key here), so no later than ${latest}; got ${expiresAt}`);
  }
  return expiry;
}

/** `365 days`, `36 hours`: the limit as its operator set it, in the largest whole unit. */
function describeLifetime(ms: number): string {
  const hours = ms / 3_600_000;
  if (Number.isInteger(hours / 24)) return `${hours / 24} days`;
  if (Number.isInteger(hours)) return `${hours} hours`;
  return `${Math.floor(ms / 60_000)} minutes`;
}

function bodyProblem(parameter: string, detail: string): ProblemError {
  return new ProblemError(Problems.invalidParameter, detail, { extensions: { parameter } });
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

/**
 * A time filter as every run source compares it: UTC with milliseconds, the form of a record's createdAt. The
 * schema has checked its shape; its calendar values (month 13, hour 25) are checked here.
 */
function instantOf(name: string, value: string | undefined): string | null {
  if (value === undefined) return null;
  const time = Date.parse(value);
  if (Number.isNaN(time) || !isCalendarValid(value)) {
    throw new ProblemError(Problems.invalidParameter, `query parameter ${name} must be an RFC 3339 date-time; got ${JSON.stringify(value)}`, {
      extensions: { parameter: name },
    });
  }
  return new Date(time).toISOString();
}

/** Date.parse rolls 2026-02-30 over to March: the date must read back as written. */
function isCalendarValid(value: string): boolean {
  const [year, month, day] = value.slice(0, 10).split('-').map(Number) as [number, number, number];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
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
