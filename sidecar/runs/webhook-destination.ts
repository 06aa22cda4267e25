// What a run's pending webhook delivery needs beyond its record: the whole endpoint (query string and userinfo
// included), the signer when the call gave a secret, and, once the run has finished, the body being delivered.
// Kept beside the record's `webhook` member and never in it: the record is what the RunLog, the results store and
// the list API show, and it keeps the endpoint without the parts where callers put credentials. Stores that keep
// runs locally (SQLite, the pod's emptyDir) write what they can of this next to the record while the delivery is
// pending, so a restarted replica can still deliver what its predecessor owed.
import type { WebhookRecord } from '../../crds/run-record-schema.ts';
import type { WebhookSigner } from '../webhook/sign.ts';

export interface OwedDelivery {
  destination: string;
  /** Signs each attempt; null when the call gave no secret (or the store that read it back kept none). */
  signer: WebhookSigner | null;
  /** The body of the delivery under way, once the run has finished; absent before. */
  body?: string;
}

/** Keyed by the record's `webhook` object: it lives as long as the record, and the deliverer updates it in place. */
const deliveries = new WeakMap<WebhookRecord, OwedDelivery>();

export function rememberDestination(webhook: WebhookRecord, destination: string, signer: WebhookSigner | null = null): void {
  deliveries.set(webhook, { destination, signer });
}

/** The run has finished and its delivery is about to start with this body: kept so it can be sent again as it was. */
export function rememberDeliveryBody(webhook: WebhookRecord, body: string): void {
  const delivery = deliveries.get(webhook);
  if (delivery !== undefined) delivery.body = body;
}

/** Where the webhook is to be delivered, while its delivery is pending; null once settled, or when unknown. */
export function pendingDestination(webhook: WebhookRecord | null): string | null {
  return pendingDelivery(webhook)?.destination ?? null;
}

/** The whole delivery, while pending; null once settled, or when its destination is unknown. */
export function pendingDelivery(webhook: WebhookRecord | null): OwedDelivery | null {
  if (webhook === null || webhook.state !== 'pending') return null;
  return deliveries.get(webhook) ?? null;
}
