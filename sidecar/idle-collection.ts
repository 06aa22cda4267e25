// Gives a busy period's heap back once the sidecar is idle again. V8's own memory reducer starts a cycle only
// after a full collection that grew the committed heap by 10 MB or more over what its last cycle left: loads that
// come back at about the same size find the heap already grown, and it stays there between them (98 MB of RSS in
// `make bench`, 77 once collected). So once the event loop has been busy and then idle for 15 s, the
// sidecar asks V8 for one memory-reducing collection: `gc`, which the pod's NODE_OPTIONS expose with
// --expose-gc (operator/render/sidecar-container.ts). Without the flag this does nothing, and the memory reducer
// nudge (memory-reducer-nudge.ts) is what helps. Once per busy period, never while calls keep the loop busy: the
// pause (10–30 ms for the sidecar's heap) falls where nothing waits, or delays by as much a call arriving in it.
// Not sooner than 15 s: the next load then starts on a small heap, which V8 grows again over its first seconds
// (6% more CPU per run in `make bench`'s warm-path A/B, whose loads of one sidecar come 6 s apart, at 5 s).
// The global `performance` (loaded already, for performance.now()), not node:perf_hooks: that module costs ~1 MB.
import type { EventLoopUtilization } from 'node:perf_hooks';

export interface IdleCollectionOptions {
  /** A read above this utilization (0–1) makes the period busy. */
  busyAbove?: number;
  /** Reads below this count as idle. */
  idleBelow?: number;
  /** Idle reads in a row, after a busy one, before the collection. */
  idleReads?: number;
  /** Time between reads. */
  intervalMs?: number;
}

/** Fed one utilization read at a time; says when a busy period has been followed by enough idle ones. */
export class IdleCollectionPolicy {
  readonly #busyAbove: number;
  readonly #idleBelow: number;
  readonly #idleReads: number;
  #busySinceCollection = false;
  #idleInARow = 0;

  constructor(options: IdleCollectionOptions = {}) {
    this.#busyAbove = options.busyAbove ?? 0.05;
    this.#idleBelow = options.idleBelow ?? 0.01;
    this.#idleReads = options.idleReads ?? 15;
  }

  /** One read of the event loop's utilization (0–1); true when the collection is due now. */
  read(utilization: number): boolean {
    if (utilization > this.#busyAbove) {
      this.#busySinceCollection = true;
      this.#idleInARow = 0;
      return false;
    }
    this.#idleInARow = utilization < this.#idleBelow ? this.#idleInARow + 1 : 0;
    if (!this.#busySinceCollection || this.#idleInARow < this.#idleReads) return false;
    this.#busySinceCollection = false;
    this.#idleInARow = 0;
    return true;
  }
}

/** V8's `gc` with options (--expose-gc): 'last-resort' is its memory-reducing full collection. */
type ExposedGc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** Whether this process was started with --expose-gc. */
export function gcExposed(): boolean {
  return typeof (globalThis as { gc?: unknown }).gc === 'function';
}

/** Starts the reads, or nothing without --expose-gc; `stop` ends them. */
export function collectWhenIdle(options: IdleCollectionOptions = {}): { stop(): void } {
  const gc = (globalThis as { gc?: ExposedGc }).gc;
  if (gc === undefined) return { stop: () => undefined };
  const policy = new IdleCollectionPolicy(options);
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    if (!policy.read(utilization)) return;
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  }, options.intervalMs ?? 1000);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
