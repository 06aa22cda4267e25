import { describe, expect, it } from 'vitest';
import { WorkQueue } from './work-queue.ts';

/** A promise resolved from outside. */
function gate(): { promise: Promise<void>; open(): void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** Resolves once `count` calls happened. */
function counter() {
  const calls: string[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  return {
    calls,
    record(key: string) {
      calls.push(key);
      for (const waiter of waiters.filter((w) => calls.length >= w.count)) waiter.resolve();
    },
    reached(count: number): Promise<void> {
      if (calls.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
  };
}

describe('WorkQueue', () => {
  it('handles a key once however often it was added while waiting', async () => {
    const blocker = gate();
    const seen = counter();
    const queue = new WorkQueue({
      workers: 1,
      handle: async (key) => {
        seen.record(key);
        if (key === 'first') await blocker.promise;
      },
    });
    queue.start();
    queue.add('first');
    for (let i = 0; i < 5; i += 1) queue.add('b');
    expect(queue.depth).toBe(1);
    blocker.open();
    await seen.reached(2);
    await queue.stop();
    expect(seen.calls).toEqual(['first', 'b']);
  });

  it('never handles one key twice at once; an add during handling runs it once more afterwards', async () => {
    const blocker = gate();
    const seen = counter();
    let concurrent = 0;
    let maxConcurrent = 0;
    const queue = new WorkQueue({
      workers: 4,
      handle: async (key) => {
        concurrent += 1;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        seen.record(key);
        if (seen.calls.length === 1) await blocker.promise;
        concurrent -= 1;
      },
    });
    queue.start();
    queue.add('a');
    await seen.reached(1);
    queue.add('a');
    queue.add('a');
    blocker.open();
    await seen.reached(2);
    await queue.stop();
    expect(seen.calls).toEqual(['a', 'a']);
    expect(maxConcurrent).toBe(1);
  });

  it('runs at most `workers` keys at once', async () => {
    const blocker = gate();
    const seen = counter();
    let concurrent = 0;
    let maxConcurrent = 0;
    const queue = new WorkQueue({
      workers: 2,
      handle: async (key) => {
        concurrent += 1;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        seen.record(key);
        await blocker.promise;
        concurrent -= 1;
      },
    });
    queue.start();
    for (const key of ['a', 'b', 'c', 'd', 'e']) queue.add(key);
    await seen.reached(2);
    expect(queue.busy).toBe(2);
    expect(queue.depth).toBe(3);
    blocker.open();
    await seen.reached(5);
    await queue.stop();
    expect(maxConcurrent).toBe(2);
    expect(seen.calls).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('retries a failing key with exponential backoff up to the maximum, and resets it after a success', async () => {
    const seen = counter();
    const delays: number[] = [];
    let failUntil = 5;
    const queue = new WorkQueue({
      workers: 1,
      backoff: { initialMs: 5, maxMs: 40 },
      handle: async (key) => {
        seen.record(key);
        if (seen.calls.length <= failUntil) throw new Error(`attempt ${seen.calls.length} failed`);
      },
      onFailure: (_key, _error, _failures, retryInMs) => delays.push(retryInMs),
    });
    queue.start();
    queue.add('broken');
    await seen.reached(6);
    expect(delays).toEqual([5, 10, 20, 40, 40]);

    failUntil = 7;
    queue.add('broken');
    await seen.reached(8);
    expect(delays.slice(5)).toEqual([5]);
    await queue.stop();
  });

  it('keeps healthy keys flowing while one waits out its backoff', async () => {
    const seen = counter();
    const queue = new WorkQueue({
      workers: 1,
      backoff: { initialMs: 60_000, maxMs: 60_000 },
      handle: async (key) => {
        seen.record(key);
        if (key === 'broken') throw new Error('broken');
      },
    });
    queue.start();
    queue.add('broken');
    queue.add('healthy');
    await seen.reached(2);
    expect(queue.retrying).toBe(1);
    queue.forget('broken');
    expect(queue.retrying).toBe(0);
    await queue.stop();
    expect(seen.calls).toEqual(['broken', 'healthy']);
  });

  it('stop drops waiting keys, waits for the one in hand, and ignores adds afterwards', async () => {
    const blocker = gate();
    const seen = counter();
    const depths: number[] = [];
    const queue = new WorkQueue({
      workers: 1,
      handle: async (key) => {
        seen.record(key);
        await blocker.promise;
      },
      onDepthChange: (depth) => depths.push(depth),
    });
    queue.start();
    queue.add('a');
    queue.add('b');
    await seen.reached(1);
    let stopped = false;
    const stopping = queue.stop().then(() => (stopped = true));
    expect(queue.depth).toBe(0);
    await Promise.resolve();
    expect(stopped).toBe(false);
    blocker.open();
    await stopping;
    queue.add('c');
    expect(queue.depth).toBe(0);
    expect(seen.calls).toEqual(['a']);
    expect(depths.at(-1)).toBe(0);
  });
});
