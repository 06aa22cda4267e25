// The run interface's contract as fastify route schemas: @fastify/swagger turns them into the OpenAPI 3.0.0
// document served at /v4/openapi.json and committed as docs/openapi-run.json. Requests are validated by the
// pipeline itself (its problems name the domain rule broken; the body is streamed, not parsed by fastify), and
// the contract tests check that real answers match these schemas.
import { PROBLEM_TYPE_BASE } from '../crds/problem.ts';

export const BEARER_AUTH = 'bearerAuth';

const problem = {
  $id: 'Problem',
  type: 'object',
  description: 'RFC 9457 problem details (application/problem+json).',
  required: ['type', 'title', 'status', 'detail'],
  additionalProperties: true,
  properties: {
    type: { type: 'string', description: `${PROBLEM_TYPE_BASE}<code>: the problem type, documented at that anchor.` },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string', description: 'What exactly was wrong, and how to fix it.' },
    missing: { type: 'array', items: { type: 'string' }, description: '422: arguments the function requires and the body lacks.' },
    unexpected: { type: 'array', items: { type: 'string' }, description: '422: members of the body the function does not take.' },
    parameter: { type: 'string', description: '400: the parameter at fault.' },
  },
} as const;

const runError = {
  $id: 'RunError',
  type: 'object',
  required: ['type', 'message'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', description: 'The exception type, e.g. ValueError.' },
    message: { type: 'string' },
  },
} as const;

/**
 * Any JSON value, or null. OpenAPI 3.0 has no null type, and its `nullable` only widens a `type` given beside it
 * (a lone `nullable: true` is ill-defined, and Ajv refuses it), so null rides on the string branch.
 */
const anyJsonValue = (description: string) =>
  ({
    description,
    anyOf: [{ type: 'string', nullable: true }, { type: 'number' }, { type: 'boolean' }, { type: 'array', items: {} }, { type: 'object' }],
  }) as const;

const runId = { type: 'string', format: 'uuid', description: 'The run id (UUID v7); also the X-Request-Id header.' } as const;
const runTimeMs = { type: 'number', description: 'Milliseconds the function ran.' } as const;

const syncResult = {
  $id: 'SyncResult',
  type: 'object',
  required: ['run_id', 'result', 'run_time_ms'],
  additionalProperties: false,
  properties: {
    run_id: runId,
    result: anyJsonValue("The function's return value (a generator's items as a list)."),
    run_time_ms: runTimeMs,
  },
} as const;

const functionFailure = {
  $id: 'FunctionFailure',
  type: 'object',
  required: ['run_id', 'error', 'run_time_ms'],
  additionalProperties: false,
  properties: { run_id: runId, error: { $ref: 'RunError#' }, run_time_ms: runTimeMs },
} as const;

const asyncAccepted = {
  $id: 'AsyncAccepted',
  type: 'object',
  required: ['run_id'],
  additionalProperties: false,
  properties: { run_id: runId },
} as const;

export const webhookDeliverySchema = {
  $id: 'WebhookDelivery',
  type: 'object',
  required: ['run_id', 'status', 'status_code', 'run_time_ms', 'timestamp'],
  additionalProperties: false,
  description: 'Exactly one of result (status success) or error (status failure).',
  properties: {
    run_id: runId,
    status: { type: 'string', enum: ['success', 'failure'] },
    status_code: { type: 'integer', description: 'The HTTP status the run ended with.' },
    result: anyJsonValue("The function's result; a stream's items as a list; a custom app's response (JSON, else text)."),
    error: { $ref: 'RunError#' },
    run_time_ms: { type: 'number', nullable: true },
    timestamp: { type: 'string', format: 'date-time', description: 'When the run completed.' },
  },
} as const;

/** Response headers are given as JSON schemas: @fastify/swagger wraps them into OpenAPI header objects. */
const xRequestId = { 'X-Request-Id': { type: 'string', description: 'The run id.' } };

