import { describe, expect, it } from 'vitest';
import { LazyQueue } from './runlog-queue.ts';

interface Item {
  n: number;
  live: boolean;
}

function queueOf(count: number): { queue: LazyQueue<Item>; items: Item[]; checks: () => number } {
  let checks = 0;
  const queue = new LazyQueue<Item>((item) => {
    checks += 1;
    return item.live;
  });
  const items = Array.from({ length: count }, (_, n) => ({ n, live: true }));
  items.forEach((item, i) => queue.push(item, i + 1));
  return { queue, items, checks: () => checks };
}

function newestFirst(queue: LazyQueue<Item>): number[] {
  const seen: number[] = [];
  queue.visitNewestFirst((item) => {
    seen.push(item.n);
    return true;
  });
  return seen;
}

describe('LazyQueue', () => {
  it('hands out the live items oldest first, skipping the stale ones', () => {
    const { queue, items } = queueOf(5);
    items[0]!.live = false;
    items[2]!.live = false;
    expect(queue.shift()?.n).toBe(1);
    expect(newestFirst(queue)).toEqual([4, 3]);
    expect(queue.shift()?.n).toBe(3);
    expect(queue.shift()?.n).toBe(4);
    expect(queue.shift()).toBeUndefined();
  });

  it('stops a newest-first visit when asked', () => {
    const { queue } = queueOf(5);
    const seen: number[] = [];
    queue.visitNewestFirst((item) => {
      seen.push(item.n);
      return item.n > 3;
    });
    expect(seen).toEqual([4, 3]);
  });

  it('takes the oldest items it is given, leaving the refused ones in front in order', () => {
    const { queue, items } = queueOf(8);
    let taken = 0;
    const take = (item: Item): boolean => {
      if (item.n % 3 === 0) return false;
      item.live = false;
      taken += 1;
      return true;
    };
    queue.takeOldest(take, () => taken < 3);
    expect(items.filter((item) => !item.live).map((item) => item.n)).toEqual([1, 2, 4]);
    expect(newestFirst(queue).reverse()).toEqual([0, 3, 5, 6, 7]);
    taken = 0;
    queue.takeOldest(take, () => taken < 10);
    expect(newestFirst(queue).reverse()).toEqual([0, 3, 6]);
  });

  it('keeps what retain accepts, in order', () => {
    const { queue, items } = queueOf(6);
    items[1]!.live = false;
    queue.retain((item) => item.n !== 4);
    expect(newestFirst(queue).reverse()).toEqual([0, 2, 3, 5]);
    queue.reset([items[5]!, items[0]!]);
    expect(newestFirst(queue)).toEqual([0, 5]);
  });

  it('holds a bounded number of stale items however many went stale, losing no live one', () => {
    const { queue, items, checks } = queueOf(10);
    let n = items.length;
    for (let i = 0; i < 10_000; i += 1) {
      // Ten live items at a time: the oldest goes stale as a new one arrives.
      items[n - 10]!.live = false;
      const item = { n, live: true };
      items.push(item);
      queue.push(item, 10);
      n += 1;
    }
    const before = checks();
    expect(newestFirst(queue)).toEqual(items.slice(-10).map((item) => item.n).reverse());
    expect(checks() - before).toBeLessThanOrEqual(2 * 10 + 64 + 1);
  });
});
