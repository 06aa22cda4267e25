// JSON schemas of the management API: request validation (with management/validation.ts), response
// serialisation, and the source of its OpenAPI 3.0 document. Nullable values use `nullable: true`, the OpenAPI
// 3.0 form, which Ajv and fast-json-stringify understand as well.
import { PROBLEM_CONTENT_TYPE } from '../crds/problem.ts';
import {
  RUN_STATUSES,
  type FailureReason,
  type RunError,
  type RunMode,
  type RunRecord,
  type WebhookRecord,
  type WebhookState,
} from '../sidecar/runs/record.ts';

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

/** Name of the security scheme the list-runs operations require in cluster mode (interface section 5.5). */
export const BEARER_SECURITY_SCHEME_NAME = 'bearerAuth';
/** The OpenAPI security scheme behind BEARER_SECURITY_SCHEME_NAME, for the document's components. */
export const bearerSecurityScheme = {
  type: 'http',
  scheme: 'bearer',
  description: 'A Kubernetes service-account token (`kubectl create token`) allowed to list runs.runlet.dev.',
} as const;

// The enums of the record, listed from an object typed by the union so that the compiler rejects a missing or
// an unknown member when the union changes.
const RUN_MODES = Object.keys({ sync: true, async: true, stream: true } satisfies Record<RunMode, true>);
const FAILURE_REASONS = Object.keys({
  timeout: true,
  shutdown: true,
  replica_lost: true,
  runtime_crashed: true,
  client_closed: true,
  upstream_error: true,
} satisfies Record<FailureReason, true>);
const WEBHOOK_STATES = Object.keys({ pending: true, delivered: true, failed: true } satisfies Record<WebhookState, true>);

/** The management interface's OpenAPI document (interface section 9: version 1.0.0, OpenAPI 3.0.0). */
export const managementDocument = {
  openapi: '3.0.0',
  info: {
    title: 'Runlet management interface',
    version: '1.0.0',
    description: 'Lists the runs of an app, newest first, with pagination and filters.',
  },
  components: { securitySchemes: { [BEARER_SECURITY_SCHEME_NAME]: bearerSecurityScheme } },
} as const;

const timestamp = (description: string) => ({ type: 'string', format: 'date-time', description }) as const;
const nullableTimestamp = (description: string) => ({ ...timestamp(description), nullable: true }) as const;
const nullableDuration = (description: string) =>
  ({ type: 'number', minimum: 0, nullable: true, description: `${description} In milliseconds.` }) as const;

const runErrorProperties = {
  type: { type: 'string', description: 'Exception class, or the platform failure kind.' },
  message: { type: 'string' },
} as const satisfies Record<keyof RunError, object>;

const webhookProperties = {
  endpoint: { type: 'string', format: 'uri', description: 'The destination, without its query string.' },
  state: { type: 'string', enum: WEBHOOK_STATES },
  attempts: { type: 'integer', minimum: 0 },
  lastStatusCode: { type: 'integer', nullable: true, description: 'Status of the last attempt; null without answer.' },
  lastError: { type: 'string', nullable: true, description: 'Why the last attempt failed.' },
} as const satisfies Record<keyof WebhookRecord, object>;

