// Cancelling an async call the holder accepted while its App was at zero, before any replica took it: its
// durable record (a Secret, hold-records.ts) is deleted, so no holder hands it over and it never starts. Any
// operator replica can, whichever holder accepted it: the record is in the API server.
//
// What it cannot do is what a replica does for a run it cancels: record the run and send its webhook. No run
// record exists yet (only replicas write RunLogs), and the call's webhook secret lives in the record alone, so
// the cancel answers with the record it would have had, and says so; the caller's run is never listed.
import type { RunRecord } from '../crds/run-record-schema.ts';
import { AlteredRecordError, HELD_CALL_LABEL, HELD_CALL_NAMESPACE_LABEL, type HeldCall, type HeldRecords } from './hold-records.ts';

/**
 * What the cancel answers for a held call it dropped: what its run would have been, cancelled before it
 * started; `droppedBy`, the operator replica that dropped it, in the `replica` field (no pod ran it).
 */
export function heldCallCancelled(call: HeldCall, projectId: string, appName: string, droppedBy: string, now: Date): RunRecord {
  const path = call.url.split('?', 1)[0]!;
  const query = new URLSearchParams(call.url.slice(path.length + 1));
  const endpoint = query.get('webhookEndpoint');
  const message = 'The call was cancelled at request while its app was starting from zero, before any replica took it: it is not recorded as a run, and its webhook is not sent';
  return {
    id: call.runId,
    projectId,
    appName,
    functionName: path.slice(path.lastIndexOf('/') + 1),
    method: call.method,
    mode: 'async',
    async: true,
    status: 'cancelled',
    statusCode: 409,
    error: { type: 'Cancelled', message },
    reason: 'cancel_requested',
    createdAt: new Date(call.acceptedAt).toISOString(),
    startedAt: null,
    completedAt: now.toISOString(),
    queueTimeMs: null,
    runtimeMs: null,
    responseTimeMs: null,
    replica: droppedBy,
    webhook: endpoint === null ? null : { endpoint: endpoint.split('?', 1)[0]!, state: 'failed', attempts: 0, lastStatusCode: null, lastError: 'not sent: the call was cancelled before a replica took it' },
  };
}

/**
 * Deletes the held record of `runId` for this App, if there is one; resolves to its call (null: none, another
 * App's, or a record altered at rest, which the holder drops unread anyway). The record goes with its
 * resourceVersion as a precondition: a record a holder changed meanwhile (its claim renewed) is read again, and
 * one a replica just took is gone already.
 */
export async function cancelHeldCall(records: HeldRecords, projectId: string, appName: string, runId: string): Promise<HeldCall | null> {
  for (;;) {
    const record = await records.byRunId(runId);
    if (record === null) return null;
    const labels = record.metadata?.labels ?? {};
    if (labels[HELD_CALL_NAMESPACE_LABEL] !== projectId || labels[HELD_CALL_LABEL] !== appName) return null;
    let call: HeldCall;
    try {
      call = records.callOf(record);
    } catch (error) {
      if (error instanceof AlteredRecordError) return null;
      throw error;
    }
    if (await records.removeAsRead(record)) return call;
  }
}
