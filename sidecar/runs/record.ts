// The run record: one per call of the run interface, in every mode. The same shape is stored by `runlet dev`
// (SQLite), written into RunLog status in a cluster, and returned by the management API.

export type RunStatus = 'pending' | 'running' | 'success' | 'failure' | 'cancelled';
export type RunMode = 'sync' | 'async' | 'stream';

/** Why the platform ended a run as `failure` when the function itself did not fail. */
export type FailureReason =
  | 'timeout'
  | 'shutdown'
  | 'replica_lost'
  | 'runtime_crashed'
  | 'client_closed'
  | 'upstream_error';

export type WebhookState = 'pending' | 'delivered' | 'failed';

export interface RunError {
  type: string;
  message: string;
}

export interface WebhookRecord {
  /** The destination without its query string (it may carry credentials). */
  endpoint: string;
  state: WebhookState;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
}

export interface RunRecord {
  /** UUID v7: sorts by creation time. Also the `X-Request-Id` of every response of the run. */
  id: string;
  projectId: string;
  appName: string;
  functionName: string;
  method: string;
  mode: RunMode;
  async: boolean;
  status: RunStatus;
  /** HTTP status the run ended with (the function's, or the platform's for platform failures). */
  statusCode: number | null;
  error: RunError | null;
  reason: FailureReason | null;
  /** ISO 8601 timestamps. */
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  queueTimeMs: number | null;
  runtimeMs: number | null;
  responseTimeMs: number | null;
  /** The replica (pod name, or the local host name in `runlet dev`) that ran it. */
  replica: string;
  webhook: WebhookRecord | null;
}

export const RUN_STATUSES: readonly RunStatus[] = ['pending', 'running', 'success', 'failure', 'cancelled'];
