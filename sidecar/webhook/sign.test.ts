import { createHmac, timingSafeEqual } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER, WebhookSigner } from './sign.ts';

// A receiver's verification, written from the spec (6.2, "Webhook signature"), not from sign.ts.
function receiverAccepts(secret: string, requestId: string, timestamp: string, body: string, header: string): boolean {
  const received = header.includes(',') ? header.slice(header.indexOf(',') + 1) : header;
  const expected = createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(Buffer.from(`${requestId}.${timestamp}.${body}`, 'utf8'))
    .digest('hex');
  const a = Buffer.from(received, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

const SECRET = 'whsec_😀-not-ascii';
const RUN_ID = '0193a7c2-3f1e-7000-8000-000000000001';
const BODY = '{"run_id":"0193a7c2-3f1e-7000-8000-000000000001","status":"success","result":{"é":1}}';

describe('WebhookSigner', () => {
  it('signs as v1,<lowercase hex HMAC-SHA256 of id.timestamp.body> that a receiver verifies', () => {
    const signature = new WebhookSigner(SECRET).sign(RUN_ID, 1_700_000_000, BODY);
    expect(signature).toMatch(/^v1,[0-9a-f]{64}$/);
    expect(receiverAccepts(SECRET, RUN_ID, '1700000000', BODY, signature)).toBe(true);
  });

  it('fails verification when the body, the timestamp, the id or the secret differ', () => {
    const signature = new WebhookSigner(SECRET).sign(RUN_ID, 1_700_000_000, BODY);
    expect(receiverAccepts(SECRET, RUN_ID, '1700000000', BODY.replace('success', 'failure'), signature)).toBe(false);
    expect(receiverAccepts(SECRET, RUN_ID, '1700000001', BODY, signature)).toBe(false);
    expect(receiverAccepts(SECRET, `${RUN_ID}x`, '1700000000', BODY, signature)).toBe(false);
    expect(receiverAccepts('other', RUN_ID, '1700000000', BODY, signature)).toBe(false);
  });

  it('gives the timestamp and signature headers for one attempt', () => {
    const headers = new WebhookSigner(SECRET).headers(RUN_ID, 1_700_000_123, BODY);
    expect(headers[WEBHOOK_TIMESTAMP_HEADER]).toBe('1700000123');
    const signature = headers[WEBHOOK_SIGNATURE_HEADER];
    expect(signature).toBeDefined();
    expect(receiverAccepts(SECRET, RUN_ID, '1700000123', BODY, signature ?? '')).toBe(true);
  });

  it('does not show the secret when logged or serialised', () => {
    const signer = new WebhookSigner(SECRET);
    expect(JSON.stringify({ signer })).not.toContain('whsec');
    expect(inspect(signer, { showHidden: true, depth: 10 })).not.toContain('whsec');
  });

  it('refuses an empty secret', () => {
    expect(() => new WebhookSigner('')).toThrow(/empty/);
  });
});
