// The collector's byte budget on its own: bytes are counted as taken, a share under its equal part of a full
// budget is given room by cutting the largest holder's unfinished body (never a finished one, never a share at or
// under its part), and a share at its part waits.
import { describe, expect, it } from 'vitest';
import { ByteBudget, type BodyHolding } from '../../results/byte-budget.ts';

function opened(budget: ByteBudget, share: string, cuts: string[], name: string): BodyHolding {
  return budget.open(share, () => cuts.push(name));
}

describe('the collector\'s byte budget', () => {
  it('lets one share use all of it while no other needs room, and counts only what was taken', () => {
    const budget = new ByteBudget(100, 10);
    const cuts: string[] = [];
    const a = opened(budget, 'a', cuts, 'a');
    expect(a.take(100)).toBe(true);
    expect(a.take(1)).toBe(false);
    expect(budget.inUse).toBe(100);
    a.release();
    a.release();
    expect(budget.inUse).toBe(0);
    expect(budget.heldBy('a')).toBe(0);
  });

  it('gives a newcomer room by cutting the largest unfinished body of the share most above its part, and only as much as needed', () => {
    const budget = new ByteBudget(100, 10);
    const cuts: string[] = [];
    const a1 = opened(budget, 'a', cuts, 'a1');
    const a2 = opened(budget, 'a', cuts, 'a2');
    const b1 = opened(budget, 'b', cuts, 'b1');
    expect(a1.take(40) && a2.take(20) && b1.take(40)).toBe(true);
    // c's part of a full budget among three shares: 33. a holds 60, b 40: a's largest body goes.
    const c = opened(budget, 'c', cuts, 'c');
    expect(c.take(30)).toBe(true);
    expect(cuts).toEqual(['a1']);
    expect(a1.held).toBe(0);
    expect(budget.heldBy('a')).toBe(20);
    expect(budget.inUse).toBe(90);
    expect(budget.preemptions).toBe(1);
    // c at its part (33) gets no more by cutting: it waits (is refused) while the budget is full.
    expect(c.take(5)).toBe(true);
    expect(c.take(10)).toBe(false);
    expect(cuts).toEqual(['a1']);
  });

  it('never cuts a body that arrived whole, nor a share at or under its part', () => {
    const budget = new ByteBudget(100, 10);
    const cuts: string[] = [];
    const a = opened(budget, 'a', cuts, 'a');
    const b = opened(budget, 'b', cuts, 'b');
    expect(a.take(70) && b.take(30)).toBe(true);
    a.settle();
    // a is above its part (33 of three) but its body is whole: nothing to cut; b (30) is under its part.
    expect(opened(budget, 'c', cuts, 'c').take(10)).toBe(false);
    expect(cuts).toEqual([]);
    expect(budget.inUse).toBe(100);
  });

  it('owes a share at least minShare, however many shares hold bytes', () => {
    const budget = new ByteBudget(100, 40);
    expect(budget.fairShareOf('x')).toBe(100);
    const cuts: string[] = [];
    for (const share of ['a', 'b', 'c', 'd']) opened(budget, share, cuts, share).take(25);
    expect(budget.fairShareOf('e')).toBe(40);
    expect(() => new ByteBudget(100, 101)).toThrow(/1 to 100 bytes/);
  });
});
