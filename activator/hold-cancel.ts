// Cancelling a call held while its App was at zero, before any replica took it. An async call's durable record
// (a Secret, hold-records.ts) is deleted, so no holder hands it over and it never starts; any operator replica
// can, whichever holder accepted it: the record is in the API server. A sync or stream call is stopped by the
// holder that holds it (hold-control.ts), which answers its caller `409 run-cancelled`.
//
// The run then ends as a run cancelled in a replica's queue does: recorded `cancelled` (`cancel_requested`),
// never started, and its webhook sent that outcome, signed with the secret the call gave (kept in its record,
// read before the record goes). No replica has seen the call, so the canceller records it (`HeldRunWriter`: the
// operator's RunLog of the App's held runs, or the results store) and delivers the webhook with the sidecar's
// deliverer and retry rules.
import type { Logger } from 'pino';
import type { RunMode, RunRecord } from '../crds/run-record-schema.ts';
import type { WebhookDeliverer } from '../sidecar/webhook/deliver.ts';
import { buildWebhookBody } from '../sidecar/webhook/payload.ts';
import { heldRun, type HeldCallLine, type HeldRun } from './held-run.ts';
import { AlteredRecordError, HELD_CALL_LABEL, HELD_CALL_NAMESPACE_LABEL, type HeldCall, type HeldRecords } from './hold-records.ts';

/** The status code a cancelled run is recorded with: that of the `run-cancelled` problem its caller is answered. */
const CANCELLED_STATUS = 409;
export const HELD_CANCELLED_MESSAGE = 'The run was cancelled at request before it started (it was held while its app started from zero)';

/** Where the run of a cancelled held call is recorded: written again, whole, as its webhook progresses. */
export interface HeldRunWriter {
  write(run: RunRecord): Promise<void>;
}

/**
 * What a held call dropped by a cancel is: its run, cancelled before it started; `droppedBy`, the operator
 * replica that dropped it, in the `replica` field (no pod ran it). A webhook endpoint the replica would have
 * refused is recorded as not sent, saying why.
 */
export function heldCallCancelled(call: HeldCallLine, mode: RunMode, projectId: string, appName: string, droppedBy: string, now: Date): HeldRun {
  const { run, webhook } = heldRun(call, mode, projectId, appName, droppedBy);
  return {
    run: { ...run, status: 'cancelled', statusCode: CANCELLED_STATUS, error: { type: 'Cancelled', message: HELD_CANCELLED_MESSAGE }, reason: 'cancel_requested', completedAt: now.toISOString() },
    webhook,
  };
}

/**
 * Records the cancelled run (listed from then on), then delivers its webhook and records how that went. Resolves
 * once the run is first written; the delivery goes on, its outcome written when settled (`delivered`).
 */
export async function settleCancelledHeldCall(
  cancelled: HeldRun,
  options: { writer: HeldRunWriter; deliverer: WebhookDeliverer; logger: Logger },
): Promise<{ delivered: Promise<void> }> {
  const { run, webhook } = cancelled;
  const { writer, deliverer, logger } = options;
  await writer.write(run);
  if (webhook === null || run.webhook === null) return { delivered: Promise.resolve() };
  const body = buildWebhookBody({ runId: run.id, status: 'failure', statusCode: CANCELLED_STATUS, error: run.error!, runTimeMs: null, completedAt: new Date(run.completedAt!) });
  const delivered = deliverer
    .deliver({ runId: run.id, endpoint: webhook.endpoint, body, signer: webhook.signer })
    .then(async (outcome) => {
      const settled: RunRecord = { ...run, webhook: { ...run.webhook!, ...outcome } };
      if (outcome.state === 'failed') logger.warn({ runId: run.id, endpoint: run.webhook!.endpoint, attempts: outcome.attempts, lastError: outcome.lastError }, 'webhook delivery of a cancelled held call failed');
      await writer.write(settled);
    })
    .catch((error: unknown) => logger.error({ err: error, runId: run.id }, 'the webhook outcome of a cancelled held call could not be recorded; its record says the delivery is pending'));
  return { delivered };
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
      call = await records.callOf(record);
    } catch (error) {
      if (error instanceof AlteredRecordError) return null;
      throw error;
    }
    if (await records.removeAsRead(record)) return call;
  }
}
