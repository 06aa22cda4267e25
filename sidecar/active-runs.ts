// The runs this sidecar is executing: what drain waits for, and where run time limits are enforced.
// One coarse sweep stops overdue runs, and runs whose caller has stopped reading, so the hot path arms no
// timer per request.
import type { Socket } from 'node:net';
import { CallerProgress } from './caller-progress.ts';
import type { CallStopper } from './runtimes/runtime-connections.ts';
import type { FailureReason, RunRecord } from '../crds/run-record-schema.ts';

const SWEEP_INTERVAL_MS = 250;

/**
 * How long a caller may read nothing of an answer written as it comes before its run is stopped
 * (`client_stalled`). A minute is far past any pause of a working client (a browser tab in the background is
 * still read by its network stack), and a slot held that long by no one is what it costs at most.
 */
export const DEFAULT_CLIENT_STALL_TIMEOUT_MS = 60_000;

/** A run in flight; it stops its runtime call itself (CallStopper), and gives an AbortSignal to those that need one. */
export class ActiveRun implements CallStopper {
  readonly record: RunRecord;
  /** When the run's time limit passes, on the `performance.now()` clock. */
  readonly deadline: number;
  /** Made on first use: a Python sync run, the common one, never needs it. */
  #abort: AbortController | null = null;
  #stopReason: Error | null = null;
  /** The caller's socket, once the answer is written as it comes; null for a plain answer, written at once. */
  #caller: CallerProgress | null = null;
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

  /** The answer is written into `socket` as it comes: a caller that stops reading it stops the run. */
  watchCaller(socket: Socket | null): void {
    if (socket !== null && this.#caller === null) this.#caller = new CallerProgress(socket, performance.now());
  }

  /** How long the caller has read nothing of what waits for it, in ms (0 when not watched). */
  callerStalledFor(now: number): number {
    return this.#caller?.stalledFor(now) ?? 0;
  }

  /** The run left the replica: its caller is watched no more. */
  release(): void {
    this.#caller?.stop();
    this.#caller = null;
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
  /** By run id: a cancel finds its run here. */
  readonly #runs = new Map<string, ActiveRun>();
  readonly #clientStallMs: number;
  readonly #idleWaiters: Array<() => void> = [];
  #sweeper: NodeJS.Timeout | null = null;

  /** `clientStallMs`: a run whose caller reads nothing this long is stopped (`client_stalled`). */
  constructor(clientStallMs = DEFAULT_CLIENT_STALL_TIMEOUT_MS) {
    this.#clientStallMs = clientStallMs;
  }

  get size(): number {
    return this.#runs.size;
  }

  add(run: ActiveRun): void {
    this.#runs.set(run.record.id, run);
    if (!this.#sweeper) {
      this.#sweeper = setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS);
      this.#sweeper.unref();
    }
  }

  delete(run: ActiveRun): void {
    run.release();
    if (this.#runs.get(run.record.id) !== run) return;
    this.#runs.delete(run.record.id);
    if (this.#runs.size > 0) return;
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
    for (const run of this.#runs.values()) run.stop(reason);
  }

  /**
   * Asks the run with this id to stop (`cancel_requested`) when it is in flight here for this app and has not
   * ended: returns a copy of its record then, and why it is stopping (a run already stopping for another reason
   * ends with that one), else null.
   */
  cancel(projectId: string, appName: string, runId: string): { record: RunRecord; stoppedFor: FailureReason } | null {
    const run = this.#runs.get(runId);
    if (run === undefined || run.record.projectId !== projectId || run.record.appName !== appName) return null;
    if (run.record.completedAt !== null) return null;
    run.stop('cancel_requested');
    return { record: structuredClone(run.record), stoppedFor: run.stoppedFor ?? 'cancel_requested' };
  }

  /** Stops the runs past their time limit, and those whose caller has read nothing for the stall bound. */
  #sweep(): void {
    const now = performance.now();
    for (const run of this.#runs.values()) {
      if (run.deadline <= now) run.stop('timeout');
      else if (run.callerStalledFor(now) >= this.#clientStallMs) run.stop('client_stalled');
    }
  }
}
