// The RunLog resource: one per replica (named after its pod, labelled with and owned by its App). The
// replica's sidecar writes its runs in flight and its last finished runs into the status.
import { Type, type Static } from '@sinclair/typebox';
import { RUNLET_API_VERSION, RUNLOG_KIND } from './api-group.ts';
import { objectMetaSchema } from './object-meta-schema.ts';
import { RunRecordSchema } from './run-record-schema.ts';
import { DateTime, DnsLabel, DnsSubdomain, Struct } from './schema-kit.ts';

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

/**
 * The load this replica carries, for the autoscaler. Written only when it changes (at most about once a
 * second, with the runs' writes): an unchanged load stays valid while the pod is ready.
 */
export const RunLogLoadSchema = Struct({
  inFlight: Type.Integer({ minimum: 0, description: 'Calls running now.' }),
  queued: Type.Integer({ minimum: 0, description: 'Calls waiting for a slot now, accepted async runs included.' }),
  averageConcurrency: Type.Number({ minimum: 0, description: 'Calls in flight plus queued, averaged over the last second.' }),
  peakConcurrency: Type.Integer({ minimum: 0, description: 'The most calls in flight plus queued at once in the last second.' }),
  requestsPerSecond: Type.Number({ minimum: 0, description: 'Calls that arrived in the last second, refused ones included.' }),
  concurrency: Type.Integer({ minimum: 1, description: 'How many calls the replica runs at once (replica_concurrency).' }),
  sampledAt: DateTime({ description: 'When the replica measured this load: the last time it changed.' }),
});

export const RunLogStatusSchema = Struct({
  runs: Type.Array(RunRecordSchema, { description: 'Runs in flight and the last finished runs of this replica.' }),
  counts: Type.Optional(RunLogCountsSchema),
  load: Type.Optional(RunLogLoadSchema),
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
export type RunLogLoad = Static<typeof RunLogLoadSchema>;
