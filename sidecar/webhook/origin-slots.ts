// At most `perOrigin` webhook attempts in flight to one receiver origin; the others wait here, first come first
// served. The deliverer takes a slot before it starts an attempt's timer and sizes undici's pool to the same
// number of connections per origin, so an attempt holding a slot never queues inside undici: its timeout
// measures the receiver (connect, send, answer), not the time spent behind other deliveries to the same
// receiver. A receiver slower than the pool drains gets its deliveries late, in order, rather than timed out.

/** A slot to send one attempt to an origin; `release()` once its answer is read or it failed (idempotent). */
export interface OriginSlot {
  release(): void;
}

interface Origin {
  busy: number;
  /** Attempts waiting for a slot, in arrival order. */
  waiters: Array<(slot: OriginSlot) => void>;
}

export class OriginSlots {
  readonly #perOrigin: number;
  /** Only origins with an attempt in flight or waiting. */
  readonly #origins = new Map<string, Origin>();

  constructor(perOrigin: number) {
    if (!Number.isInteger(perOrigin) || perOrigin < 1) throw new RangeError(`connections per origin must be a positive integer, not ${perOrigin}`);
    this.#perOrigin = perOrigin;
  }

  /** A slot for `origin`, or null when none came free within `timeoutMs` or `signal` aborted first. */
  acquire(origin: string, timeoutMs: number, signal: AbortSignal): Promise<OriginSlot | null> {
    if (signal.aborted) return Promise.resolve(null);
    let state = this.#origins.get(origin);
    if (state === undefined) this.#origins.set(origin, (state = { busy: 0, waiters: [] }));
    if (state.busy < this.#perOrigin) {
      state.busy += 1;
      return Promise.resolve(this.#slot(origin, state));
    }
    const waiting = state;
    return new Promise((resolve) => {
      const leave = (): void => {
        waiting.waiters.splice(waiting.waiters.indexOf(take), 1);
        settle(null);
      };
      const take = (slot: OriginSlot): void => settle(slot);
      const settle = (slot: OriginSlot | null): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', leave);
        resolve(slot);
      };
      const timer = setTimeout(leave, timeoutMs);
      signal.addEventListener('abort', leave, { once: true });
      waiting.waiters.push(take);
    });
  }

  /** Attempts in flight and waiting for `origin` (for tests). */
  usage(origin: string): { busy: number; waiting: number } {
    const state = this.#origins.get(origin);
    return { busy: state?.busy ?? 0, waiting: state?.waiters.length ?? 0 };
  }

  #slot(origin: string, state: Origin): OriginSlot {
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const next = state.waiters.shift();
        // Handed straight to the next waiter: the slot stays busy, and no later arrival can take it first.
        if (next !== undefined) return next(this.#slot(origin, state));
        state.busy -= 1;
        if (state.busy === 0) this.#origins.delete(origin);
      },
    };
  }
}
