// The load meter on a real Admission and a clock the test moves: what it reports after a burst, the peak
// between two samples, that it tells of changes only, and that its timer does not outlive stop().
import { describe, expect, it } from 'vitest';
import { Admission } from '../admission.ts';
import { LoadMeter, type LoadClock } from './load-meter.ts';

class TestClock implements LoadClock {
  monotonic = 0;
  readonly #epoch = Date.parse('2030-01-01T00:00:00Z');
  now(): number {
    return this.monotonic;
  }
  wallNow(): number {
    return this.#epoch + this.monotonic;
  }
}

function setUp(concurrency = 4): { admission: Admission; clock: TestClock; meter: LoadMeter; changes: () => number; tick: (times?: number) => void } {
  const admission = new Admission(concurrency);
  const clock = new TestClock();
  const meter = new LoadMeter(admission, { intervalMs: 100, windowMs: 1000, clock });
  let changes = 0;
  meter.onChange(() => (changes += 1));
  const tick = (times = 1): void => {
    for (let i = 0; i < times; i += 1) {
      clock.monotonic += 100;
      meter.sample();
    }
  };
  return { admission, clock, meter, changes: () => changes, tick };
}

describe('LoadMeter', () => {
  it('starts at zero, with the replica concurrency and when it was sampled', () => {
    const { meter } = setUp(4);
    expect(meter.current()).toEqual({
      inFlight: 0,
      queued: 0,
      averageConcurrency: 0,
      peakConcurrency: 0,
      requestsPerSecond: 0,
      concurrency: 4,
      sampledAt: '2030-01-01T00:00:00.000Z',
    });
  });

  it('reports a burst: calls in flight and queued, their average over the window, and the arrivals a second', () => {
    const { admission, meter, tick } = setUp(4);
    for (let i = 0; i < 4; i += 1) expect(admission.tryAcquire()).toBe(true);
    admission.reserve();
    admission.reserve();
    tick(10);
    expect(meter.current()).toMatchObject({ inFlight: 4, queued: 2, averageConcurrency: 5.45, peakConcurrency: 6, requestsPerSecond: 6 });
    // A second later the window holds only the steady six.
    tick(10);
    expect(meter.current()).toMatchObject({ inFlight: 4, queued: 2, averageConcurrency: 6, peakConcurrency: 6, requestsPerSecond: 0 });
  });

  it('catches a burst that came and went between two samples in the peak and the rate', () => {
    const { admission, meter, tick } = setUp(8);
    for (let i = 0; i < 8; i += 1) admission.tryAcquire();
    for (let i = 0; i < 8; i += 1) admission.release();
    tick();
    expect(meter.current()).toMatchObject({ inFlight: 0, averageConcurrency: 0, peakConcurrency: 8, requestsPerSecond: 80 });
    // Eleven samples span the second: the burst's sample leaves the window with the eleventh after it.
    tick(10);
    expect(meter.current()).toMatchObject({ peakConcurrency: 8, requestsPerSecond: 0 });
    tick();
    expect(meter.current()).toMatchObject({ peakConcurrency: 0, requestsPerSecond: 0 });
  });

  it('tells of a change once, keeps the same report (and its sampledAt) while nothing changes', () => {
    const { admission, meter, changes, tick } = setUp();
    tick(20);
    expect(changes()).toBe(0);
    admission.tryAcquire();
    tick();
    expect(changes()).toBe(1);
    const changed = meter.current();
    expect(changed.sampledAt).toBe('2030-01-01T00:00:02.100Z');
    tick(10);
    const settled = meter.current();
    tick(30);
    expect(meter.current()).toBe(settled);
    expect(settled).toMatchObject({ inFlight: 1, averageConcurrency: 1, requestsPerSecond: 0 });
  });

  it('samples on its timer once started, and stops with stop()', async () => {
    const admission = new Admission(2);
    const meter = new LoadMeter(admission, { intervalMs: 5, windowMs: 10 });
    const changed = new Promise<void>((resolve) => meter.onChange(resolve));
    meter.start();
    admission.tryAcquire();
    try {
      await changed;
      expect(meter.current().inFlight).toBe(1);
    } finally {
      meter.stop();
    }
    admission.release();
    // Stopped: no sample can see the release (a timer still armed would have had 50 intervals to).
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(meter.current().inFlight).toBe(1);
  });

  it('refuses a window shorter than its interval', () => {
    expect(() => new LoadMeter(new Admission(1), { intervalMs: 100, windowMs: 50 })).toThrow(/0 < intervalMs <= windowMs, got intervalMs 100 and windowMs 50/);
  });
});
