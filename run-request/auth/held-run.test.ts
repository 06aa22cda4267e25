import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newRunId } from '../run-id.ts';
import { bodySha256, HELD_RUN_MAX_AGE_MS, heldRunHeader, holderKeyFromText, verifyHeldRun } from './held-run.ts';

const key = randomBytes(32);
const line = { method: 'POST', url: '/v4/team-a/hello/run?async=true&webhookEndpoint=https%3A%2F%2Fhooks.example.com%2Fa', authorization: 'Bearer token-a' };
const body = Buffer.from('{"amount":10}');
const NOW = 1_795_000_000_000;

describe('held-run header', () => {
  it('vouches for the run id, wait and body it was signed with, and only with the same key', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3_600_000 }), (coldStartMs) => {
        const run = { runId: newRunId(), coldStartMs };
        const header = heldRunHeader(key, run, line, body, NOW);
        expect(verifyHeldRun(key, header, line, NOW)).toEqual({ ...run, bodySha256: bodySha256(body) });
        expect(verifyHeldRun(randomBytes(32), header, line, NOW)).toBeNull();
      }),
    );
  });

  it('refuses a changed run id, wait, date or body digest, a malformed value, and everything without a key', () => {
    const runId = newRunId();
    const header = heldRunHeader(key, { runId, coldStartMs: 1200 }, line, body, NOW);
    const [, , issuedAt, digest, signature] = header.split(';');
    expect(verifyHeldRun(key, `${newRunId()};1200;${issuedAt};${digest};${signature}`, line, NOW)).toBeNull();
    expect(verifyHeldRun(key, `${runId};1;${issuedAt};${digest};${signature}`, line, NOW)).toBeNull();
    expect(verifyHeldRun(key, `${runId};1200;${NOW + 1};${digest};${signature}`, line, NOW)).toBeNull();
    expect(verifyHeldRun(key, `${runId};1200;${issuedAt};${bodySha256(Buffer.from('{"amount":1e9}'))};${signature}`, line, NOW)).toBeNull();
    expect(verifyHeldRun(key, `${runId};1200;${issuedAt};-;${signature}`, line, NOW)).toBeNull();
    expect(verifyHeldRun(key, `${header};extra`, line, NOW)).toBeNull();
    expect(verifyHeldRun(key, `${runId};1200;${issuedAt};${signature}`, line, NOW)).toBeNull();
    expect(verifyHeldRun(key, 'not-a-run;1;1;-;zz', line, NOW)).toBeNull();
    expect(verifyHeldRun(key, [header], line, NOW)).toBeNull();
    expect(verifyHeldRun(null, header, line, NOW)).toBeNull();
  });

  it('is good for the call it was made for only: another method, path, query or Authorization header vouches for nothing', () => {
    const run = { runId: newRunId(), coldStartMs: 800 };
    const header = heldRunHeader(key, run, line, body, NOW);
    expect(verifyHeldRun(key, header, { ...line, method: 'PUT' }, NOW)).toBeNull();
    expect(verifyHeldRun(key, header, { ...line, url: '/v4/team-b/hello/run?async=true&webhookEndpoint=https%3A%2F%2Fhooks.example.com%2Fa' }, NOW)).toBeNull();
    expect(verifyHeldRun(key, header, { ...line, url: '/v4/team-a/hello/run?async=true&webhookEndpoint=https%3A%2F%2Fevil.example%2F' }, NOW)).toBeNull();
    expect(verifyHeldRun(key, header, { ...line, authorization: undefined }, NOW)).toBeNull();
    expect(verifyHeldRun(key, header, { ...line, authorization: 'Bearer token-b' }, NOW)).toBeNull();
    expect(verifyHeldRun(key, header, line, NOW)).toMatchObject(run);
  });

  it('names no body for a call whose body streams through (a relayed sync or stream call)', () => {
    const run = { runId: newRunId(), coldStartMs: 10 };
    expect(verifyHeldRun(key, heldRunHeader(key, run, line, null, NOW), line, NOW)).toEqual({ ...run, bodySha256: null });
  });

  it('is good for minutes around when it was made (clock skew between nodes), not longer', () => {
    const run = { runId: newRunId(), coldStartMs: 50 };
    const header = heldRunHeader(key, run, line, body, NOW);
    expect(verifyHeldRun(key, header, line, NOW + HELD_RUN_MAX_AGE_MS)).toMatchObject(run);
    expect(verifyHeldRun(key, header, line, NOW - HELD_RUN_MAX_AGE_MS)).toMatchObject(run);
    expect(verifyHeldRun(key, header, line, NOW + HELD_RUN_MAX_AGE_MS + 1)).toBeNull();
    expect(verifyHeldRun(key, header, line, NOW - HELD_RUN_MAX_AGE_MS - 1)).toBeNull();
  });

  it('needs a key of at least 32 bytes', () => {
    expect(() => holderKeyFromText('short')).toThrow(/at least 32 bytes/);
    expect(Buffer.from(holderKeyFromText(key.toString('hex'))).equals(key)).toBe(true);
  });
});
