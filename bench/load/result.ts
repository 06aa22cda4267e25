/** What one load run measured, whichever tool generated it. */
export interface LoadResult {
  tool: 'wrk' | 'autocannon';
  /** Responses received (any status). */
  requests: number;
  /** Responses per second over the run. */
  perSecond: number;
  seconds: number;
  /** Socket errors, timeouts and answers that were not 2xx/3xx. */
  errors: number;
  /** Null where the tool's resolution (autocannon: whole milliseconds) is too coarse to report. */
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number } | null;
}
