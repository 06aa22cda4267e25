import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReviewLimiter, type ReviewLimits } from './review-limiter.ts';

type Step = { kind: 'start'; known: boolean } | { kind: 'finish' } | { kind: 'wait'; ms: number };

// Mostly starts and finishes between short waits, so bursts reach the bounds before the bucket refills.
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('start' as const), known: fc.boolean() }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'finish' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 300 }) }) },
);

const limits: fc.Arbitrary<ReviewLimits> = fc.record({
  maxInFlight: fc.integer({ min: 1, max: 16 }),
  perSecond: fc.integer({ min: 1, max: 500 }).map((tenths) => tenths / 10),
  burst: fc.integer({ min: 1, max: 60 }),
});

describe('ReviewLimiter', () => {
  it('never exceeds its slots nor its bucket, keeps a quarter of the slots for known tokens, and tells the truth in Retry-After', () => {
    fc.assert(
      fc.property(limits, fc.array(step, { maxLength: 300 }), (limits, steps) => {
        let now = 0;
        const limiter = new ReviewLimiter(limits, () => now);
        const unknownSlots = limits.maxInFlight - Math.floor(limits.maxInFlight / 4);
        let inFlight = 0;
        let unknownStarted = 0;
        for (const s of steps) {
          if (s.kind === 'wait') {
            now += s.ms;
          } else if (s.kind === 'finish') {
            if (inFlight > 0) {
              limiter.finish();
              inFlight -= 1;
            }
          } else {
            const admission = limiter.tryStart(s.known);
            if (admission.admitted) {
              inFlight += 1;
              if (!s.known) unknownStarted += 1;
              expect(inFlight).toBeLessThanOrEqual(s.known ? limits.maxInFlight : unknownSlots);
              expect(unknownStarted).toBeLessThanOrEqual(limits.burst + (now / 1000) * limits.perSecond);
            } else {
              expect(Number.isInteger(admission.retryAfterSeconds) && admission.retryAfterSeconds >= 1).toBe(true);
              // Refused with a free slot: only the bucket can have refused, and it refills within Retry-After.
              if (inFlight < (s.known ? limits.maxInFlight : unknownSlots)) {
                expect(s.known).toBe(false);
                now += admission.retryAfterSeconds * 1000 + 1; // a real retry comes later still; spares float rounding
                expect(limiter.tryStart(false).admitted).toBe(true);
                inFlight += 1;
                unknownStarted += 1;
              }
            }
          }
        }
      }),
      { numRuns: 500 },
    );
  });

  it('refuses limits that would admit nothing', () => {
    expect(() => new ReviewLimiter({ maxInFlight: 0, perSecond: 1, burst: 1 }, () => 0)).toThrow(/maxInFlight must be positive, got 0/);
    expect(() => new ReviewLimiter({ maxInFlight: 1, perSecond: 0, burst: 1 }, () => 0)).toThrow(/perSecond must be positive/);
    expect(() => new ReviewLimiter({ maxInFlight: 2.5, perSecond: 1, burst: 1 }, () => 0)).toThrow(/must be an integer/);
  });
});
