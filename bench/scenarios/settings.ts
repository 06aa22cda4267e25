/** How long each load of a round lasts. */
export interface Settings {
  /** Seconds of each throughput load (32 connections). */
  durationS: number;
  /** Seconds of each latency load (1 connection). */
  latencyDurationS: number;
}

/**
 * The measurements of a round in a rotating order, so that no side of a comparison always runs first (right
 * after another scenario's load) or last.
 */
export function inTurn<T>(items: readonly T[], round: number): T[] {
  const shift = round % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}
