// What one holder may hold: calls per App, calls in all, and bytes of their bodies. A spike at one App at zero
// must not take the holder's memory (and, while it runs in the operator pods, the operator with it: leadership,
// reconciles, every other App's holder) — KEDA's HTTP add-on learnt this (coldStart.maxPendingRequests). A call
// past a bound is refused at once, 503 with Retry-After, never after waiting out the cold start.
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { objectKey } from '../kube/watch.ts';
import { RequestBudget } from '../run-request/request-budget.ts';

export interface HoldLimits {
  /** Calls one App may have in the holder: waiting for a replica, or relayed to one and not yet answered. */
  callsPerApp: number;
  /** Calls all Apps together may have in the holder. */
  calls: number;
  /** Bytes of held calls' bodies, arriving or kept for their hand-over, all Apps together. */
  bodyBytes: number;
}

/**
 * 1,000 held calls cost the holder about 35 MB besides their bodies (bench/results.md, holder-memory), and the
 * bodies at most 64 MiB: together about a fifth of the operator pod's 512 Mi. One App may take a quarter of the
 * calls, so a burst at one App leaves room for three others'.
 */
export const DEFAULT_HOLD_LIMITS: Readonly<HoldLimits> = { callsPerApp: 250, calls: 1000, bodyBytes: 64 * 1024 * 1024 };

/** How long a caller refused for a bound is asked to wait: about a cold start, by when the app takes calls itself. */
const RETRY_AFTER_SECONDS = '5';

/** A call's place in the holder, given back once the call leaves it (answered, refused, or handed over). */
export interface HeldPlace {
  release(): void;
}

export class HoldBounds {
  readonly limits: Readonly<HoldLimits>;
  /** Shared by every held call's body, as it arrives and while it is kept (request-body.ts reads against it). */
  readonly bodies: RequestBudget;
  #calls = 0;
  readonly #perApp = new Map<string, number>();

  constructor(limits: Readonly<HoldLimits>) {
    for (const [name, value] of Object.entries(limits)) {
      if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`the holder's limit ${name} must be a positive integer, got ${value}`);
    }
    this.limits = limits;
    this.bodies = new RequestBudget(limits.bodyBytes);
  }

  /** Calls in the holder now, all Apps together. */
  get calls(): number {
    return this.#calls;
  }

  /** A place for a call to the App, or 503 over-capacity when a bound is reached. */
  take(namespace: string, app: string): HeldPlace {
    const key = objectKey(namespace, app);
    const appCalls = this.#perApp.get(key) ?? 0;
    if (appCalls >= this.limits.callsPerApp) {
      throw full(`The holder has ${appCalls} calls to "${app}" waiting for a replica, its limit per app; this one was not run. Retry once the app is up`);
    }
    if (this.#calls >= this.limits.calls) {
      throw full(`The holder has ${this.#calls} calls waiting for replicas, its limit; this one was not run. Retry shortly`);
    }
    return this.takeAnyway(namespace, app);
  }

  /** A place past the bounds: for a call accepted already (an async call's record found after a restart). */
  takeAnyway(namespace: string, app: string): HeldPlace {
    const key = objectKey(namespace, app);
    this.#perApp.set(key, (this.#perApp.get(key) ?? 0) + 1);
    this.#calls += 1;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#calls -= 1;
        const left = (this.#perApp.get(key) ?? 1) - 1;
        if (left === 0) this.#perApp.delete(key);
        else this.#perApp.set(key, left);
      },
    };
  }
}

function full(detail: string): ProblemError {
  return new ProblemError(Problems.overCapacity, detail, { headers: { 'retry-after': RETRY_AFTER_SECONDS } });
}
