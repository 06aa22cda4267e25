// The apps a sidecar fronts: one in a pod, several in `runlet dev`. An app is reachable only while its runtime
// is attached (ready); the supervisor attaches and detaches it as the runtime starts, crashes and restarts.
// Runs that waited in the queue wait for it to be ready again (`whenReady`) rather than fail for a runtime
// that is restarting.
import type { Pool } from 'undici';
import { undici } from './lazy-undici.ts';
import { Admission } from './admission.ts';
import type { ResultKeeping } from './runs/kept-result.ts';
import { ReturnProbe } from './runtimes/return-probe.ts';
import { DEFAULT_RESULT_LIMIT_BYTES, RuntimeConnections } from './runtimes/runtime-connections.ts';

export type RuntimeKind = 'python' | 'custom';

export interface AppTargetOptions {
  projectId: string;
  appName: string;
  runtime: RuntimeKind;
  replicaConcurrency: number;
  /** Bounds every run of the app (the interface's `response_grace_period`), in seconds. */
  responseGracePeriodSeconds: number;
  /** Runs that may wait for a slot; default 10 × the concurrency. */
  queueDepth?: number;
  /** The largest result a Python function may return, in bytes; default DEFAULT_RESULT_LIMIT_BYTES. */
  resultLimitBytes?: number;
  /** Keep each run's result for later (`[runs] keep_results`); absent or null: keep none. */
  resultKeeping?: ResultKeeping | null;
}

/** Never more than 12 hours, whatever the app asks for (interface, section 8). */
const MAX_RUN_SECONDS = 12 * 60 * 60;

export class AppTarget {
  readonly projectId: string;
  readonly appName: string;
  readonly runtime: RuntimeKind;
  readonly replicaConcurrency: number;
  readonly runTimeLimitMs: number;
  readonly resultLimitBytes: number;
  readonly resultKeeping: ResultKeeping | null;
  readonly admission: Admission;
  #pool: Pool | null = null;
  #connections: RuntimeConnections | null = null;
  #origin: string | null = null;
  #paused = false;
  /** Why the app cannot run until its code changes (it cannot be imported); null when it can. */
  #brokenDetail: string | null = null;
  /** Set while the runtime is seen gone (runtimeGone): watched for its return until the next attach or detach. */
  #returnProbe: ReturnProbe | null = null;
  /** Runs waiting for the runtime to be ready again. */
  readonly #readyWaiters = new Set<() => void>();

  constructor(options: AppTargetOptions) {
    this.projectId = options.projectId;
    this.appName = options.appName;
    this.runtime = options.runtime;
    this.replicaConcurrency = options.replicaConcurrency;
    this.runTimeLimitMs = Math.min(options.responseGracePeriodSeconds, MAX_RUN_SECONDS) * 1000;
    this.admission = new Admission(options.replicaConcurrency, options.queueDepth);
    this.resultLimitBytes = options.resultLimitBytes ?? DEFAULT_RESULT_LIMIT_BYTES;
    this.resultKeeping = options.resultKeeping ?? null;
  }

  get ready(): boolean {
    return (this.#pool !== null || this.#connections !== null) && !this.#paused && this.#returnProbe === null && this.#brokenDetail === null;
  }

  /** Why the app cannot run until its code changes; null when it can (it may still be starting). */
  get brokenDetail(): string | null {
    return this.#brokenDetail;
  }

  /** The app cannot run until its code changes: new calls are answered 503 with `detail`, until the next attach. */
  markBroken(detail: string): void {
    this.#brokenDetail = detail;
  }

  get origin(): string | null {
    return this.#origin;
  }

  /** The keep-alive connection pool to a custom runtime; null while it is not ready. */
  get pool(): Pool | null {
    return this.#pool;
  }

  /** The keep-alive connections to a Python runtime; null while it is not ready. */
  get connections(): RuntimeConnections | null {
    return this.#connections;
  }

  /** The runtime answers at `origin` (e.g. `http://127.0.0.1:8192`). */
  attach(origin: string): void {
    this.#stopReturnProbe();
    this.#brokenDetail = null;
    if (this.#origin === origin && (this.#pool !== null || this.#connections !== null)) {
      // The same runtime (or one restarted in its place) takes calls again: its connections reconnect as needed.
      this.#paused = false;
      this.#wakeReadyWaiters();
      return;
    }
    void this.detach();
    this.#origin = origin;
    this.#paused = false;
    // Admission bounds calls in flight to the concurrency; streams and webhook-less bursts fit in the margin.
    const maxConnections = this.replicaConcurrency * 2 + 2;
    if (this.runtime === 'python') {
      const connections: RuntimeConnections = new RuntimeConnections(origin, {
        maxConnections,
        resultLimitBytes: this.resultLimitBytes,
        onRuntimeGone: () => {
          if (this.#connections === connections) this.runtimeGone();
        },
      });
      this.#connections = connections;
    } else {
      this.#pool = new (undici().Pool)(origin, {
        connections: maxConnections,
        pipelining: 1,
        // Runs are bounded by the app's run time limit, not by undici's 300 s defaults.
        headersTimeout: 0,
        bodyTimeout: 0,
        keepAliveTimeout: 30_000,
      });
    }
    this.#wakeReadyWaiters();
  }

