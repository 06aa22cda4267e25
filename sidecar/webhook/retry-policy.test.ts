import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_SCHEDULE, MAX_GAP_MS, delayBeforeAttempt, isDelivered, shouldRetry } from './retry-policy.ts';

// The spec's table (6.2), restated independently of RETRY_TABLE's rows.
function specSaysRetry(status: number): boolean {
  if (status >= 200 && status <= 299) return false;
  if (status === 404) return true;
  if (status >= 400 && status <= 599) return false;
  return true;
}

describe('retry decision', () => {
  it('matches the spec table for every status 100..599', () => {
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 599 }), (statusCode) => {
        expect(shouldRetry({ kind: 'response', statusCode })).toBe(specSaysRetry(statusCode));
      }),
      { numRuns: 2_000 },
    );
  });

  it.each([
    [200, false],
    [204, false],
    [404, true],
    [400, false],
    [410, false],
    [429, false],
    [500, false],
    [503, false],
    [101, true],
    [302, true],
    [308, true],
  ])('HTTP %i → retry %s', (statusCode, retry) => {
    expect(shouldRetry({ kind: 'response', statusCode })).toBe(retry);
  });

  it('retries network errors and timeouts, not refused destinations', () => {
    expect(shouldRetry({ kind: 'network-error', message: 'ECONNRESET' })).toBe(true);
    expect(shouldRetry({ kind: 'timeout', message: 'no answer within 10000 ms' })).toBe(true);
    expect(shouldRetry({ kind: 'refused', message: 'destination refused: 10.0.0.1 is private' })).toBe(false);
  });

  it('counts only 2xx as delivered', () => {
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 599 }), (statusCode) => {
        expect(isDelivered({ kind: 'response', statusCode })).toBe(statusCode >= 200 && statusCode < 300);
      }),
    );
    expect(isDelivered({ kind: 'timeout', message: 'x' })).toBe(false);
  });
});

describe('delay between attempts', () => {
  it('defaults to about 1 s, then about 2 s', () => {
    expect(delayBeforeAttempt(DEFAULT_RETRY_SCHEDULE, 2, () => 0)).toBe(1_000);
    expect(delayBeforeAttempt(DEFAULT_RETRY_SCHEDULE, 3, () => 0)).toBe(2_000);
    expect(delayBeforeAttempt(DEFAULT_RETRY_SCHEDULE, 3, () => 0.999)).toBeLessThan(2_000 + DEFAULT_RETRY_SCHEDULE.maxJitterMs);
  });

  it('never exceeds 5 s, whatever the configuration and the jitter', () => {
    fc.assert(
      fc.property(
        fc.tuple(fc.nat({ max: 60_000 }), fc.nat({ max: 60_000 })),
        fc.nat({ max: 10_000 }),
        fc.integer({ min: 2, max: 3 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (delaysMs, maxJitterMs, nextAttempt, random) => {
          const delay = delayBeforeAttempt({ delaysMs, maxJitterMs }, nextAttempt, () => random);
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(MAX_GAP_MS);
        },
      ),
    );
  });

  it('has no delay before the first attempt or past the third', () => {
    expect(() => delayBeforeAttempt(DEFAULT_RETRY_SCHEDULE, 1, Math.random)).toThrow(/attempts run 2..3/);
    expect(() => delayBeforeAttempt(DEFAULT_RETRY_SCHEDULE, 4, Math.random)).toThrow(/attempts run 2..3/);
  });
});
