import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AveragingWindow, MaxWindow, smoothingFor } from './windows.ts';

describe('AveragingWindow', () => {
  it('averages the bucket means of the window, whatever the number of samples per bucket', () => {
    const window = new AveragingWindow(60_000, 1000);
    window.record(10_000, 10);
    window.record(10_500, 30); // bucket 10: mean 20
    window.record(11_200, 50); // bucket 11: 50
    expect(window.average(11_900, 60_000)).toBe(35);
    expect(window.average(11_900, 1000)).toBe(50);
  });

  it('counts only buckets inside the window, and has nothing to say without one', () => {
    const window = new AveragingWindow(60_000, 1000);
    window.record(0, 100);
    window.record(6_000, 10);
    expect(window.average(6_000, 6_000)).toBe(10); // buckets 1..6
    expect(window.average(5_999, 6_000)).toBe(100); // buckets 0..5
    expect(window.average(20_000, 6_000)).toBeUndefined();
    expect(window.average(20_000, 60_000)).toBe(55);
  });

  it('forgets what is older than its retention', () => {
    const window = new AveragingWindow(10_000, 1000);
    window.record(0, 100);
    window.record(10_000, 1);
    expect(window.average(10_000, 60_000)).toBe(1);
  });

  it('adds a late sample to its bucket, and drops one whose bucket is gone', () => {
    const window = new AveragingWindow(60_000, 1000);
    window.record(1000, 10);
    window.record(3000, 30);
    window.record(1500, 20); // bucket 1: 15
    window.record(2000, 1000); // bucket 2 holds nothing: dropped
    expect(window.average(3000, 60_000)).toBe(22.5);
  });

  it('equals the plain mean of per-second samples (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 120 }), fc.integer({ min: 1, max: 60 }), (values, windowSeconds) => {
        const window = new AveragingWindow(60_000, 1000);
        values.forEach((value, second) => window.record(second * 1000 + 250, value));
        const now = (values.length - 1) * 1000 + 999;
        const inWindow = values.slice(-windowSeconds);
        expect(window.average(now, windowSeconds * 1000)).toBeCloseTo(inWindow.reduce((a, b) => a + b, 0) / inWindow.length, 9);
      }),
    );
  });

  it('weighs the newer buckets more, as Knative does, normalised over the buckets that hold samples', () => {
    const window = new AveragingWindow(60_000, 1000);
    // Knative's example (bucketing.go): [10, 10, 5, 5], newest last, smoothing 0.6 gives 5.544 over weights
    // that add up to 0.9744; normalised, 5.544 ÷ 0.9744.
    [10, 10, 5, 5].forEach((value, second) => window.record(second * 1000, value));
    expect(window.weightedAverage(3000, 4000, 0.6)).toBeCloseTo(5.544 / 0.9744, 5);
    // Reversed, the newer tens weigh more: Knative's 9.072, normalised.
    const reversed = new AveragingWindow(60_000, 1000);
    [5, 5, 10, 10].forEach((value, second) => reversed.record(second * 1000, value));
    expect(reversed.weightedAverage(3000, 4000, 0.6)).toBeCloseTo(9.072 / 0.9744, 5);
    // A second without samples counts for nothing (not as a zero); none at all: nothing to say.
    const gap = new AveragingWindow(60_000, 1000);
    gap.record(0, 8);
    gap.record(2000, 8);
    expect(gap.weightedAverage(2000, 6000, 0.785)).toBe(8);
    expect(gap.weightedAverage(20_000, 6000, 0.785)).toBeUndefined();
  });

  it('reads a steady load as itself, whatever the weights (property)', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1000, noNaN: true }), fc.integer({ min: 1, max: 60 }), fc.double({ min: 0.2, max: 1, noNaN: true }), (value, seconds, smoothing) => {
        const window = new AveragingWindow(60_000, 1000);
        for (let second = 0; second < seconds; second++) window.record(second * 1000 + 250, value);
        expect(window.weightedAverage((seconds - 1) * 1000 + 999, 6000, smoothing)).toBe(Math.round(value * 1e6) / 1e6);
      }),
    );
  });

  it("takes Knative's smoothing: 0.785 over the panic window's 6 buckets, never below 0.2", () => {
    expect(smoothingFor(6)).toBeCloseTo(0.7846, 4);
    expect(smoothingFor(60)).toBe(0.2); // 0.142 by the formula: the floor keeps long windows from a plain mean
  });
});

describe('MaxWindow', () => {
  it('is the largest value of the window (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 100 })), { maxLength: 200 }), fc.integer({ min: 0, max: 20_000 }), (steps, windowMs) => {
        const window = new MaxWindow(windowMs);
        const recorded: { at: number; value: number }[] = [];
        let now = 0;
        for (const [advance, value] of steps) {
          now += advance;
          window.record(now, value);
          recorded.push({ at: now, value });
          const inWindow = recorded.filter((entry) => entry.at > now - windowMs).map((entry) => entry.value);
          expect(window.max(now)).toBe(inWindow.length === 0 ? undefined : Math.max(...inWindow));
        }
      }),
    );
  });

  it('covers its window once its first value is a window old', () => {
    const window = new MaxWindow(60_000);
    expect(window.coversWindow(0)).toBe(false);
    window.record(1000, 3);
    expect(window.coversWindow(60_999)).toBe(false);
    expect(window.coversWindow(61_000)).toBe(true);
    window.clear();
    expect(window.coversWindow(61_000)).toBe(false);
    expect(window.max(61_000)).toBeUndefined();
  });
});
