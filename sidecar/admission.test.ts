import { describe, expect, it } from 'vitest';
import { ProblemError } from '../crds/problem.ts';
import { Admission } from './admission.ts';

describe('Admission', () => {
  it('admits up to the concurrency at once, queues FIFO, and refuses past the queue depth with a 503', async () => {
    const admission = new Admission(2, 2);
    expect(admission.tryAcquire()).toBe(true);
    expect(admission.tryAcquire()).toBe(true);
    expect(admission.tryAcquire()).toBe(false);

    const order: string[] = [];
    const first = admission.acquire().then(() => order.push('first'));
    const second = admission.acquire().then(() => order.push('second'));
    expect(admission.queued).toBe(2);
    const refused = await admission.acquire().catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ProblemError);
    expect((refused as ProblemError).status).toBe(503);
    expect((refused as ProblemError).headers).toEqual({ 'retry-after': '1' });

    admission.release();
    await first;
    expect(order).toEqual(['first']);
    admission.release();
    await second;
    expect(order).toEqual(['first', 'second']);
    expect(admission.inFlight).toBe(2);
    expect(admission.queued).toBe(0);
  });

  it('holds a reserved place for an accepted async run and grants it when a slot frees', async () => {
    const admission = new Admission(1, 1);
    expect(admission.tryAcquire()).toBe(true);
    admission.reserve();
    expect(() => admission.reserve()).toThrow(ProblemError);
    const granted = admission.acquire(undefined, true);
    admission.release();
    await granted;
    expect(admission.inFlight).toBe(1);
    expect(admission.queued).toBe(0);
  });

  it('removes a waiter whose signal aborts, freeing its place', async () => {
    const admission = new Admission(1, 1);
    admission.tryAcquire();
    const controller = new AbortController();
    const waiting = admission.acquire(controller.signal);
    controller.abort(new Error('shutdown'));
    await expect(waiting).rejects.toThrow('shutdown');
    expect(admission.queued).toBe(0);
    admission.release();
    expect(admission.inFlight).toBe(0);
    expect(admission.tryAcquire()).toBe(true);
  });
});
