// The values a run record's enumerated fields take (crds/run-record-schema.ts declares the record with them):
// plain arrays, apart from the schema, so that the sidecar, which checks records it reads back against them,
// does not load the schema library (TypeBox: ~200 modules, ~10 MB of a process's resident memory).
export const RUN_STATUSES = ['pending', 'running', 'success', 'failure', 'cancelled'] as const;
export const RUN_MODES = ['sync', 'async', 'stream'] as const;
export const FAILURE_REASONS = ['timeout', 'shutdown', 'replica_lost', 'runtime_crashed', 'client_closed', 'client_stalled', 'cancel_requested', 'upstream_error'] as const;
export const WEBHOOK_STATES = ['pending', 'delivered', 'failed'] as const;
