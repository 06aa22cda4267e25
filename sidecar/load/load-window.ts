// The last second of a replica's load, as a fixed ring of samples: what the autoscaler reads is an average
// and a peak over the window, so that no single instant decides, and the rate of arrivals across it.
// Typed arrays allocated once: sampling ten times a second allocates nothing.

export class LoadWindow {
  readonly #size: number;
  /** When each sample was taken (monotonic ms). */
  readonly #at: Float64Array;
  /** Calls in flight plus queued at the sample. */
  readonly #concurrency: Float64Array;
  /** The most in flight plus queued between the previous sample and this one. */
  readonly #peak: Float64Array;
  /** Calls arrived since the replica started, at the sample. */
  readonly #arrivals: Float64Array;
  #next = 0;
  #count = 0;

  /** `size` samples: over a window of `size - 1` sampling intervals. */
  constructor(size: number) {
    if (!Number.isInteger(size) || size < 2) throw new Error(`a load window needs at least 2 samples, got ${size}`);
    this.#size = size;
    this.#at = new Float64Array(size);
    this.#concurrency = new Float64Array(size);
    this.#peak = new Float64Array(size);
    this.#arrivals = new Float64Array(size);
  }

  /** Adds a sample, replacing the oldest once the window is full. */
  add(at: number, concurrency: number, peak: number, arrivals: number): void {
    const index = this.#next;
    this.#at[index] = at;
    this.#concurrency[index] = concurrency;
    this.#peak[index] = Math.max(peak, concurrency);
    this.#arrivals[index] = arrivals;
    this.#next = (index + 1) % this.#size;
    if (this.#count < this.#size) this.#count += 1;
  }

  /** Mean of the samples' concurrency; 0 before the first sample. */
  get averageConcurrency(): number {
    let sum = 0;
    for (let i = 0; i < this.#count; i += 1) sum += this.#concurrency[i]!;
    return this.#count === 0 ? 0 : sum / this.#count;
  }

  /** The highest concurrency the samples saw, between them included. */
  get peakConcurrency(): number {
    let peak = 0;
    for (let i = 0; i < this.#count; i += 1) peak = Math.max(peak, this.#peak[i]!);
    return peak;
  }

  /** Arrivals per second between the oldest sample and the newest; 0 until there are two. */
  get requestsPerSecond(): number {
    if (this.#count < 2) return 0;
    const newest = (this.#next + this.#size - 1) % this.#size;
    const oldest = this.#count < this.#size ? 0 : this.#next;
    const spanMs = this.#at[newest]! - this.#at[oldest]!;
    return spanMs <= 0 ? 0 : ((this.#arrivals[newest]! - this.#arrivals[oldest]!) * 1000) / spanMs;
  }
}
