// The run record: one per call of the run interface, in every mode. Declared once, here: the TypeScript types
// are this schema's static types; RunLog status stores it (the CRD's structural schema, crds/crd.ts), `runlet dev`
// stores it in SQLite, and the management API returns it (its OpenAPI schema, management/schemas.ts, is this
// schema translated by toOpenApiSchema in crds/structural-schema.ts).
//
// Checks are deliberately loose (types and enums, no ranges): a sidecar's status patch that the apiserver
// rejected would lose every run in it, which is worse than an odd value in one field.
import { Type, type Static } from '@sinclair/typebox';
import { DateTime, Nullable, StringEnum, Struct } from './schema-kit.ts';
import { RUN_STATUSES, RUN_MODES, FAILURE_REASONS, WEBHOOK_STATES } from './run-record-values.ts';


const duration = (description: string) => Nullable(Type.Number(), { description: `${description} In milliseconds.` });

export const RunErrorSchema = Struct({
  type: Type.String({ description: 'Exception class name, or the platform failure kind.' }),
  message: Type.String(),
});

export const WebhookRecordSchema = Struct({
  endpoint: Type.String({ description: 'The destination without its query string (it may carry credentials).' }),
  state: StringEnum(WEBHOOK_STATES),
  attempts: Type.Integer({ minimum: 0 }),
  lastStatusCode: Nullable(Type.Integer(), { description: 'Status of the last attempt; null without answer.' }),
  lastError: Nullable(Type.String(), { description: 'Why the last attempt failed.' }),
});

export const RunRecordSchema = Struct(
  {
    id: Type.String({ description: 'UUID v7: sorts by creation time. Also the X-Request-Id of every response of the run.' }),
    projectId: Type.String(),
    appName: Type.String(),
    functionName: Type.String({ description: 'The function called (Python runtime) or the path forwarded.' }),
    method: Type.String({ description: 'HTTP method of the run call.' }),
    mode: StringEnum(RUN_MODES),
    async: Type.Boolean({ description: 'Whether the call asked `async=true` (answered 202).' }),
    status: StringEnum(RUN_STATUSES),
    statusCode: Nullable(Type.Integer(), {
      description: "HTTP status the run ended with: the function's, or the platform's for platform failures.",
    }),
    error: Nullable(RunErrorSchema),
    reason: Nullable(StringEnum(FAILURE_REASONS), {
      description: 'Why the platform ended the run (as failure, or cancelled) when the function itself did not fail.',
    }),
    createdAt: DateTime({ description: 'When the call was accepted.' }),
    startedAt: Nullable(DateTime(), { description: 'When the function started; null while pending.' }),
    completedAt: Nullable(DateTime(), { description: 'When the run ended; null while pending or running.' }),
    queueTimeMs: duration('Time waiting for a free slot of the replica.'),
    runtimeMs: duration('Time the function ran.'),
    responseTimeMs: duration('Time from acceptance to the end of the response.'),
    coldStartMs: Type.Optional(
      duration('Time the call was held while its app had no ready replica (scale to zero), before this replica took it; absent when it was not held.'),
    ),
    replica: Type.String({ description: 'The pod (or the local host name in runlet dev) that ran it.' }),
    webhook: Nullable(WebhookRecordSchema, {
      description: 'Delivery of the outcome to `webhookEndpoint`; null when none was asked.',
    }),
    resultKept: Type.Optional(
      Type.Boolean({
        description:
          "Whether the run's result (or error) was kept, for Apps that keep results (keep_results): false when it was larger than result_keep_bytes. Absent when the App keeps none.",
      }),
    ),
    resultExpiresAt: Type.Optional(DateTime({ description: 'Until when the kept result is returned by the get of the run.' })),
  },
  { description: 'One call of the run interface.' },
);

export type RunRecord = Static<typeof RunRecordSchema>;
/**
 * A run as the get of one run returns it: with its kept result (any JSON: the function's result, a stream's items
 * as a list, a failed run's error) until resultExpiresAt. Never in a RunLog nor a list; its OpenAPI schema is
 * management/schemas.ts's runWithResultSchema (any JSON has no structural schema).
 */
export type RunRecordWithResult = RunRecord & { result?: unknown };
export type RunStatus = RunRecord['status'];
export type RunMode = RunRecord['mode'];
/** Why the platform ended a run as `failure` when the function itself did not fail. */
export type FailureReason = NonNullable<RunRecord['reason']>;
export type RunError = Static<typeof RunErrorSchema>;
export type WebhookRecord = Static<typeof WebhookRecordSchema>;
export type WebhookState = WebhookRecord['state'];
