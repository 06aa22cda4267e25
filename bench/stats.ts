export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * The range of the values left once the lowest and the highest quarter (rounded down) are dropped: where the
 * middle half of the rounds fell, a spread that one wild round cannot widen as it widens min–max.
 */
export function middleHalf(values: readonly number[]): { low: number; high: number } {
  if (values.length === 0) return { low: Number.NaN, high: Number.NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const dropped = Math.floor(sorted.length / 4);
  return { low: sorted[dropped]!, high: sorted[sorted.length - 1 - dropped]! };
}

/**
 * The two-sided sign test: how likely a split at least as uneven as `above` : `below` is when each round is
 * equally likely to land on either side (no real difference). Ties are left out by the caller.
 */
export function signTestP(above: number, below: number): number {
  const rounds = above + below;
  if (rounds === 0) return 1;
  let tail = 0;
  let ways = 1; // C(rounds, k), built up from C(rounds, 0)
  for (let k = 0; k <= Math.min(above, below); k++) {
    tail += ways;
    ways = (ways * (rounds - k)) / (k + 1);
  }
  return Math.min(1, (2 * tail) / 2 ** rounds);
}
