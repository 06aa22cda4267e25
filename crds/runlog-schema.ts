// The RunLog resource: one per replica (named after its pod, labelled with and owned by its App). The
// replica's sidecar writes its runs in flight and its last finished runs into the status.
import { Type, type Static } from '@sinclair/typebox';
import { RUNLET_API_VERSION, RUNLOG_KIND } from './api-group.ts';
import { objectMetaSchema } from './object-meta-schema.ts';
import { RunRecordSchema } from './run-record-schema.ts';
import { DnsLabel, DnsSubdomain, Struct } from './schema-kit.ts';

export const RunLogSpecSchema = Struct({
  appName: DnsLabel({ description: 'The App (in the same namespace) whose runs these are.' }),
});

/**
 * Counted by the sidecar since its replica started. Finished runs fall out of `runs` after
 * `spec.runs.keepFinished`, so these counters, not the records, are what App status rolls up.
 */
export const RunLogCountsSchema = Struct({
  total: Type.Integer({ minimum: 0 }),
  success: Type.Integer({ minimum: 0 }),
  failure: Type.Integer({ minimum: 0 }),
  inFlight: Type.Integer({ minimum: 0 }),
});

export const RunLogStatusSchema = Struct({
  runs: Type.Array(RunRecordSchema, { description: 'Runs in flight and the last finished runs of this replica.' }),
  counts: Type.Optional(RunLogCountsSchema),
});

export const RunLogSchema = Struct({
  apiVersion: Type.Literal(RUNLET_API_VERSION),
  kind: Type.Literal(RUNLOG_KIND),
  // Named after the pod, so a DNS subdomain rather than an app name's label.
  metadata: objectMetaSchema(DnsSubdomain()),
  spec: RunLogSpecSchema,
  status: Type.Optional(RunLogStatusSchema),
});

export type RunLog = Static<typeof RunLogSchema>;
export type RunLogSpec = Static<typeof RunLogSpecSchema>;
export type RunLogStatus = Static<typeof RunLogStatusSchema>;
export type RunLogCounts = Static<typeof RunLogCountsSchema>;
