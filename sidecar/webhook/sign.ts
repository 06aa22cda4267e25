// Webhook signatures (spec 6.2, "Webhook signature"): HMAC-SHA256 keyed with the caller's secret over
// `<run_id>.<timestamp>.<raw body>`, sent as `v1,<lowercase hex>`. A receiver verifies it with the same
// computation and a constant-time comparison.

import { createHmac, createSecretKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';

export const WEBHOOK_TIMESTAMP_HEADER = 'x-service-webhook-timestamp';
export const WEBHOOK_SIGNATURE_HEADER = 'x-service-webhook-signature';
const SIGNATURE_VERSION = 'v1';

/**
 * Holds the secret of one run's webhook. The key sits in a private field of a KeyObject, so logging or
 * serialising a signer (or a delivery that carries one) shows `{}`, never the secret.
 */
export class WebhookSigner {
  readonly #key: KeyObject;

  /** `secret`: the key's bytes, or text keyed as its UTF-8 bytes. */
  constructor(secret: string | Uint8Array) {
    if (secret.length === 0) throw new RangeError('webhook secret is empty; an empty key would sign nothing');
    this.#key = createSecretKey(typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret);
  }

  /** `v1,<hex>` for one attempt; `timestampSeconds` is the attempt's sending time in unix seconds. */
  sign(runId: string, timestampSeconds: number, body: string): string {
    // Updating piecewise avoids building a second copy of a possibly large body.
    const hex = createHmac('sha256', this.#key)
      .update(`${runId}.${timestampSeconds}.`, 'utf8')
      .update(body, 'utf8')
      .digest('hex');
    return `${SIGNATURE_VERSION},${hex}`;
  }

  /**
   * The key's bytes, for the one place that keeps them so a restarted sidecar can still sign what its predecessor
   * owed: the pod's own journal folder (sidecar/runs/webhook-destinations-file.ts), never a shared store.
   */
  exportKey(): Buffer {
    return this.#key.export();
  }

  headers(runId: string, timestampSeconds: number, body: string): Record<string, string> {
    return {
      [WEBHOOK_TIMESTAMP_HEADER]: String(timestampSeconds),
      [WEBHOOK_SIGNATURE_HEADER]: this.sign(runId, timestampSeconds, body),
    };
  }
}
