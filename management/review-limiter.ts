// How much of the Kubernetes API server the management API's token checks may use, whatever callers send: a
// bound on reviews in flight, and a token bucket on reviews started. Every distinct bogus bearer token needs a
// review to be told apart from a real one, so without these a caller sending new tokens as fast as it can
// would have the API server asked as fast as it can. A review refused here is answered 503 + Retry-After.
//
// Tokens the cluster allowed recently ("known" tokens, whose allowed decision has only expired) are re-reviewed
// outside the bucket and may use slots that unknown tokens cannot take, so a flood of bogus tokens does not
// lock out the callers who were already being served. They cannot flood: each is re-reviewed at most once per
// decision TTL, and only tokens the cluster allowed are known.

export interface ReviewLimits {
  /** Reviews in flight at most (a TokenReview, then maybe a SubjectAccessReview, each). */
  maxInFlight: number;
  /** Reviews of unknown tokens started per second on average. */
  perSecond: number;
  /** Reviews of unknown tokens that may start at once after a quiet spell. */
  burst: number;
}

/**
 * The management API's: a handful of API-server calls at a time, and enough reviews per second for some 600
 * callers with distinct tokens each re-reviewed every 30 s.
 */
export const REVIEW_LIMITS: ReviewLimits = { maxInFlight: 8, perSecond: 20, burst: 40 };

export type Admission = { admitted: true } | { admitted: false; retryAfterSeconds: number };

const ADMITTED: Admission = { admitted: true };
/** A slot frees as soon as a review in flight is answered: ask again shortly. */
const FULL: Admission = { admitted: false, retryAfterSeconds: 1 };

export class ReviewLimiter {
  readonly #limits: ReviewLimits;
  /** Slots that only known tokens may take: a quarter of them. */
  readonly #reservedForKnown: number;
  readonly #now: () => number;
  #inFlight = 0;
  #bucket: number;
  #filledAt: number;

  /** `now`: milliseconds on a monotonic clock. */
  constructor(limits: ReviewLimits, now: () => number) {
    for (const [name, value] of Object.entries(limits)) {
      if (!(value > 0)) throw new RangeError(`review limit ${name} must be positive, got ${value}`);
    }
    if (!Number.isInteger(limits.maxInFlight)) throw new RangeError(`review limit maxInFlight must be an integer, got ${limits.maxInFlight}`);
    this.#limits = limits;
    this.#reservedForKnown = Math.floor(limits.maxInFlight / 4);
    this.#now = now;
    this.#bucket = limits.burst;
    this.#filledAt = now();
  }

  /** Whether a review may start now; when it is admitted, `finish()` must follow once it is answered. */
  tryStart(known: boolean): Admission {
    const slots = known ? this.#limits.maxInFlight : this.#limits.maxInFlight - this.#reservedForKnown;
    if (this.#inFlight >= slots) return FULL;
    if (!known) {
      this.#refill();
      if (this.#bucket < 1) return { admitted: false, retryAfterSeconds: Math.ceil((1 - this.#bucket) / this.#limits.perSecond) };
      this.#bucket -= 1;
    }
    this.#inFlight += 1;
    return ADMITTED;
  }

  finish(): void {
    this.#inFlight -= 1;
  }

  #refill(): void {
    const now = this.#now();
    this.#bucket = Math.min(this.#limits.burst, this.#bucket + ((now - this.#filledAt) / 1000) * this.#limits.perSecond);
    this.#filledAt = now;
  }
}