const json = (description: string, schema: { $id: string }) => ({ description, content: { 'application/json': { schema: ref(schema) } }, headers: xRequestId });
const problemAnswer = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ref(problem) } },
  headers: xRequestId,
});

const runParams = {
  type: 'object',
  required: ['project_id', 'app_name', 'function'],
  properties: {
    project_id: { type: 'string', description: 'The project (a namespace in a cluster).' },
    app_name: { type: 'string' },
    function: { type: 'string', description: 'A public function of the Python module; for a custom runtime, the path forwarded to the app.' },
  },
} as const;

const appRootParams = {
  type: 'object',
  required: ['project_id', 'app_name'],
  properties: { project_id: runParams.properties.project_id, app_name: runParams.properties.app_name },
} as const;

const runQuery = {
  type: 'object',
  additionalProperties: true,
  properties: {
    async: {
      type: 'string',
      enum: ['true', 'false', '1', '0'],
      description: 'true or 1: answer 202 with the run id at once and run in the background.',
    },
    webhookEndpoint: {
      type: 'string',
      maxLength: 2048,
      format: 'uri',
      description: 'URL-encoded absolute http(s) URL: the outcome of the run is POSTed there after the run.',
    },
  },
} as const;

const runHeaders = {
  type: 'object',
  properties: {
    'x-webhook-secret': {
      type: 'string',
      minLength: 1,
      description: 'Signs webhook deliveries: HMAC-SHA256 of "<run_id>.<timestamp>.<body>" keyed with this secret. Never stored.',
    },
  },
} as const;

const WEBHOOK_DESCRIPTION =
  'Sent after the run when webhookEndpoint is given, without delaying the answer. Headers: Content-Type: application/json; ' +
  'X-Request-Id: the run id; with X-Webhook-Secret on the run call, X-Service-Webhook-Timestamp (unix seconds at sending) and ' +
  'X-Service-Webhook-Signature: v1,<lowercase hex HMAC-SHA256(secret, "<run_id>.<timestamp>.<raw body>")>, fresh for every attempt. ' +
  'At most 3 attempts, at most 5 s apart; retried on connection failure, timeout, 404, 1xx and 3xx; not on other 4xx nor 5xx; redirects are not followed.';

/** Schemas the operations share, registered with `addSchema` so the document references them as components. */
export const SHARED_SCHEMAS = [problem, runError, syncResult, functionFailure, asyncAccepted, webhookDeliverySchema];

const ref = (schema: { $id: string }) => ({ $ref: `${schema.$id}#` });

/** Header parameters of the webhook callback: @fastify/swagger keeps only bodies and responses of callbacks. */
export const WEBHOOK_CALLBACK_PARAMETERS = [
  { name: 'X-Request-Id', in: 'header', required: true, schema: { type: 'string' }, description: 'The run id.' },
  { name: 'X-Service-Webhook-Timestamp', in: 'header', required: false, schema: { type: 'string' }, description: 'Unix seconds at sending; present when the run call carried X-Webhook-Secret.' },
  { name: 'X-Service-Webhook-Signature', in: 'header', required: false, schema: { type: 'string', pattern: '^v1,[0-9a-f]{64}$' }, description: 'v1,<hex signature>; present when the run call carried X-Webhook-Secret.' },
];

const webhookCallback = {
  webhook: {
    '{$request.query.webhookEndpoint}': {
      post: {
        description: WEBHOOK_DESCRIPTION,
        requestBody: { required: true, content: { 'application/json': { schema: ref(webhookDeliverySchema) } } },
        responses: {
          '2XX': { description: 'Delivered.' },
          '404': { description: 'Retried.' },
          '4XX': { description: 'Other 4xx: not retried.' },
          '5XX': { description: 'Not retried (avoids duplicate side effects).' },
        },
      },
    },
  },
};

