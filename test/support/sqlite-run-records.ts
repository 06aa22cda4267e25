// Run records for the tests of the run store and of the management API: complete, in any state, with fresh
// UUID v7 ids (creation order).
import { v7 as uuidv7 } from 'uuid';
import type { RunRecord } from '../../crds/run-record-schema.ts';


export function runRecord(overrides: Partial<RunRecord> = {}): RunRecord {
  return {
    id: uuidv7(),
    projectId: 'demo',
    appName: 'hello',
    functionName: 'run',
    method: 'POST',
    mode: 'sync',
    async: false,
    status: 'success',
    statusCode: 200,
    error: null,
    reason: null,
    createdAt: '2025-01-02T03:04:05.678Z',
    startedAt: '2025-01-02T03:04:05.680Z',
    completedAt: '2025-01-02T03:04:05.712Z',
    queueTimeMs: 2,
    runtimeMs: 32,
    responseTimeMs: 34.5,
    replica: 'test-host',
    webhook: null,
    ...overrides,
  };
}

/** A failed async run whose webhook delivery failed too: every nullable member set. */
export function failedAsyncRunRecord(overrides: Partial<RunRecord> = {}): RunRecord {
  return runRecord({
    mode: 'async',
    async: true,
    status: 'failure',
    statusCode: 504,
    error: { type: 'TimeoutError', message: 'run exceeded response_grace_period (900 s)' },
    reason: 'timeout',
    webhook: {
      endpoint: 'https://hooks.example.com/runs',
      state: 'failed',
      attempts: 3,
      lastStatusCode: 404,
      lastError: 'HTTP 404 from the endpoint',
    },
    ...overrides,
  });
}

/** A pending async run as the sidecar writes it before answering 202: every nullable member null. */
export function pendingAsyncRunRecord(overrides: Partial<RunRecord> = {}): RunRecord {
  return runRecord({
    mode: 'async',
    async: true,
    status: 'pending',
    statusCode: null,
    startedAt: null,
    completedAt: null,
    queueTimeMs: null,
    runtimeMs: null,
    responseTimeMs: null,
    ...overrides,
  });
}
