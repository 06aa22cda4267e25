// A custom app's liveness, asked through the sidecar: the kubelet probes the sidecar's admin port
// (`GET /app-healthz`), and the sidecar asks the app's own health path on the loopback. So the app's server
// needs no port on the pod IP for its probes, and can listen on 127.0.0.1, where only the sidecar reaches it.
//
// Checks asked while one is under way share its answer: whoever reaches the admin port cannot make the sidecar
// ask the app more often than one check at a time.
import { isSuccess, probeRuntime } from './runtime-probe.ts';

/**
 * Longer than the readiness watch's 2 s: a failed liveness check restarts the app, so a server slowed by a
 * busy node is given time. Under the kubelet's timeoutSeconds (operator/render/app-container.ts: 5 s), so the
 * kubelet gets the sidecar's answer, saying why, rather than a timeout of its own.
 */
export const APP_HEALTH_TIMEOUT_MS = 4_000;

export interface AppHealth {
  healthy: boolean;
  /** What the app answered, or why it did not: for whoever reads the probe's answer. */
  detail: string;
}

export class AppHealthCheck {
  readonly #url: string;
  readonly #timeoutMs: number;
  #inFlight: Promise<AppHealth> | null = null;

  /** `origin`: where the app listens (`http://127.0.0.1:9000`); `path`: its health path (spec healthcheckEndpoint). */
  constructor(origin: string, path: string, timeoutMs = APP_HEALTH_TIMEOUT_MS) {
    this.#url = origin + path;
    this.#timeoutMs = timeoutMs;
  }

  check(): Promise<AppHealth> {
    this.#inFlight ??= this.#checkOnce().finally(() => (this.#inFlight = null));
    return this.#inFlight;
  }

  async #checkOnce(): Promise<AppHealth> {
    const answer = await probeRuntime(this.#url, this.#timeoutMs);
    // Neither the path nor the port is told: the admin port may be reached by more than the kubelet.
    if (!answer.answered) return { healthy: false, detail: `the app's health path did not answer: ${answer.reason}` };
    return { healthy: isSuccess(answer.status), detail: `the app's health path answered ${answer.status}` };
  }
}
