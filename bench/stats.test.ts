import { describe, expect, it } from 'vitest';
import { median, middleHalf, signTestP } from './stats.ts';

describe('median', () => {
  it('takes the middle value of an odd count and the mean of the two middle values of an even one, in any order', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
});

describe('middleHalf', () => {
  it('drops the lowest and highest quarter, rounded down, and spans the rest', () => {
    expect(middleHalf([8, 1, 7, 2, 6, 3, 5, 4])).toEqual({ low: 3, high: 6 });
    // 10 rounds: 2 dropped at each end, 6 kept.
    expect(middleHalf([10, 9, 8, 7, 6, 5, 4, 3, 2, 1])).toEqual({ low: 3, high: 8 });
  });

  it('keeps every value when there are too few to drop a quarter, and is empty for none', () => {
    expect(middleHalf([2, 1, 3])).toEqual({ low: 1, high: 3 });
    expect(middleHalf([1.5])).toEqual({ low: 1.5, high: 1.5 });
    expect(middleHalf([])).toEqual({ low: Number.NaN, high: Number.NaN });
  });

  it('is not widened by one wild round', () => {
    expect(middleHalf([1.0, 1.01, 0.99, 1.02, 0.98, 1.03, 0.97, 3.0])).toEqual({ low: 0.99, high: 1.02 });
  });
});

describe('signTestP', () => {
  it('is the two-sided binomial tail of the rarer side', () => {
    // 8 of 8 on one side: 2 × (1/256).
    expect(signTestP(8, 0)).toBeCloseTo(2 / 256, 12);
    expect(signTestP(0, 8)).toBeCloseTo(2 / 256, 12);
    // 8 : 2 → 2 × (C(10,0) + C(10,1) + C(10,2)) / 1024.
    expect(signTestP(8, 2)).toBeCloseTo((2 * (1 + 10 + 45)) / 1024, 12);
  });

  it('is 1 for an even split or no rounds at all', () => {
    expect(signTestP(4, 4)).toBe(1);
    expect(signTestP(5, 4)).toBe(1);
    expect(signTestP(0, 0)).toBe(1);
  });
});
