// The clock and timers the RunLog store schedules its writes, retries and durability bounds with. Injected so
// tests can run the one-second write cadence on a simulated clock instead of waiting for it.

/** A timer, as returned by `setTimeout`; only ever handed back to `clearTimeout`. */
export type TimerHandle = unknown;

export interface RunLogTimers {
  /** Monotonic milliseconds. */
  now(): number;
  setTimeout(callback: () => void, delayMs: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export const realTimers: RunLogTimers = {
  now: () => performance.now(),
  setTimeout: (callback, delayMs) => setTimeout(callback, Math.max(0, delayMs)),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
