// Admission: at most `concurrency` calls in flight to an app, a bounded FIFO queue for the rest, and a clear
// refusal beyond it. Async runs take a queue place when accepted, so a 202 is never given without room.
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';

interface Waiter {
  grant: () => void;
  fail: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

export class Admission {
  readonly concurrency: number;
  readonly queueDepth: number;
  #inFlight = 0;
  /** Places taken in the queue: waiters plus reservations (accepted async runs not yet waiting). */
  #queued = 0;
  readonly #waiters: Waiter[] = [];
  #head = 0;
  /** Calls that asked for a slot or a queue place since the start, refused ones included: the demand. */
  #arrivals = 0;
  /** The most calls in flight plus queued since `takePeak` last read it: bursts between two load samples. */
  #peak = 0;

  constructor(concurrency: number, queueDepth = 10 * concurrency) {
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error(`concurrency must be a positive integer, got ${concurrency}`);
    this.concurrency = concurrency;
    this.queueDepth = queueDepth;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get queued(): number {
    return this.#queued;
  }

  get arrivals(): number {
    return this.#arrivals;
  }

  /** The highest in flight plus queued since the last call, then starts over from the present load. */
  takePeak(): number {
    const peak = this.#peak;
    this.#peak = this.#inFlight + this.#queued;
    return peak;
  }

  /** Takes a slot at once if one is free (the fast path: no promise, no queue). */
  tryAcquire(): boolean {
    if (this.#inFlight >= this.concurrency || this.#queued > 0) return false;
    this.#inFlight++;
    this.#arrivals++;
    this.#notePeak();
    return true;
  }

  /** Takes a queue place for a run that will wait later (async acceptance); throws when the queue is full. */
  reserve(): void {
    // Counted once per call: where it took a slot at once (tryAcquire), or where it asked for a queue place.
    this.#arrivals++;
    if (this.#inFlight + this.#queued >= this.concurrency + this.queueDepth) throw this.#full();
    this.#queued++;
    this.#notePeak();
  }

  /** Gives back a reservation that will not be used (the run could not be accepted after all). */
  unreserve(): void {
    this.#queued--;
  }

  /**
   * Waits for a slot in FIFO order. With `reserved`, uses the place taken by `reserve()`; otherwise takes one
   * now, or throws 503 when the queue is full. Rejects with the signal's reason if it aborts while waiting.
   */
  acquire(signal?: AbortSignal, reserved = false): Promise<void> {
    if (!reserved) {
      if (this.tryAcquire()) return Promise.resolve();
      this.#arrivals++;
      if (this.#inFlight + this.#queued >= this.concurrency + this.queueDepth) return Promise.reject(this.#full());
      this.#queued++;
      this.#notePeak();
    }
    if (this.#inFlight < this.concurrency && this.#waiters.length - this.#head === 0) {
      this.#queued--;
      this.#inFlight++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { grant: resolve, fail: reject, signal, onAbort: undefined };
      if (signal) {
        signal.throwIfAborted();
        waiter.onAbort = () => this.#abandon(waiter);
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiters.push(waiter);
    });
  }

  release(): void {
    const waiter = this.#head < this.#waiters.length ? this.#waiters[this.#head++] : undefined;
    this.#compact();
    if (!waiter) {
      this.#inFlight--;
      return;
    }
    // The slot passes straight from the releasing call to the first waiter.
    this.#queued--;
    if (waiter.signal && waiter.onAbort) waiter.signal.removeEventListener('abort', waiter.onAbort);
    waiter.grant();
  }

  #notePeak(): void {
    const load = this.#inFlight + this.#queued;
    if (load > this.#peak) this.#peak = load;
  }

  #abandon(waiter: Waiter): void {
    const index = this.#waiters.indexOf(waiter, this.#head);
    if (index === -1) return;
    this.#waiters.splice(index, 1);
    this.#queued--;
    waiter.fail(waiter.signal?.reason);
  }

  /** Drops consumed entries once they dominate, keeping the queue O(1) amortised without unbounded growth. */
  #compact(): void {
    if (this.#head > 64 && this.#head * 2 > this.#waiters.length) {
      this.#waiters.splice(0, this.#head);
      this.#head = 0;
    }
  }

  #full(): ProblemError {
    return new ProblemError(
      Problems.overCapacity,
      `The app has ${this.#inFlight} calls in flight and ${this.#queued} waiting (limits ${this.concurrency} and ${this.queueDepth}); retry later`,
      { headers: { 'retry-after': '1' } },
    );
  }
}
