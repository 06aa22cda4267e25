// Cancelling an async call the holder accepted while its App was at zero, before any replica took it: its
// durable record (a Secret, hold-records.ts) is deleted, so no holder hands it over and it never starts. Any
// operator replica can, whichever holder accepted it: the record is in the API server.
//
// What it cannot do is what a replica does for a run it cancels: record the run and send its webhook. No run
// record exists yet (only replicas write RunLogs), and the call's webhook secret lives in the record alone, so
// the cancel answers with the record it would have had, and says so; the caller's run is never listed.
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { KubeApi } from '../kube/client.ts';
import { isConflict, isNotFound } from '../kube/errors.ts';
import { callOfRecord, HELD_CALL_LABEL, recordName, type HeldRecord } from './hold-records.ts';

/**
 * What the cancel answers for a held call it dropped: what its run would have been, cancelled before it
 * started; `droppedBy`, the operator replica that dropped it, in the `replica` field (no pod ran it).
 */
export function heldCallCancelled(record: HeldRecord, projectId: string, appName: string, droppedBy: string, now: Date): RunRecord {
  const call = callOfRecord(record);
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
 * Deletes the held record of `runId` for this App, if there is one; resolves to it (null: none, or another
 * App's). The record goes with its resourceVersion as a precondition: a record a holder changed meanwhile (its
 * claim renewed) is read again, and one a replica just took is gone already.
 */
export async function cancelHeldCall(api: KubeApi, projectId: string, appName: string, runId: string): Promise<HeldRecord | null> {
  const secrets = `/api/v1/namespaces/${encodeURIComponent(projectId)}/secrets`;
  for (;;) {
    const found = await api.list<HeldRecord>(secrets, { labelSelector: `${HELD_CALL_LABEL}=${appName}`, fieldSelector: `metadata.name=${recordName(runId)}` });
    const record = found.items[0];
    if (record === undefined) return null;
    try {
      await api.delete(`${secrets}/${encodeURIComponent(record.metadata!.name!)}`, { uid: record.metadata?.uid, resourceVersion: record.metadata?.resourceVersion });
      return record;
    } catch (error) {
      if (isNotFound(error)) return null;
      // The precondition failed (a holder renewed its claim): read it again.
      if (!isConflict(error)) throw error;
    }
  }
}
