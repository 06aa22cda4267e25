// Verifies a webhook signature the way the interface tells a receiver to (section 6.2), independently of the
// sidecar's signing code: strip `v1,`, HMAC-SHA256 over `<request_id>.<timestamp>.<body>`, hex, constant-time.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

export function verifyWebhookSignature(secret: string, headers: IncomingHttpHeaders, rawBody: string): boolean {
  const requestId = headers['x-request-id'];
  const timestamp = headers['x-service-webhook-timestamp'];
  const signatureHeader = headers['x-service-webhook-signature'];
  if (typeof requestId !== 'string' || typeof timestamp !== 'string' || typeof signatureHeader !== 'string') return false;
  const comma = signatureHeader.indexOf(',');
  const received = comma === -1 ? signatureHeader : signatureHeader.slice(comma + 1);
  const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${requestId}.${timestamp}.${rawBody}`, 'utf8').digest('hex');
  const a = Buffer.from(received, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
