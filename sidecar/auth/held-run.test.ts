import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newRunId } from '../runs/recorder.ts';
import { heldRunHeader, holderKeyFromText, verifyHeldRun } from './held-run.ts';

const key = randomBytes(32);

describe('held-run header', () => {
  it('vouches for the run id and wait it was signed with, and only with the same key', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3_600_000 }), (coldStartMs) => {
        const run = { runId: newRunId(), coldStartMs };
        const header = heldRunHeader(key, run);
        expect(verifyHeldRun(key, header)).toEqual(run);
        expect(verifyHeldRun(randomBytes(32), header)).toBeNull();
      }),
    );
  });

  it('refuses a changed run id or wait, a malformed value, and everything without a key', () => {
    const runId = newRunId();
    const header = heldRunHeader(key, { runId, coldStartMs: 1200 });
    const [, , signature] = header.split(';');
    expect(verifyHeldRun(key, `${newRunId()};1200;${signature}`)).toBeNull();
    expect(verifyHeldRun(key, `${runId};1;${signature}`)).toBeNull();
    expect(verifyHeldRun(key, `${header};extra`)).toBeNull();
    expect(verifyHeldRun(key, 'not-a-run;1;zz')).toBeNull();
    expect(verifyHeldRun(key, [header])).toBeNull();
    expect(verifyHeldRun(null, header)).toBeNull();
  });

  it('needs a key of at least 32 bytes', () => {
    expect(() => holderKeyFromText('short')).toThrow(/at least 32 bytes/);
    expect(Buffer.from(holderKeyFromText(key.toString('hex'))).equals(key)).toBe(true);
  });
});
