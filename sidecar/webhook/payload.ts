// The body POSTed to a webhook after a run (DESIGN.md, "Webhook delivery"). It is built once per run and the
// same string is sent, and signed, on every attempt.

import type { RunError } from '../../crds/run-record-schema.ts';

interface PayloadCommon {
  runId: string;
  /** The HTTP status the run ended with: the function's, or the platform's for platform failures. */
  statusCode: number;
  runTimeMs: number | null;
  completedAt: Date;
}

export type WebhookPayload = PayloadCommon &
  (
    | {
        status: 'success';
        /**
         * The function's result as the app sent it: already-serialised JSON, spliced in unparsed so a large
         * result is not parsed and re-serialised for every run.
         */
        resultJson: string;
      }
    | { status: 'failure'; error: RunError }
  );

/** Members in the documented order: run_id, status, status_code, result | error, run_time_ms, timestamp. */
export function buildWebhookBody(payload: WebhookPayload): string {
  let outcome: string;
  if (payload.status === 'success') {
    // The one cheap check that catches the likely mistake (no body at all) without scanning the whole result.
    if (!/\S/.test(payload.resultJson)) {
      throw new RangeError(`webhook payload of run ${payload.runId}: resultJson is empty, not serialised JSON`);
    }
    outcome = `"result":${payload.resultJson}`;
  } else {
    outcome = `"error":${JSON.stringify({ type: payload.error.type, message: payload.error.message })}`;
  }
  return (
    `{"run_id":${JSON.stringify(payload.runId)}` +
    `,"status":${JSON.stringify(payload.status)}` +
    `,"status_code":${JSON.stringify(payload.statusCode)}` +
    `,${outcome}` +
    `,"run_time_ms":${JSON.stringify(payload.runTimeMs)}` +
    `,"timestamp":${JSON.stringify(payload.completedAt.toISOString())}}`
  );
}