// `satisfies Record<keyof RunRecord, object>`: the compiler holds this list to RunRecord, field for field.
const runRecordProperties = {
  id: {
    type: 'string',
    format: 'uuid',
    description: 'UUID v7: sorts by creation time. Also the X-Request-Id of every response of the run.',
  },
  projectId: { type: 'string' },
  appName: { type: 'string' },
  functionName: { type: 'string', description: 'The function called (Python runtime) or the path forwarded.' },
  method: { type: 'string', description: 'HTTP method of the run call.' },
  mode: { type: 'string', enum: RUN_MODES },
  async: { type: 'boolean', description: 'Whether the call asked `async=true` (answered 202).' },
  status: { type: 'string', enum: RUN_STATUSES },
  statusCode: {
    type: 'integer',
    nullable: true,
    description: "HTTP status the run ended with: the function's, or the platform's for platform failures.",
  },
  error: {
    type: 'object',
    nullable: true,
    additionalProperties: false,
    required: Object.keys(runErrorProperties),
    properties: runErrorProperties,
  },
  reason: {
    type: 'string',
    nullable: true,
    // With `nullable`, an enum must list null itself (OpenAPI 3.0.3, Ajv).
    enum: [...FAILURE_REASONS, null],
    description: 'Why the platform ended the run as failure when the function itself did not fail.',
  },
  createdAt: timestamp('When the call was accepted.'),
  startedAt: nullableTimestamp('When the function started; null while pending.'),
  completedAt: nullableTimestamp('When the run ended; null while pending or running.'),
  queueTimeMs: nullableDuration('Time waiting for a free slot of the replica.'),
  runtimeMs: nullableDuration('Time the function ran.'),
  responseTimeMs: nullableDuration('Time from acceptance to the end of the response.'),
  replica: { type: 'string', description: 'Pod name, or the host name in local mode.' },
  webhook: {
    type: 'object',
    nullable: true,
    additionalProperties: false,
    required: Object.keys(webhookProperties),
    properties: webhookProperties,
    description: 'Delivery of the outcome to `webhookEndpoint`; null when none was asked.',
  },
} as const satisfies Record<keyof RunRecord, object>;

export const runRecordSchema = {
  type: 'object',
  additionalProperties: false,
  required: Object.keys(runRecordProperties),
  properties: runRecordProperties,
} as const;

export const runPageSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['items', 'nextToken'],
  properties: {
    items: { type: 'array', items: runRecordSchema, description: 'Runs of the app, newest first.' },
    nextToken: {
      type: 'string',
      nullable: true,
      description: 'Pass as `nextToken`, with the same filters, for the next page; null on the last page.',
    },
  },
} as const;

export const runItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['item'],
  properties: { item: runRecordSchema },
} as const;

/** RFC 9457 problem details, as ProblemError.toBody() renders them. */
export const problemSchema = {
  type: 'object',
  required: ['type', 'title', 'status', 'detail'],
  properties: {
    type: { type: 'string', format: 'uri' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    parameter: { type: 'string', description: 'The request parameter at fault, for parameter problems.' },
  },
  // Problem details may carry further extension members.
  additionalProperties: true,
} as const;

const projectIdParam = { type: 'string', description: 'The project (a namespace in a cluster).' } as const;
const appIdParam = { type: 'string', description: 'The app name, or `{project_id}-{app_name}`.' } as const;

export const appParamsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['project_id', 'app_id'],
  properties: { project_id: projectIdParam, app_id: appIdParam },
} as const;

export const runParamsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['project_id', 'app_id', 'run_id'],
  properties: {
    project_id: projectIdParam,
    app_id: appIdParam,
    run_id: { type: 'string', description: 'The run id (UUID v7), as in `X-Request-Id`.' },
  },
} as const;

/** Query values accepted for `asyncOnly`. */
export const ASYNC_ONLY_VALUES = ['true', 'false', '1', '0'] as const;
export type AsyncOnlyValue = (typeof ASYNC_ONLY_VALUES)[number];

export const listRunsQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    pageSize: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_PAGE_SIZE,
      default: DEFAULT_PAGE_SIZE,
      description: 'Runs per page.',
    },
    nextToken: {
      type: 'string',
      description: 'The `nextToken` of the previous page. Valid only with the filters it was issued for.',
    },
    asyncOnly: {
      type: 'string',
      enum: ASYNC_ONLY_VALUES,
      default: 'false',
      description: 'Only runs called with `async=true`.',
    },
    status: { type: 'string', enum: RUN_STATUSES, description: 'Only runs in this status.' },
  },
} as const;

/** Routes without query parameters still declare it, so that an unknown one is refused, not ignored. */
export const noQuerySchema = { type: 'object', additionalProperties: false, properties: {} } as const;

/** The response of a status, as fastify and @fastify/swagger read it: a description and a body per media type. */
export function jsonResponse(description: string, schema: object) {
  return { description, content: { 'application/json': { schema } } };
}

export function problemResponse(description: string) {
  return { description, content: { [PROBLEM_CONTENT_TYPE]: { schema: problemSchema } } };
}
