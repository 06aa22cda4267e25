// A replica's load, measured: its admission sampled every `intervalMs` into a window of `windowMs`, reduced
// to the RunLog's `load` (crds/runlog-schema.ts). The per-request cost stays in Admission's counters; this
// runs on a timer, unref'd so it never keeps the process alive, and stopped with the sidecar.
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import type { ReplicaLoadSource } from './load-source.ts';
import { LoadWindow } from './load-window.ts';

/** What the meter reads: an app's Admission. */
export interface LoadGauge {
  readonly concurrency: number;
  readonly inFlight: number;
  readonly queued: number;
  /** Calls arrived since the start. */
  readonly arrivals: number;
  /** The highest in flight plus queued since the last call. */
  takePeak(): number;
}

export interface LoadClock {
  /** Monotonic milliseconds, for the rate. */
  now(): number;
  /** Epoch milliseconds, for `sampledAt`. */
  wallNow(): number;
}

export interface LoadMeterOptions {
  /** Default 100 ms. */
  intervalMs?: number;
  /** What the average, the peak and the rate cover. Default 1000 ms. */
  windowMs?: number;
  /** Default `performance.now()` and `Date.now()`. */
  clock?: LoadClock;
}

const realClock: LoadClock = { now: () => performance.now(), wallNow: () => Date.now() };

/** Two decimals: fine enough for a scaler, coarse enough that a steady load reads the same twice. */
function rounded(value: number): number {
  return Math.round(value * 100) / 100;
}

export class LoadMeter implements ReplicaLoadSource {
  readonly #gauge: LoadGauge;
  readonly #intervalMs: number;
  readonly #clock: LoadClock;
  readonly #window: LoadWindow;
  readonly #listeners: (() => void)[] = [];
  #current: RunLogLoad;
  #timer: NodeJS.Timeout | undefined;

  constructor(gauge: LoadGauge, options: LoadMeterOptions = {}) {
    this.#gauge = gauge;
    this.#intervalMs = options.intervalMs ?? 100;
    const windowMs = options.windowMs ?? 1000;
    if (!(this.#intervalMs > 0) || !(windowMs >= this.#intervalMs)) {
      throw new Error(`load sampling needs 0 < intervalMs <= windowMs, got intervalMs ${this.#intervalMs} and windowMs ${windowMs}`);
    }
    this.#clock = options.clock ?? realClock;
    this.#window = new LoadWindow(Math.round(windowMs / this.#intervalMs) + 1);
    this.#window.add(this.#clock.now(), gauge.inFlight + gauge.queued, gauge.takePeak(), gauge.arrivals);
    this.#current = this.#measure();
  }

  current(): RunLogLoad {
    return this.#current;
  }

  onChange(listener: () => void): void {
    this.#listeners.push(listener);
  }

  /** Samples every `intervalMs` until `stop`. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.sample(), this.#intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Takes one sample now (the timer's tick; tests call it with their own clock). */
  sample(): void {
    const gauge = this.#gauge;
    this.#window.add(this.#clock.now(), gauge.inFlight + gauge.queued, gauge.takePeak(), gauge.arrivals);
    const current = this.#current;
    // Compared field by field first: a quiet replica's ten samples a second allocate nothing.
    if (
      gauge.inFlight === current.inFlight &&
      gauge.queued === current.queued &&
      rounded(this.#window.averageConcurrency) === current.averageConcurrency &&
      this.#window.peakConcurrency === current.peakConcurrency &&
      rounded(this.#window.requestsPerSecond) === current.requestsPerSecond
    ) {
      return;
    }
    this.#current = this.#measure();
    for (const listener of this.#listeners) listener();
  }

  #measure(): RunLogLoad {
    const gauge = this.#gauge;
    return {
      inFlight: gauge.inFlight,
      queued: gauge.queued,
      averageConcurrency: rounded(this.#window.averageConcurrency),
      peakConcurrency: this.#window.peakConcurrency,
      requestsPerSecond: rounded(this.#window.requestsPerSecond),
      concurrency: gauge.concurrency,
      sampledAt: new Date(this.#clock.wallNow()).toISOString(),
    };
  }
}
