// What one holder may hold: calls per App, calls per namespace, calls in all, and bytes of their bodies (in all,
// and per namespace). A spike at one App at zero must not take the holder's memory (and, while it runs in the
// operator pods, the operator with it: leadership, reconciles, every other App's holder) — KEDA's HTTP add-on
// learnt this (coldStart.maxPendingRequests). Nor may one tenant take every place: each namespace gets a share
// of the calls and of the bytes, so that a namespace holding all it may cannot get another namespace's first
// call refused. A call past a bound is refused at once, 503 with Retry-After, never after waiting out the cold
// start; the refusal names the bound.
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { objectKey } from '../kube/watch.ts';
import { RequestBudget } from '../run-request/request-budget.ts';

export interface HoldLimits {
  /** Calls one App may have in the holder: waiting for a replica, or relayed to one and not yet answered. */
  callsPerApp: number;
  /**
   * Calls the Apps of one namespace may have in the holder together; at most `calls` (equal: no share per
   * namespace, for a cluster of one tenant). Default: half of `calls`.
   */
  callsPerNamespace?: number;
  /** Calls all Apps together may have in the holder. */
  calls: number;
  /** Bytes of held calls' bodies, arriving or kept for their hand-over, all Apps together; one namespace's at most half. */
  bodyBytes: number;
}

/**
 * 1,000 held calls cost the holder about 35 MB besides their bodies (bench/results.md, holder-memory), and the
 * bodies at most 64 MiB: together about a fifth of the operator pod's 512 Mi. One App may take a quarter of the
 * calls, so a burst at one App leaves room for three others'; one namespace half, so a tenant's burst leaves the
 * other half to the others.
 */
export const DEFAULT_HOLD_LIMITS: Readonly<HoldLimits> = { callsPerApp: 250, calls: 1000, bodyBytes: 64 * 1024 * 1024 };

/** Which bound refused a call: the label `bound` of runlet_holder_refusals_total. */
export type HoldBound = 'calls_per_app' | 'calls_per_namespace' | 'calls' | 'body_bytes_per_namespace' | 'body_bytes';

/** How long a caller refused for a bound is asked to wait: about a cold start, by when the app takes calls itself. */
const RETRY_AFTER_SECONDS = '5';

/** A call's place in the holder, given back once the call leaves it (answered, refused, or handed over). */
export interface HeldPlace {
  release(): void;
}

/** A refusal for one of the holder's bounds, 503 over-capacity: `bound` says which. */
export class HoldBoundError extends ProblemError {
  readonly bound: HoldBound;

  constructor(bound: HoldBound, detail: string) {
    super(Problems.overCapacity, detail, { headers: { 'retry-after': RETRY_AFTER_SECONDS } });
    this.bound = bound;
  }
}

/**
 * One namespace's share of the bodies' bytes, drawn from the holder's shared budget: a take must fit both. What
 * refused the last take that failed (its share, or the shared budget) is kept for the refusal's metric.
 */
export class NamespaceBodyBudget extends RequestBudget {
  readonly #shared: RequestBudget;
  #refusedBy: HoldBound | undefined;

  constructor(shareBytes: number, shared: RequestBudget) {
    super(shareBytes);
    this.#shared = shared;
  }

  /** Which bound refused the last take that failed: this namespace's share, or the holder's in all. */
  get refusedBy(): HoldBound | undefined {
    return this.#refusedBy;
  }

  override take(bytes: number): boolean {
    if (!super.take(bytes)) {
      this.#refusedBy = 'body_bytes_per_namespace';
      return false;
    }
    if (!this.#shared.take(bytes)) {
      super.give(bytes);
      this.#refusedBy = 'body_bytes';
      return false;
    }
    return true;
  }

  override takeAnyway(bytes: number): void {
    super.takeAnyway(bytes);
    this.#shared.takeAnyway(bytes);
  }

  override give(bytes: number): void {
    super.give(bytes);
    this.#shared.give(bytes);
  }
}

export class HoldBounds {
  readonly limits: Readonly<Required<HoldLimits>>;
  /** Shared by every held call's body: the namespaces' budgets draw from it. */
  readonly #bodies: RequestBudget;
  readonly #namespaceBodies = new Map<string, NamespaceBodyBudget>();
  #calls = 0;
  readonly #perApp = new Map<string, number>();
  readonly #perNamespace = new Map<string, number>();

  constructor(limits: Readonly<HoldLimits>) {
    const complete = { ...limits, callsPerNamespace: limits.callsPerNamespace ?? Math.max(1, Math.floor(limits.calls / 2)) };
    for (const [name, value] of Object.entries(complete)) {
      if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`the holder's limit ${name} must be a positive integer, got ${value}`);
    }
    if (complete.callsPerNamespace > complete.calls) throw new RangeError(`the holder's limit callsPerNamespace (${complete.callsPerNamespace}) must be at most its limit calls (${complete.calls})`);
    this.limits = complete;
    this.#bodies = new RequestBudget(complete.bodyBytes);
  }

  /** Calls in the holder now, all Apps together. */
  get calls(): number {
    return this.#calls;
  }

  /** Bytes of held bodies now, all namespaces together. */
  get bodyBytes(): number {
    return this.#bodies.usedBytes;
  }

  /**
   * The namespace's budget for its held calls' bodies (request-body.ts reads against it): half the holder's
   * bytes at most, so that one namespace's bodies leave room for another's. Kept for good: one per namespace
   * with an App a call reached, and a reader may still hold it.
   */
  bodies(namespace: string): NamespaceBodyBudget {
    let budget = this.#namespaceBodies.get(namespace);
    if (budget === undefined) {
      budget = new NamespaceBodyBudget(Math.max(1, Math.floor(this.limits.bodyBytes / 2)), this.#bodies);
      this.#namespaceBodies.set(namespace, budget);
    }
    return budget;
  }

  /** A place for a call to the App, or 503 over-capacity naming the bound reached. */
  take(namespace: string, app: string): HeldPlace {
    const appCalls = this.#perApp.get(objectKey(namespace, app)) ?? 0;
    if (appCalls >= this.limits.callsPerApp) {
      throw new HoldBoundError('calls_per_app', `The holder has ${appCalls} calls to "${app}" waiting for a replica, its limit per app; this one was not run. Retry once the app is up`);
    }
    const namespaceCalls = this.#perNamespace.get(namespace) ?? 0;
    if (namespaceCalls >= this.limits.callsPerNamespace) {
      throw new HoldBoundError(
        'calls_per_namespace',
        `The holder has ${namespaceCalls} calls to the apps of namespace "${namespace}" waiting for replicas, its limit per namespace; this one was not run. Retry once the apps are up`,
      );
    }
    if (this.#calls >= this.limits.calls) {
      throw new HoldBoundError('calls', `The holder has ${this.#calls} calls waiting for replicas, its limit; this one was not run. Retry shortly`);
    }
    return this.takeAnyway(namespace, app);
  }

  /** A place past the bounds: for a call accepted already (an async call's record found after a restart). */
  takeAnyway(namespace: string, app: string): HeldPlace {
    const key = objectKey(namespace, app);
    this.#perApp.set(key, (this.#perApp.get(key) ?? 0) + 1);
    this.#perNamespace.set(namespace, (this.#perNamespace.get(namespace) ?? 0) + 1);
    this.#calls += 1;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#calls -= 1;
        decrement(this.#perApp, key);
        decrement(this.#perNamespace, namespace);
      },
    };
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left === 0) counts.delete(key);
  else counts.set(key, left);
}
