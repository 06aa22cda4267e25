// The kubelet's reconcile loop: run one task whenever something may have changed, never two at once, and
// one more time when asked while running (requests coalesce). A failed run is retried after a delay.

export class SerialTask {
  readonly #task: () => Promise<void>;
  readonly #onError: (error: unknown) => void;
  readonly #retryMs: number;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(task: () => Promise<void>, onError: (error: unknown) => void, retryMs: number) {
    this.#task = task;
    this.#onError = onError;
    this.#retryMs = retryMs;
  }

  request(): void {
    if (this.#stopped) return;
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop();
  }

  /** No more runs; resolves once the one in progress (if any) has finished. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retryTimer);
    await this.#running;
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.#task();
      } catch (error) {
        this.#onError(error);
        clearTimeout(this.#retryTimer);
        this.#retryTimer = setTimeout(() => this.request(), this.#retryMs);
      }
    } while (this.#again && !this.#stopped);
    this.#running = undefined;
  }
}
