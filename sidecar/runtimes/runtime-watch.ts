// In a pod, the runtime is another container the kubelet starts and restarts: the sidecar watches its health
// endpoint, attaching the app while it answers 2xx, pausing it while it answers otherwise (it drains or recycles
// itself: the calls in flight finish, new ones get 503) and detaching it while it does not answer at all.
import type { Logger } from 'pino';
import type { AppTarget } from '../apps.ts';
import { isSuccess, probeRuntime } from './runtime-probe.ts';

export interface RuntimeWatchOptions {
  origin: string;
  /** A path answering 2xx while the runtime can take calls; null: any HTTP answer counts. */
  readyPath: string | null;
  intervalMs?: number;
}

const PROBE_TIMEOUT_MS = 2_000;

/** `not-ready`: the runtime answered, but not 2xx. `gone`: it did not answer. */
type Health = 'ready' | 'not-ready' | 'gone';

export class RuntimeWatcher {
  readonly #target: AppTarget;
  readonly #options: Required<RuntimeWatchOptions>;
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;

  constructor(target: AppTarget, options: RuntimeWatchOptions, logger: Logger) {
    this.#target = target;
    this.#options = { intervalMs: 500, ...options };
    this.#logger = logger;
  }

  start(): void {
    void this.#probe();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  async #probe(): Promise<void> {
    const health = await this.#health();
    if (this.#stopped) return;
    if (health === 'ready' && !this.#target.ready) {
      this.#target.attach(this.#options.origin);
      this.#logger.info({ origin: this.#options.origin }, 'runtime ready');
    } else if (health === 'not-ready' && this.#target.ready) {
      this.#target.pause();
      this.#logger.warn({ origin: this.#options.origin }, 'runtime takes no new calls (draining or recycling); those in flight go on');
    } else if (health === 'gone' && this.#target.origin !== null) {
      await this.#target.detach();
      this.#logger.warn({ origin: this.#options.origin }, 'runtime stopped answering its health check');
    }
    this.#timer = setTimeout(() => void this.#probe(), this.#options.intervalMs);
    this.#timer.unref();
  }

  async #health(): Promise<Health> {
    const answer = await probeRuntime(this.#options.origin + (this.#options.readyPath ?? '/'), PROBE_TIMEOUT_MS);
    if (!answer.answered) return 'gone';
    return this.#options.readyPath === null || isSuccess(answer.status) ? 'ready' : 'not-ready';
  }
}
