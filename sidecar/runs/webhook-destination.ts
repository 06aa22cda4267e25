// The whole webhook endpoint a run asked for, query string and userinfo included, kept beside its record's
// `webhook` member and never in it: the record is what the RunLog and the list API show, and it keeps the
// endpoint without the parts where callers put credentials. Local stores (SQLite, the pod's emptyDir) write
// the destination next to the record while its delivery is pending, so a restarted replica can still deliver
// the outcome of a run its predecessor lost.
import type { WebhookRecord } from '../../crds/run-record-schema.ts';

/** Keyed by the record's `webhook` object: it lives as long as the record, and the deliverer updates it in place. */
const destinations = new WeakMap<WebhookRecord, string>();

export function rememberDestination(webhook: WebhookRecord, destination: string): void {
  destinations.set(webhook, destination);
}

/** Where the webhook is to be delivered, while its delivery is pending; null once settled, or when unknown. */
export function pendingDestination(webhook: WebhookRecord | null): string | null {
  if (webhook === null || webhook.state !== 'pending') return null;
  return destinations.get(webhook) ?? null;
}
