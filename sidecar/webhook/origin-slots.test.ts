import { describe, expect, it } from 'vitest';
import { OriginSlots } from './origin-slots.ts';

const A = 'http://a.example';
const B = 'http://b.example';
const LONG_MS = 60_000;

describe('OriginSlots', () => {
  it('lets `perOrigin` attempts through per origin and hands freed slots out in arrival order', async () => {
    const slots = new OriginSlots(2);
    const signal = new AbortController().signal;
    const first = (await slots.acquire(A, LONG_MS, signal))!;
    await slots.acquire(A, LONG_MS, signal);
    // Another origin is not held up by A's.
    expect(await slots.acquire(B, LONG_MS, signal)).not.toBeNull();

    const order: string[] = [];
    const third = slots.acquire(A, LONG_MS, signal).then((slot) => (order.push('third'), slot));
    const fourth = slots.acquire(A, LONG_MS, signal).then((slot) => (order.push('fourth'), slot));
    expect(slots.usage(A)).toEqual({ busy: 2, waiting: 2 });

    first.release();
    first.release(); // twice frees one slot, not two
    await third;
    expect(order).toEqual(['third']);
    expect(slots.usage(A)).toEqual({ busy: 2, waiting: 1 });
    (await third)!.release();
    expect(await fourth).not.toBeNull();
    expect(order).toEqual(['third', 'fourth']);
  });

  it('gives up on a wait past its bound or once aborted, leaving the queue as it was', async () => {
    const slots = new OriginSlots(1);
    const shutdown = new AbortController();
    const held = (await slots.acquire(A, LONG_MS, shutdown.signal))!;

    expect(await slots.acquire(A, 20, shutdown.signal)).toBeNull();
    const aborted = slots.acquire(A, LONG_MS, shutdown.signal);
    shutdown.abort();
    expect(await aborted).toBeNull();
    expect(await slots.acquire(A, LONG_MS, shutdown.signal)).toBeNull();
    expect(slots.usage(A)).toEqual({ busy: 1, waiting: 0 });

    held.release();
    expect(slots.usage(A)).toEqual({ busy: 0, waiting: 0 });
  });

  it('refuses a pool size that is not a positive integer', () => {
    expect(() => new OriginSlots(0)).toThrow(RangeError);
  });
});
