// JSON schemas of the management API: request validation (with management/validation.ts), response
// serialisation, and the source of its OpenAPI 3.0 document. Nullable values use `nullable: true`, the OpenAPI
// 3.0 form, which Ajv and fast-json-stringify understand as well.
import { PROBLEM_CONTENT_TYPE } from '../crds/problem.ts';
import { RunRecordSchema } from '../crds/run-record-schema.ts';
import { RUN_STATUSES } from '../crds/run-record-values.ts';
import { toOpenApiSchema } from '../crds/structural-schema.ts';
import { APP_ID, KEY_NAME, PROJECT_ID, RUN_ID, nameSchema } from '../crds/route-names.ts';

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

/** A run record as the API returns it: the contract's schema (crds/run-record-schema.ts) in OpenAPI 3.0 form. */
export const runRecordSchema = toOpenApiSchema(RunRecordSchema);

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

/** One run as its get returns it: the record, with its kept result while it lasts (RunRecordWithResult). */
export const runWithResultSchema = {
  ...runRecordSchema,
  properties: {
    ...runRecordSchema.properties,
    result: {
      description:
        "The run's kept result, for Apps that keep results (keep_results), until resultExpiresAt: the function's JSON result, a stream's items as a list, or a failed run's error ({type, message}). Absent otherwise; never in a list.",
    },
  },
};

export const runItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['item'],
  properties: { item: runWithResultSchema },
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

// Path parameters follow crds/route-names.ts, checked before anything else of a request (routes.ts); the
// schemas say the same for the OpenAPI document.
const projectIdParam = nameSchema(PROJECT_ID, 'The project (a namespace in a cluster): a DNS-1123 label.');
const appIdParam = nameSchema(APP_ID, 'The app name, or `{project_id}-{app_name}`.');

export const appParamsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['project_id', 'app_id'],
  properties: { project_id: projectIdParam, app_id: appIdParam },
} as const;

export const projectParamsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['project_id'],
  properties: { project_id: projectIdParam },
} as const;

export const appListSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['items'],
  properties: {
    items: {
      type: 'array',
      description: 'The apps of the project, by name.',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'ready', 'error', 'replicas', 'scaling'],
        properties: {
          name: { type: 'string' },
          ready: { type: 'boolean', description: 'The app takes calls now (in a cluster: its Ready condition is True).' },
          error: {
            type: 'string',
            nullable: true,
            description: 'Why it cannot take calls, when known: its import error (runlet dev), its Ready condition message (cluster).',
          },
          replicas: {
            type: 'object',
            additionalProperties: false,
            required: ['ready', 'desired'],
            description: 'Replicas ready now, and how many are wanted (runlet dev: one).',
            properties: { ready: { type: 'integer' }, desired: { type: 'integer' } },
          },
          scaling: {
            type: 'object',
            additionalProperties: false,
            required: ['minReplicas', 'maxReplicas', 'replicaConcurrency'],
            description: "The app's [scaling] settings.",
            properties: { minReplicas: { type: 'integer' }, maxReplicas: { type: 'integer' }, replicaConcurrency: { type: 'integer' } },
          },
        },
      },
    },
  },
} as const;

export const runParamsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['project_id', 'app_id', 'run_id'],
  properties: {
    project_id: projectIdParam,
    app_id: appIdParam,
    run_id: nameSchema(RUN_ID, 'The run id (UUID v7), as in `X-Request-Id`.'),
  },
} as const;

/** Query values accepted for `asyncOnly`. */
export const ASYNC_ONLY_VALUES = ['true', 'false', '1', '0'] as const;
export type AsyncOnlyValue = (typeof ASYNC_ONLY_VALUES)[number];

/** An RFC 3339 date-time with a time zone; its calendar values are checked when it is parsed (routes.ts). */
const RFC3339_PATTERN = '^\\d{4}-\\d{2}-\\d{2}[Tt]\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?([Zz]|[+-]\\d{2}:\\d{2})$';

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
    functionName: {
      type: 'string',
      minLength: 1,
      maxLength: 256,
      description: 'Only runs of this function (the Python function, or the path forwarded to a custom app).',
    },
    createdAfter: {
      type: 'string',
      pattern: RFC3339_PATTERN,
      description: 'Only runs created at or after this instant (RFC 3339, e.g. `2026-11-26T10:00:00Z`).',
    },
    createdBefore: {
      type: 'string',
      pattern: RFC3339_PATTERN,
      description:
        'Only runs created before this instant (RFC 3339): with createdAfter, consecutive windows neither overlap nor leave a gap.',
    },
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

const apiKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'createdAt', 'expiresAt'],
  properties: {
    name: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
    expiresAt: { type: 'string', format: 'date-time', description: 'When its token stops working (in a cluster, as the API server granted it).' },
  },
} as const;

export const apiKeyListSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['items'],
  properties: { items: { type: 'array', items: apiKeySchema, description: 'The keys, by name.' } },
} as const;

export const createdApiKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['item', 'token'],
  properties: {
    item: apiKeySchema,
    token: { type: 'string', description: 'The bearer token, for the run interface and the management interface. Shown here only.' },
  },
} as const;

export const createApiKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'expiresAt'],
  properties: {
    name: { type: 'string', description: `Lowercase letters, digits and \`-\` (a DNS-1123 label), ${KEY_NAME.maxLength} characters at most.` },
    expiresAt: { type: 'string', description: 'RFC 3339 date-time, at least 10 minutes ahead.' },
  },
} as const;

export const keyParamsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['project_id', 'key_name'],
  properties: { project_id: projectIdParam, key_name: nameSchema(KEY_NAME, 'The API key name.') },
} as const;