  /**
   * A new runtime replaces the one attached (the app's code was reloaded): new calls go to `origin`, while the
   * calls in flight finish on their connections to the old runtime, which drains and exits on its own.
   */
  handOver(origin: string): void {
    const pool = this.#pool;
    this.#pool = null;
    this.#connections = null;
    this.#origin = null;
    void pool?.close().catch(() => undefined);
    this.attach(origin);
  }

  /**
   * Resolves once the runtime takes calls (at once if it does); rejects with the signal's reason if it aborts
   * first. A run that waited in the queue waits here for a runtime that is restarting.
   */
  whenReady(signal: AbortSignal): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise((resolve, reject) => {
      signal.throwIfAborted();
      const onAbort = (): void => {
        this.#readyWaiters.delete(wake);
        reject(signal.reason);
      };
      const wake = (): void => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#readyWaiters.add(wake);
    });
  }

  /**
   * The runtime refused a connection or dropped one unasked: it is going away, sooner than its supervisor or
   * health probe can tell. New calls see the app as not ready (503) and queued runs wait, until the next attach.
   */
  runtimeGone(): void {
    const origin = this.#origin;
    if (origin === null || this.#returnProbe !== null) return;
    this.#returnProbe = new ReturnProbe(origin, () => {
      this.#returnProbe = null;
      if (this.ready) this.#wakeReadyWaiters();
    });
  }

  #stopReturnProbe(): void {
    this.#returnProbe?.stop();
    this.#returnProbe = null;
  }

  /**
   * The runtime takes no new calls (it drains, or recycles itself) but finishes those in flight: new calls see
   * the app as not ready, those in flight go on on their connections. Until the next attach.
   */
  pause(): void {
    this.#paused = true;
  }

  #wakeReadyWaiters(): void {
    const waiters = [...this.#readyWaiters];
    this.#readyWaiters.clear();
    for (const wake of waiters) wake();
  }

  /** The runtime went away: calls in flight on its connections fail, new ones see the app as not ready. */
  async detach(): Promise<void> {
    this.#stopReturnProbe();
    const pool = this.#pool;
    this.#pool = null;
    this.#connections?.destroy();
    this.#connections = null;
    this.#origin = null;
    if (pool) await pool.destroy().catch(() => undefined);
  }
}

export class AppRegistry {
  readonly #byProject = new Map<string, Map<string, AppTarget>>();

  add(target: AppTarget): void {
    let apps = this.#byProject.get(target.projectId);
    if (!apps) {
      apps = new Map();
      this.#byProject.set(target.projectId, apps);
    }
    if (apps.has(target.appName)) {
      throw new Error(`app ${target.projectId}/${target.appName} is registered twice`);
    }
    apps.set(target.appName, target);
  }

  find(projectId: string, appName: string): AppTarget | undefined {
    return this.#byProject.get(projectId)?.get(appName);
  }

  has(projectId: string, appName: string): boolean {
    return this.find(projectId, appName) !== undefined;
  }

  *all(): IterableIterator<AppTarget> {
    for (const apps of this.#byProject.values()) yield* apps.values();
  }

  async close(): Promise<void> {
    await Promise.all([...this.all()].map((target) => target.detach()));
  }
}
