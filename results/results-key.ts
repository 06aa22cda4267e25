// The key a namespace's sidecars sign their batches of run records with, and the collector checks them by.
// Derived from the namespace's hand-over key (operator/autoscaling/holder-key.ts), which its sidecars already
// hold: no new Secret, no database credential in an app pod, and one namespace's key signs only its own runs.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header of a batch's signature: `sha256=<hex HMAC-SHA256 of the body>`. */
export const RESULTS_SIGNATURE_HEADER = 'x-runlet-results-signature';

export function resultsKeyOf(namespaceHolderKey: Uint8Array): Uint8Array {
  return createHmac('sha256', namespaceHolderKey).update('runlet results collector').digest();
}

export function signBatch(key: Uint8Array, body: Uint8Array): string {
  return `sha256=${createHmac('sha256', key).update(body).digest('hex')}`;
}

export function isBatchSignedBy(key: Uint8Array, body: Uint8Array, signature: string | undefined): boolean {
  if (signature === undefined) return false;
  const expected = Buffer.from(signBatch(key, body), 'latin1');
  const given = Buffer.from(signature, 'latin1');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
