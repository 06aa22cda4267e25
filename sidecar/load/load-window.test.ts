// The load window: an average and a peak over the last samples only, and the rate of arrivals across them.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LoadWindow } from './load-window.ts';

describe('LoadWindow', () => {
  it('is all zeros before a sample, and has no rate from one sample alone', () => {
    const window = new LoadWindow(11);
    expect([window.averageConcurrency, window.peakConcurrency, window.requestsPerSecond]).toEqual([0, 0, 0]);
    window.add(0, 3, 4, 100);
    expect([window.averageConcurrency, window.peakConcurrency, window.requestsPerSecond]).toEqual([3, 4, 0]);
  });

  it('forgets samples older than the window: a burst a second ago no longer decides', () => {
    const window = new LoadWindow(11);
    window.add(0, 50, 80, 0);
    for (let tick = 1; tick <= 10; tick += 1) window.add(tick * 100, 0, 0, 500);
    // The burst's sample is the oldest still held: the rate spans it.
    expect(window.peakConcurrency).toBe(80);
    expect(window.requestsPerSecond).toBe(500);
    window.add(1100, 0, 0, 500);
    expect([window.averageConcurrency, window.peakConcurrency, window.requestsPerSecond]).toEqual([0, 0, 0]);
  });

  it('takes a peak below the sampled concurrency as the concurrency (a peak is at least what was seen)', () => {
    const window = new LoadWindow(3);
    window.add(0, 7, 2, 0);
    expect(window.peakConcurrency).toBe(7);
  });

  it('averages, peaks and rates exactly the last `size` samples, for any sequence', () => {
    const sample = fc.record({ gapMs: fc.integer({ min: 1, max: 500 }), concurrency: fc.nat(1000), peakAbove: fc.nat(100), arrived: fc.nat(1000) });
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 20 }), fc.array(sample, { minLength: 1, maxLength: 60 }), (size, samples) => {
        const window = new LoadWindow(size);
        const added: { at: number; concurrency: number; peak: number; arrivals: number }[] = [];
        let at = 0;
        let arrivals = 0;
        for (const { gapMs, concurrency, peakAbove, arrived } of samples) {
          at += gapMs;
          arrivals += arrived;
          window.add(at, concurrency, concurrency + peakAbove, arrivals);
          added.push({ at, concurrency, peak: concurrency + peakAbove, arrivals });
        }
        const held = added.slice(-size);
        const oldest = held[0]!;
        const newest = held.at(-1)!;
        expect(window.averageConcurrency).toBeCloseTo(held.reduce((sum, s) => sum + s.concurrency, 0) / held.length, 9);
        expect(window.peakConcurrency).toBe(Math.max(...held.map((s) => s.peak)));
        const rate = held.length < 2 ? 0 : ((newest.arrivals - oldest.arrivals) * 1000) / (newest.at - oldest.at);
        expect(window.requestsPerSecond).toBeCloseTo(rate, 9);
      }),
    );
  });

  it('refuses a window of fewer than two samples (no rate could be measured)', () => {
    expect(() => new LoadWindow(1)).toThrow(/at least 2 samples, got 1/);
  });
});
