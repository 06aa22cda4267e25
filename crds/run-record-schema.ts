// The run record as stored in RunLog status: field for field the `RunRecord` of sidecar/runs/record.ts
// (crds/run-record-schema.test.ts fails to type-check when the two drift apart).
//
// Checks are deliberately loose (types and enums, no ranges): a sidecar's status patch that the apiserver
// rejected would lose every run in it, which is worse than an odd value in one field.
import { Type, type Static } from '@sinclair/typebox';
import { DateTime, Nullable, StringEnum, Struct } from './schema-kit.ts';

export const RUN_STATUS_VALUES = ['pending', 'running', 'success', 'failure', 'cancelled'] as const;
export const RUN_MODE_VALUES = ['sync', 'async', 'stream'] as const;
export const FAILURE_REASON_VALUES = [
  'timeout',
  'shutdown',
  'replica_lost',
  'runtime_crashed',
  'client_closed',
  'upstream_error',
] as const;
export const WEBHOOK_STATE_VALUES = ['pending', 'delivered', 'failed'] as const;

export const RunErrorSchema = Struct({
  type: Type.String({ description: 'Exception class name, or the platform error type.' }),
  message: Type.String(),
});

export const WebhookRecordSchema = Struct({
  endpoint: Type.String({ description: 'The destination without its query string (it may carry credentials).' }),
  state: StringEnum(WEBHOOK_STATE_VALUES),
  attempts: Type.Integer({ minimum: 0 }),
  lastStatusCode: Nullable(Type.Integer()),
  lastError: Nullable(Type.String()),
});

export const RunRecordSchema = Struct(
  {
    id: Type.String({ description: 'UUID v7; also the X-Request-Id of every response of the run.' }),
    projectId: Type.String(),
    appName: Type.String(),
    functionName: Type.String(),
    method: Type.String(),
    mode: StringEnum(RUN_MODE_VALUES),
    async: Type.Boolean(),
    status: StringEnum(RUN_STATUS_VALUES),
    statusCode: Nullable(Type.Integer(), { description: 'HTTP status the run ended with.' }),
    error: Nullable(RunErrorSchema),
    reason: Nullable(StringEnum(FAILURE_REASON_VALUES), {
      description: 'Why the platform ended the run as failure when the function itself did not fail.',
    }),
    createdAt: DateTime(),
    startedAt: Nullable(DateTime()),
    completedAt: Nullable(DateTime()),
    queueTimeMs: Nullable(Type.Number()),
    runtimeMs: Nullable(Type.Number()),
    responseTimeMs: Nullable(Type.Number()),
    replica: Type.String({ description: 'The pod (or local host in runlet dev) that ran it.' }),
    webhook: Nullable(WebhookRecordSchema),
  },
  { description: 'One call of the run interface.' },
);

export type RunRecordResource = Static<typeof RunRecordSchema>;
