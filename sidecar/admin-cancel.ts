// Cancelling a run through the pod's admin port: how the operator's management API reaches the replica that
// runs the call (operator/run-cancel.ts). The same token as /drain guards it (drain-token.ts): the admin port
// listens on the pod IP, which every pod of the cluster reaches, and only the operator holds the App's token.
import type { FailureReason, RunRecord } from '../crds/run-record-schema.ts';

/** `POST /cancel/<token>/<run_id>` on the admin port. */
export const CANCEL_PATH = '/cancel';

/** What a cancel the replica took answers (202): the run as it stood, and why it is stopping (another reason than a cancel: it was ending already). */
export interface AdminCancelAnswer {
  record: RunRecord;
  stoppedFor: FailureReason;
}

/** The admin path that cancels `runId` on a replica whose drain token is `token`. */
export function adminCancelPath(token: string, runId: string): string {
  return `${CANCEL_PATH}/${token}/${encodeURIComponent(runId)}`;
}
