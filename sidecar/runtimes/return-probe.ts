// After a runtime was seen going (a refused or dropped connection) its app is marked not ready; its supervisor
// (`runlet dev`) or health watch (a pod) sees the same soon after and attaches the runtime again once it is back.
// This covers what they cannot see: a runtime whose process lives on and listens still, or again (a connection
// dropped by a fault rather than a death), which no restart would ever attach again. A TCP connect to it at once,
// then every 250 ms, only while its app is marked so.
import { connect } from 'node:net';

const INTERVAL_MS = 250;
const CONNECT_TIMEOUT_MS = 1_000;

export class ReturnProbe {
  readonly #host: string;
  readonly #port: number;
  readonly #onBack: () => void;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;

  /** Starts probing `origin` (`http://host:port`); `onBack` is called once, when it accepts a connection. */
  constructor(origin: string, onBack: () => void) {
    const url = new URL(origin);
    this.#host = url.hostname;
    this.#port = Number(url.port || 80);
    this.#onBack = onBack;
    this.#attempt();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  #attempt(): void {
    const socket = connect({ host: this.#host, port: this.#port, timeout: CONNECT_TIMEOUT_MS });
    socket.once('connect', () => {
      socket.destroy();
      if (this.#stopped) return;
      this.#stopped = true;
      this.#onBack();
    });
    socket.once('timeout', () => socket.destroy(new Error('connect timed out')));
    socket.once('error', () => {
      if (this.#stopped) return;
      this.#timer = setTimeout(() => this.#attempt(), INTERVAL_MS);
      this.#timer.unref();
    });
  }
}
