// Keeps one app's runtime process running in local mode: starts it, attaches the app once the runtime is
// ready, detaches it when the process exits (its in-flight calls fail as `runtime_crashed`), and restarts it
// with exponential backoff. A Python runtime that recycles itself (too many calls still running past their
// limit) removes its port file when it stops taking calls, which pauses the app (503 for new calls, those in
// flight finish), and exits with RECYCLE_EXIT_STATUS: it is started again at once, and is not a crash.
// Stopping sends SIGTERM so the runtime finishes its calls, then SIGKILL past a bound.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { existsSync, watch, type FSWatcher } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { AppTarget } from '../sidecar/apps.ts';

/** The runtime package beside the sources (local/) or beside the compiled output (dist/local/). */
const PYTHON_RUNTIME_PATH = [new URL('../runtime/python', import.meta.url), new URL('../../runtime/python', import.meta.url)]
  .map((url) => fileURLToPath(url))
  .find((path) => existsSync(join(path, 'runlet_runtime')))!;
const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 30_000;
/** A runtime that stayed up this long is healthy again: its next crash restarts it at the first backoff. */
const STABLE_AFTER_MS = 30_000;
const CUSTOM_READY_POLL_MS = 100;
/** runtime/python/runlet_runtime/server.py: the runtime exited to be started afresh. */
const RECYCLE_EXIT_STATUS = 75;

/** The interpreter a Python app runs on: `RUNLET_PYTHON`, else `python3` on PATH. */
export function pythonInterpreter(): string {
  return process.env.RUNLET_PYTHON ?? 'python3';
}

export type RuntimeLaunch =
  | { kind: 'python'; appDir: string; module: string; concurrency: number; env: Record<string, string> }
  | { kind: 'custom'; appDir: string; entrypoint: string[]; port: number; readyPath: string | null; env: Record<string, string> };

export class RuntimeSupervisor {
  readonly #target: AppTarget;
  readonly #launch: RuntimeLaunch;
  readonly #logger: Logger;
  #child: ChildProcess | null = null;
  #stopping = false;
  #backoffMs = FIRST_BACKOFF_MS;
  #restartTimer: NodeJS.Timeout | null = null;
  #firstReady: { promise: Promise<void>; resolve: () => void };
  /** Times the runtime exited unexpectedly; tests and the dev banner read it. */
  crashes = 0;
  /** Times the runtime recycled itself. */
  recycles = 0;

  constructor(target: AppTarget, launch: RuntimeLaunch, logger: Logger) {
    this.#target = target;
    this.#launch = launch;
    this.#logger = logger.child({ app: `${target.projectId}/${target.appName}` });
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.#firstReady = { promise, resolve };
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Starts the runtime; the returned promise resolves the first time it is ready (it may never be). */
  start(): Promise<void> {
    void this.#spawn();
    return this.#firstReady.promise;
  }

  async stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    const child = this.#child;
    await this.#target.detach();
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(killer);
  }