const platformErrors = {
  400: problemAnswer('Invalid JSON, a body that is not an object, or a bad async, webhookEndpoint or X-Webhook-Secret.'),
  401: problemAnswer('Missing or invalid bearer token (with WWW-Authenticate).'),
  403: problemAnswer('The token is for another project.'),
  404: problemAnswer('Unknown project, app or function, or a private function (name starting with "_").'),
  408: problemAnswer('The request did not arrive in time: no byte of its body for the request body timeout (30 s by default), or not whole by the request deadline (60 s by default). The connection is closed.'),
  413: problemAnswer('The body is over the limit (16 MiB by default).'),
  502: problemAnswer("The app's runtime exited or failed mid-call."),
  503: problemAnswer('The app is not ready, at capacity, or the replica is draining; the run store is unavailable; the replica holds too many requests still arriving. With Retry-After.'),
  504: problemAnswer('The run exceeded response_grace_period.'),
};

const security = [{ [BEARER_AUTH]: [] }];

export const runFunctionSchema = {
  operationId: 'runFunction',
  summary: 'Run a function: sync, async (?async=true) or streaming (Accept: text/event-stream)',
  tags: ['run'],
  security,
  params: runParams,
  querystring: runQuery,
  headers: runHeaders,
  body: { type: 'object', additionalProperties: true, description: 'The named arguments of the function.' },
  response: {
    200: {
      description: 'Sync: the envelope. Streaming: one SSE event per yielded item ("data: <item>" and a blank line), ending with "event: error" if the generator raises.',
      headers: xRequestId,
      content: {
        'application/json': { schema: ref(syncResult) },
        'text/event-stream': { schema: { type: 'string' } },
      },
    },
    202: json('Async: accepted after the pending run record is stored.', asyncAccepted),
    ...platformErrors,
    405: problemAnswer('Python functions are called with POST (Allow: POST).'),
    422: problemAnswer('The arguments do not bind to the function signature; missing and unexpected name them.'),
    500: {
      description: 'The function raised, or its result cannot be encoded as JSON.',
      headers: xRequestId,
      content: { 'application/json': { schema: ref(functionFailure) }, 'application/problem+json': { schema: ref(problem) } },
    },
  },
  callbacks: webhookCallback,
};

/** Custom runtimes: any other method, answered by the app's own server (or 405 for a Python app). */
export function customAppSchema(method: string, scope: 'path' | 'root') {
  const lower = method.toLowerCase();
  return {
    operationId: scope === 'path' ? `customApp${method[0]}${lower.slice(1)}` : `customAppRoot${method[0]}${lower.slice(1)}`,
    summary: `${method} to a custom-runtime app${scope === 'root' ? "'s root path" : ''}`,
    description:
      'Forwarded to the app with its path and query (minus async and webhookEndpoint); the answer comes back as the app gives it, with X-Request-Id. ' +
      'Deeper paths (/v4/{project_id}/{app_name}/a/b/c) are forwarded the same way.',
    tags: ['custom runtime'],
    security,
    params: scope === 'path' ? runParams : appRootParams,
    querystring: runQuery,
    headers: runHeaders,
    response: {
      '2XX': { description: "The app's answer, as it gave it.", headers: xRequestId },
      202: json('Async (?async=true): accepted after the pending run record is stored.', asyncAccepted),
      ...platformErrors,
      405: problemAnswer('A Python app takes POST only.'),
      default: { description: "Any other status the app answered, passed through.", headers: xRequestId },
    },
    callbacks: webhookCallback,
  };
}

export const documentSchema = {
  operationId: 'getRunInterfaceDocument',
  summary: 'This OpenAPI document',
  tags: ['meta'],
  response: { 200: { description: 'The OpenAPI 3.0.0 description of the run interface.', content: { 'application/json': { schema: { type: 'object' } } } } },
};

export const runInterfaceDocument = {
  openapi: '3.0.0',
  info: {
    title: 'Runlet run interface',
    version: '1.0.0',
    description: 'Invoke apps synchronously, asynchronously or as a server-sent-event stream, with signed webhook forwarding.',
  },
  components: {
    securitySchemes: {
      [BEARER_AUTH]: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Authorization: Bearer <ACCESS_TOKEN>' },
    },
  },
} as const;
