// After a runtime was seen going (a refused or dropped connection) its app is marked not ready; its supervisor
// (`runlet dev`) or health watch (a pod) sees the same soon after and attaches the runtime again once it is back.
// This covers what they cannot see: a runtime whose process lives on and listens still, or again (a connection
// dropped by a fault rather than a death), which no restart would ever attach again. A request to it at once,
// then every 250 ms, only while its app is marked so.
//
// Back means answering, not accepting: a dying process's listening socket can outlive its connections for a
// moment, and the kernel completes a connect to it that nothing will ever read. Taken for the runtime's return,
// that woke the queued runs into a dead runtime, failing them `runtime_crashed`, and let new calls in (502).
import { http } from '../node-http.ts';

const INTERVAL_MS = 250;
const ANSWER_TIMEOUT_MS = 1_000;
/** The Python runtime's health path (PROTOCOL.md); a custom app's server answers it too, if only with a 404. */
const PROBE_PATH = '/healthz';

export class ReturnProbe {
  readonly #url: string;
  readonly #onBack: () => void;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;

  /** Starts probing `origin` (`http://host:port`); `onBack` is called once, when it answers an HTTP request (any status). */
  constructor(origin: string, onBack: () => void) {
    this.#url = new URL(PROBE_PATH, origin).href;
    this.#onBack = onBack;
    this.#attempt();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  #attempt(): void {
    // A fresh connection each time (agent: false), as the health watch asks (runtime-watch.ts).
    const probe = http.get(this.#url, { agent: false, timeout: ANSWER_TIMEOUT_MS }, (response) => {
      // Its body is not wanted; the connection closes after it (agent: false).
      response.on('error', () => undefined).resume();
      if (this.#stopped) return;
      this.#stopped = true;
      this.#onBack();
    });
    probe.once('timeout', () => probe.destroy(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`)));
    probe.once('error', () => {
      if (this.#stopped) return;
      this.#timer = setTimeout(() => this.#attempt(), INTERVAL_MS);
      this.#timer.unref();
    });
  }
}