  async #spawn(): Promise<void> {
    const launch = this.#launch;
    const startedAt = Date.now();
    const portDir = launch.kind === 'python' ? await mkdtemp(join(tmpdir(), 'runlet-runtime-')) : null;
    const child =
      launch.kind === 'python'
        ? spawn(
            pythonInterpreter(),
            ['-m', 'runlet_runtime', '--app-dir', launch.appDir, '--module', launch.module, '--port', '0',
              '--port-file', join(portDir!, 'port'), '--concurrency', String(launch.concurrency), '--exit-with-stdin'],
            {
              cwd: launch.appDir,
              env: { ...process.env, ...launch.env, PYTHONPATH: joinPath(PYTHON_RUNTIME_PATH, process.env.PYTHONPATH), PYTHONUNBUFFERED: '1' },
              // Its standard input is a pipe this process holds open: should `runlet dev` be killed outright, the
              // pipe closes and the runtime drains and exits instead of living on orphaned.
              stdio: ['pipe', 'inherit', 'inherit'],
            },
          )
        : spawn(launch.entrypoint[0]!, launch.entrypoint.slice(1), {
            cwd: launch.appDir,
            env: { ...process.env, ...launch.env, PORT: String(launch.port) },
            stdio: ['ignore', 'inherit', 'inherit'],
          });
    this.#child = child;
    const exited = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as string | null }));
    child.on('error', (err) => this.#logger.error({ err }, 'runtime could not be started'));

    const ready =
      launch.kind === 'python'
        ? waitForPortFile(join(portDir!, 'port'), exited).then((port) => `http://127.0.0.1:${port}`)
        : waitForHttpReady(`http://127.0.0.1:${launch.port}`, launch.readyPath, exited);
    // Filled once the runtime is ready; a list so the exit below sees what the callback set.
    const portWatches: FSWatcher[] = [];
    ready.then(
      (origin) => {
        if (this.#stopping || this.#child !== child) return;
        this.#target.attach(origin);
        if (portDir) portWatches.push(this.#pauseWhenGone(join(portDir, 'port'), child));
        this.#logger.info({ origin, pid: child.pid }, 'runtime ready');
        this.#firstReady.resolve();
      },
      () => undefined, // It exited before it was ready: the exit handler below restarts it.
    );

    const { code, signal } = await exited;
    for (const watcher of portWatches) watcher.close();
    if (portDir) await rm(portDir, { recursive: true, force: true });
    if (this.#stopping || this.#child !== child) return;
    await this.#target.detach();
    if (launch.kind === 'python' && code === RECYCLE_EXIT_STATUS) {
      this.recycles++;
      this.#logger.info({ pid: child.pid }, 'runtime recycled itself (calls still running past their time limit); starting a fresh one');
      void this.#spawn();
      return;
    }
    this.crashes++;
    if (Date.now() - startedAt > STABLE_AFTER_MS) this.#backoffMs = FIRST_BACKOFF_MS;
    this.#logger.error({ code, signal, restartInMs: this.#backoffMs }, 'runtime exited; restarting');
    this.#restartTimer = setTimeout(() => void this.#spawn(), this.#backoffMs);
    this.#backoffMs = Math.min(this.#backoffMs * 2, MAX_BACKOFF_MS);
  }

  /** The runtime removes its port file when it stops taking calls: the app is paused until the next runtime. */
  #pauseWhenGone(portFile: string, child: ChildProcess): FSWatcher {
    const watcher = watch(join(portFile, '..'));
    watcher.on('change', () => {
      if (this.#child === child && !existsSync(portFile)) {
        this.#target.pause();
        this.#logger.info({ pid: child.pid }, 'runtime takes no new calls (recycling or draining); those in flight go on');
      }
    });
    watcher.on('error', (err) => this.#logger.warn({ err }, 'cannot watch the runtime port file'));
    return watcher;
  }
}

function joinPath(first: string, rest: string | undefined): string {
  return rest ? `${first}:${rest}` : first;
}

/** Resolves with the port the runtime wrote (atomically, once listening); rejects if it exits first. */
async function waitForPortFile(path: string, exited: Promise<unknown>): Promise<number> {
  const dir = join(path, '..');
  const watcher = watch(dir);
  let notify = (): void => undefined;
  watcher.on('change', () => notify());
  const gone = exited.then(() => {
    throw new Error('runtime exited before it was ready');
  });
  gone.catch(() => undefined); // Only the race below cares; an exit after readiness is the supervisor's.
  try {
    for (;;) {
      // Armed before reading, so a change between the read and the wait is not missed.
      const changed = new Promise<void>((resolve) => (notify = resolve));
      const port = await readPort(path);
      if (port !== null) return port;
      await Promise.race([changed, gone]);
    }
  } finally {
    watcher.close();
  }
}

async function readPort(path: string): Promise<number | null> {
  try {
    const port = Number((await readFile(path, 'utf8')).trim());
    return Number.isInteger(port) && port > 0 ? port : null;
  } catch {
    return null;
  }
}

/** A custom app is ready when its readiness path answers 2xx (or, without one, when it accepts HTTP at all). */
async function waitForHttpReady(origin: string, readyPath: string | null, exited: Promise<unknown>): Promise<string> {
  let hasExited = false;
  void exited.then(() => (hasExited = true));
  while (!hasExited) {
    try {
      const response = await fetch(origin + (readyPath ?? '/'), { signal: AbortSignal.timeout(2000) });
      await response.body?.cancel();
      if (readyPath === null || response.ok) return origin;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, CUSTOM_READY_POLL_MS));
  }
  throw new Error('custom runtime exited before it was ready');
}
