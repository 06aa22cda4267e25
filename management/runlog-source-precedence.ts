// Which copy of a run to show when several RunLogs hold it: a pod restarted under the same name after its
// old RunLog was kept, or the operator marking the runs of a vanished pod. Each copy is some writer's view of
// the run at some moment; the one furthest along its lifecycle is the latest, whichever RunLog it is in and
// whichever copy the cache heard of first.
import type { RunRecord, RunStatus, WebhookRecord } from '../crds/run-record-schema.ts';

const LIFECYCLE_STAGE: Record<RunStatus, number> = { pending: 0, running: 1, success: 2, failure: 2, cancelled: 2 };

/**
 * Positive when `a` is a later state of the run than `b`, negative when earlier, 0 when neither can be told
 * later. In order: a finished run beats one in flight, a running one a pending one; then the later
 * `completedAt` (the last writer to end the run), the later `startedAt`; then the webhook further along
 * (a finished run is saved again when its webhook outcome arrives, `completedAt` unchanged).
 */
export function compareRunStates(a: RunRecord, b: RunRecord): number {
  return (
    LIFECYCLE_STAGE[a.status] - LIFECYCLE_STAGE[b.status] ||
    compareTimes(a.completedAt, b.completedAt) ||
    compareTimes(a.startedAt, b.startedAt) ||
    webhookProgress(a.webhook) - webhookProgress(b.webhook) ||
    (a.webhook?.attempts ?? 0) - (b.webhook?.attempts ?? 0)
  );
}

/** Absent sorts first. Parsed rather than compared as text: writers may differ in fractional digits. */
function compareTimes(a: string | null, b: string | null): number {
  const timeA = a === null ? -Infinity : Date.parse(a);
  const timeB = b === null ? -Infinity : Date.parse(b);
  if (timeA === timeB || Number.isNaN(timeA) || Number.isNaN(timeB)) return 0;
  return timeA > timeB ? 1 : -1;
}

function webhookProgress(webhook: WebhookRecord | null): number {
  return webhook === null || webhook.state === 'pending' ? 0 : 1;
}
