// Time windows over the autoscaler's inputs and decisions. Times are milliseconds on any clock that does not
// go backwards; the caller passes them in, so the windows hold no clock of their own.

interface Bucket {
  index: number;
  sum: number;
  count: number;
}

/**
 * The average of samples over the last few seconds, in buckets of `bucketMs` (Knative's TimedFloat64Buckets).
 * A bucket's value is the mean of the samples that fell in it, so the average does not depend on how often
 * samples come. Unlike Knative, a bucket without samples does not count as a zero: no sample means nothing was
 * measured (a leader that just started, a gap in the reports), not that there was no load.
 */
export class AveragingWindow {
  readonly #bucketMs: number;
  readonly #retainedBuckets: number;
  /** Oldest first; at most `#retainedBuckets` of them. */
  readonly #buckets: Bucket[] = [];

  constructor(retentionMs: number, bucketMs: number) {
    this.#bucketMs = bucketMs;
    this.#retainedBuckets = Math.ceil(retentionMs / bucketMs);
  }

  record(at: number, value: number): void {
    const index = Math.floor(at / this.#bucketMs);
    const last = this.#buckets.at(-1);
    if (last !== undefined && index <= last.index) {
      // A late sample (they come in order almost always) joins its bucket; one for a bucket that holds
      // nothing, or no longer exists, is dropped: the window has moved on from that moment.
      const bucket = this.#buckets.findLast((candidate) => candidate.index === index);
      if (bucket !== undefined) {
        bucket.sum += value;
        bucket.count += 1;
      }
      return;
    }
    this.#buckets.push({ index, sum: value, count: 1 });
    this.#prune(index);
  }

  /** The mean over the buckets of the last `windowMs` up to `now` that hold samples; undefined if none does. */
  average(now: number, windowMs: number): number | undefined {
    return this.#mean(now, windowMs, 0);
  }

  /**
   * The mean over the same buckets as `average`, each weighted by how recent it is: the newest by `smoothing`,
   * each older one by (1 - smoothing) times the next newer one's weight (Knative's WeightedFloat64Buckets,
   * its `weightedExponential` aggregation). Normalised over the buckets that hold samples, so a bucket without
   * any still counts for nothing rather than as a zero. Undefined if no bucket of the window holds a sample.
   */
  weightedAverage(now: number, windowMs: number, smoothing: number): number | undefined {
    const mean = this.#mean(now, windowMs, smoothing);
    // Rounded as Knative rounds its averages (6 digits): a steady load of 5 must read 5, not 5.000000000000001,
    // which would ask for a replica more wherever load ÷ target is a whole number.
    return mean === undefined ? undefined : Math.round(mean * 1e6) / 1e6;
  }

  /** Each bucket's mean weighted by (1 - smoothing) ** its age in buckets: smoothing 0 weighs them alike. */
  #mean(now: number, windowMs: number, smoothing: number): number | undefined {
    const newest = Math.floor(now / this.#bucketMs);
    const oldest = newest - Math.ceil(windowMs / this.#bucketMs) + 1;
    let total = 0;
    let weights = 0;
    for (let i = this.#buckets.length - 1; i >= 0; i--) {
      const bucket = this.#buckets[i]!;
      if (bucket.index < oldest) break;
      if (bucket.index > newest) continue;
      const weight = (1 - smoothing) ** (newest - bucket.index);
      total += (weight * bucket.sum) / bucket.count;
      weights += weight;
    }
    return weights === 0 ? undefined : total / weights;
  }

  clear(): void {
    this.#buckets.length = 0;
  }

  #prune(newestIndex: number): void {
    const keepFrom = newestIndex - this.#retainedBuckets + 1;
    let drop = 0;
    while (drop < this.#buckets.length && this.#buckets[drop]!.index < keepFrom) drop++;
    if (drop > 0) this.#buckets.splice(0, drop);
  }
}

/**
 * Knative's smoothing for a weighted window of `buckets` buckets (aggregation/bucketing.go,
 * computeSmoothingCoeff): the weights of the window's buckets add up to at least 99.99 % of all, with the newest
 * weighing at least 0.2. For the 6 one-second buckets of the panic window: 0.785, so the newest second weighs
 * 78.5 %, the one before 16.9 %, and the quiet seconds before a burst hardly at all.
 */
export function smoothingFor(buckets: number): number {
  return Math.max(1 - (1 - 0.9999) ** (1 / buckets), 0.2);
}

/**
 * The largest value recorded in the last `windowMs` (Knative's max.TimeWindow, behind its scale-down delay):
 * a monotone queue, so each value is pushed and dropped once.
 */
export class MaxWindow {
  readonly #windowMs: number;
  /** Decreasing values, oldest first: a value is dropped once a larger one comes after it. */
  readonly #entries: { at: number; value: number }[] = [];
  #firstAt: number | undefined;

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  record(at: number, value: number): void {
    this.#firstAt ??= at;
    while (this.#entries.length > 0 && this.#entries.at(-1)!.value <= value) this.#entries.pop();
    this.#entries.push({ at, value });
  }

  /** The largest value recorded in (now - windowMs, now]; undefined when none is. */
  max(now: number): number | undefined {
    while (this.#entries.length > 0 && this.#entries[0]!.at <= now - this.#windowMs) this.#entries.shift();
    return this.#entries[0]?.value;
  }

  /** Whether the values recorded reach back a whole window: before that, the maximum may miss a larger value. */
  coversWindow(now: number): boolean {
    return this.#firstAt !== undefined && now - this.#firstAt >= this.#windowMs;
  }

  clear(): void {
    this.#entries.length = 0;
    this.#firstAt = undefined;
  }
}
