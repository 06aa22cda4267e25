// The kubelet's clocks, compressed for tests: probes poll often and restarts back off briefly. Budgets a
// pod spec states in seconds (a startup probe's failureThreshold × periodSeconds, a liveness probe's
// failure window, terminationGracePeriodSeconds) are kept in real time, so a slow start on a loaded
// machine is not cut short by the compression.

export interface KubeletTiming {
  /** How often each probe runs, instead of periodSeconds. */
  probeIntervalMs: number;
  /** Bound of one probe attempt, instead of timeoutSeconds. */
  probeTimeoutMs: number;
  /** Delay before the first restart of an exited container; doubles with each further restart. */
  restartBackoffMs: number;
  maxRestartBackoffMs: number;
  /** Delay before retrying what failed for a reason outside the pod (the API server, a missing ConfigMap). */
  retryMs: number;
  /** When a projected token is written again; default (undefined) a kubelet's: once 80% of its lifetime has passed. */
  tokenRefreshMs?: number;
}

export const DEFAULT_TIMING: KubeletTiming = {
  probeIntervalMs: 200,
  probeTimeoutMs: 2_000,
  restartBackoffMs: 200,
  maxRestartBackoffMs: 5_000,
  retryMs: 250,
};

/** A container that ran this long without exiting starts its restart backoff afresh. */
export const BACKOFF_RESET_MS = 10_000;

/** After SIGTERM, how long a container restarted by a failed startup or liveness probe gets before SIGKILL. */
export const PROBE_RESTART_GRACE_MS = 5_000;
