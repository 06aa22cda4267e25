// How far a run record has come, as one number that only grows along a run's life: pending < running <
// finished, then, once finished, its webhook's delivery (each attempt, then settled). The results store writes a
// record only over an older version of itself, so batches may arrive twice, or out of order, and the row still
// holds the latest state.
import type { RunRecord } from '../crds/run-record-schema.ts';

const STATUS_RANK: Readonly<Record<RunRecord['status'], number>> = {
  pending: 0,
  running: 1,
  success: 2,
  failure: 2,
  cancelled: 2,
};

/** 2^40 and 2^32: the status above the webhook's settling above its attempts, all below 2^53. */
const STATUS_STEP = 2 ** 40;
const SETTLED_STEP = 2 ** 32;
const MAX_ATTEMPTS = SETTLED_STEP - 1;

export function recordVersion(record: RunRecord): number {
  const webhook = record.webhook;
  const settled = webhook !== null && webhook.state !== 'pending' ? 1 : 0;
  const attempts = Math.min(Math.max(webhook?.attempts ?? 0, 0), MAX_ATTEMPTS);
  return STATUS_RANK[record.status] * STATUS_STEP + settled * SETTLED_STEP + attempts;
}
