// The runs this sidecar is executing: what drain waits for, and where run time limits are enforced.
// One coarse sweep stops overdue runs, so the hot path arms no timer per request.
import type { CallStopper } from './runtimes/runtime-connections.ts';
import type { FailureReason, RunRecord } from '../crds/run-record-schema.ts';

const SWEEP_INTERVAL_MS = 250;

/** A run in flight; it stops its runtime call itself (CallStopper), and gives an AbortSignal to those that need one. */
export class ActiveRun implements CallStopper {
  readonly record: RunRecord;
  /** When the run's time limit passes, on the `performance.now()` clock. */
  readonly deadline: number;
  /** Made on first use: a Python sync run, the common one, never needs it. */
  #abort: AbortController | null = null;
  #stopReason: Error | null = null;
  /** Set when the platform stopped the run; distinguishes timeout/shutdown from a runtime failure. */
  stoppedFor: FailureReason | null = null;
  /**
   * The run waited in the queue (every async run does): should the runtime be down when its turn comes, it waits
   * for the runtime's return, within its own time limit, rather than fail. A call that arrives while the runtime
   * is down is answered 503 at once instead.
   */
  waitsForRuntime = false;
  onStop: ((reason: Error) => void) | null = null;

  constructor(record: RunRecord, deadline: number) {
    this.record = record;
    this.deadline = deadline;
  }

  get stopReason(): Error | null {
    return this.#stopReason;
  }

  /** Aborted when the run is stopped (the queue wait, a stream's writes, a custom app's request use it). */
  get signal(): AbortSignal {
    if (this.#abort === null) {
      this.#abort = new AbortController();
      if (this.#stopReason) this.#abort.abort(this.#stopReason);
    }
    return this.#abort.signal;
  }

  stop(reason: FailureReason): void {
    if (this.stoppedFor) return;
    this.stoppedFor = reason;
    this.#stopReason = new Error(`run ${this.record.id} stopped: ${reason}`);
    this.#abort?.abort(this.#stopReason);
    this.onStop?.(this.#stopReason);
  }
}

export class ActiveRuns {
  readonly #runs = new Set<ActiveRun>();
  readonly #idleWaiters: Array<() => void> = [];
  #sweeper: NodeJS.Timeout | null = null;

  get size(): number {
    return this.#runs.size;
  }

  add(run: ActiveRun): void {
    this.#runs.add(run);
    if (!this.#sweeper) {
      this.#sweeper = setInterval(() => this.#stopOverdue(), SWEEP_INTERVAL_MS);
      this.#sweeper.unref();
    }
  }

  delete(run: ActiveRun): void {
    if (!this.#runs.delete(run) || this.#runs.size > 0) return;
    if (this.#sweeper) {
      clearInterval(this.#sweeper);
      this.#sweeper = null;
    }
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }

  /** Resolves when no run is active. */
  idle(): Promise<void> {
    if (this.#runs.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  stopAll(reason: FailureReason): void {
    for (const run of this.#runs) run.stop(reason);
  }

  #stopOverdue(): void {
    const now = performance.now();
    for (const run of this.#runs) if (run.deadline <= now) run.stop('timeout');
  }
}
