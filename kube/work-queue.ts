// The reconcile work queue, with client-go's workqueue guarantees: a key waits at most once however many
// events name it, a key is never handled by two workers at once (an event during handling queues it again
// for after), and a key whose handling failed comes back after an exponential, per-key backoff — so a broken
// App is retried ever more slowly while healthy ones flow past it. A new event for a key still runs it at
// once: the event may be the fix.

export interface WorkQueueOptions {
  /** Keys handled concurrently. */
  workers: number;
  /** Throws to have the key retried after a backoff. */
  handle(key: string): Promise<void>;
  backoff?: { initialMs: number; maxMs: number };
  /** After every change of the number of keys waiting (for the queue-depth gauge). */
  onDepthChange?(depth: number): void;
  /** A handling failed; it is retried after `retryInMs`. */
  onFailure?(key: string, error: unknown, failures: number, retryInMs: number): void;
}

const DEFAULT_BACKOFF = { initialMs: 500, maxMs: 5 * 60_000 };

export class WorkQueue {
  readonly #options: WorkQueueOptions;
  readonly #backoff: { initialMs: number; maxMs: number };
  /** Insertion-ordered: first added, first handled. */
  readonly #waiting = new Set<string>();
  readonly #handling = new Set<string>();
  /** Added again while being handled: queued once the handling ends. */
  readonly #dirty = new Set<string>();
  readonly #retryTimers = new Map<string, NodeJS.Timeout>();
  readonly #failures = new Map<string, number>();
  readonly #idleWaiters: (() => void)[] = [];
  #running = false;

  constructor(options: WorkQueueOptions) {
    this.#options = options;
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
  }

  /** Keys waiting to be handled now (not those being handled or waiting out a backoff). */
  get depth(): number {
    return this.#waiting.size;
  }

  /** Keys waiting out a backoff. */
  get retrying(): number {
    return this.#retryTimers.size;
  }

  get busy(): number {
    return this.#handling.size;
  }

  start(): void {
    this.#running = true;
    this.#pump();
  }

  /** Drops every waiting key and retry, then resolves once the keys being handled are done. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#waiting.clear();
    this.#dirty.clear();
    for (const timer of this.#retryTimers.values()) clearTimeout(timer);
    this.#retryTimers.clear();
    this.#failures.clear();
    this.#depthChanged();
    if (this.#handling.size > 0) await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Queues `key` now; a pending retry of it is brought forward (the event may be what fixes it). Ignored while stopped. */
  add(key: string): void {
    if (!this.#running) return;
    this.#cancelRetry(key);
    if (this.#handling.has(key)) {
      this.#dirty.add(key);
      return;
    }
    this.#waiting.add(key);
    this.#depthChanged();
    this.#pump();
  }

  /** Forgets `key` altogether: its object is gone. */
  forget(key: string): void {
    this.#cancelRetry(key);
    this.#failures.delete(key);
    this.#dirty.delete(key);
    if (this.#waiting.delete(key)) this.#depthChanged();
  }

  #pump(): void {
    while (this.#running && this.#handling.size < this.#options.workers && this.#waiting.size > 0) {
      const key = this.#waiting.values().next().value!;
      this.#waiting.delete(key);
      this.#handling.add(key);
      void this.#handleOne(key);
    }
    this.#depthChanged();
  }

  async #handleOne(key: string): Promise<void> {
    try {
      await this.#options.handle(key);
      this.#failures.delete(key);
    } catch (error) {
      if (this.#running) this.#scheduleRetry(key, error);
    } finally {
      this.#handling.delete(key);
      if (this.#dirty.delete(key) && this.#running) {
        this.#cancelRetry(key);
        this.#waiting.add(key);
      }
      if (this.#handling.size === 0) for (const resolve of this.#idleWaiters.splice(0)) resolve();
      this.#pump();
    }
  }

  #scheduleRetry(key: string, error: unknown): void {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, failures);
    const delayMs = Math.min(this.#backoff.maxMs, this.#backoff.initialMs * 2 ** (failures - 1));
    this.#options.onFailure?.(key, error, failures, delayMs);
    const timer = setTimeout(() => {
      this.#retryTimers.delete(key);
      if (!this.#running) return;
      if (this.#handling.has(key)) this.#dirty.add(key);
      else this.#waiting.add(key);
      this.#pump();
    }, delayMs);
    timer.unref();
    this.#retryTimers.set(key, timer);
  }

  #cancelRetry(key: string): void {
    const timer = this.#retryTimers.get(key);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.#retryTimers.delete(key);
  }

  #depthChanged(): void {
    this.#options.onDepthChange?.(this.#waiting.size);
  }
}
