// Keeps one app's runtime process running in local mode: starts it, attaches the app once the runtime is
// ready, detaches it when the process exits (its in-flight calls fail as `runtime_crashed`), and restarts it
// with exponential backoff. A Python runtime that recycles itself (too many calls still running past their
// limit) removes its port file when it stops taking calls, which pauses the app (503 for new calls, those in
// flight finish), and exits with RECYCLE_EXIT_STATUS: it is started again at once, and is not a crash.
// Stopping sends SIGTERM so the runtime finishes its calls, then SIGKILL past a bound.
// A Python app that cannot be imported is tried a few times, then reported once (file, line, traceback) and
// marked broken: its calls are answered 503 with the error, until its files change. A change to a Python
// file of a Python app reloads it: a new runtime starts on the new code and takes the new calls once ready,
// while the old one finishes the calls in flight and exits. An app whose interpreter must be prepared first (its
// dependencies installed: app-environment.ts) is prepared before each start and reload, the old runtime serving
// meanwhile; a change of a dependency file alone (service.toml, requirements.txt) reloads it only when the
// interpreter it gets is another. One that cannot be prepared is reported once and answered 503 like an app that
// cannot be imported, until its files change.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { existsSync, watch, type FSWatcher } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
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
/** runtime/python/runlet_runtime/import_report.py: the module cannot be imported. */
const IMPORT_FAILED_EXIT_STATUS = 78;
/** Imports tried before the app is reported broken (a file saved half-written may fail once). */
const IMPORT_TRIES = 3;
/** Editors write a file in several steps (and several files at once): one reload for a burst of changes. */
const RELOAD_DEBOUNCE_MS = 200;

/** The interpreter Python apps run on unless `runlet dev --python` names one: `RUNLET_PYTHON`, else `python3` on PATH. */
export function pythonInterpreter(): string {
  return process.env.RUNLET_PYTHON ?? 'python3';
}

export type RuntimeLaunch =
  | { kind: 'python'; appDir: string; module: string; concurrency: number; env: Record<string, string>; python: string }
  | { kind: 'custom'; appDir: string; entrypoint: string[]; port: number; readyPath: string | null; env: Record<string, string> };

export interface SuperviseOptions {
  /** Reload a Python app when a Python file under its folder changes, except under these paths (the run store's). */
  watchIgnoring?: string[];
  /**
   * Readies what a Python app runs on before each start and reload: resolves with the interpreter, or rejects
   * with what keeps the app from starting. Without it the app runs on the launch's `python`.
   */
  prepare?: () => Promise<string>;
  /** Files of the app folder (relative to it) whose change prepares the app again: see the top of this file. */
  dependencyFiles?: readonly string[];
}

/** What the runtime reported of a failed import. */
export interface ImportError {
  /** `main.py line 4: SyntaxError: expected ':'` */
  summary: string;
  traceback: string;
}

export class RuntimeSupervisor {
  readonly #target: AppTarget;
  readonly #launch: RuntimeLaunch;
  readonly #logger: Logger;
  readonly #options: SuperviseOptions;
  /** The newest runtime: starting, or serving. */
  #child: ChildProcess | null = null;
  /** The runtime the app's calls go to; an older one than #child while a reload starts. */
  #attached: ChildProcess | null = null;
  #importFailures = 0;
  #watcher: FSWatcher | null = null;
  #reloadTimer: NodeJS.Timeout | null = null;
  /** Why the app cannot be imported, once it has been tried IMPORT_TRIES times; null otherwise. */
  importError: ImportError | null = null;
  /** Why the app could not be prepared (its dependencies installed); null when it was, or is being. */
  prepareError: string | null = null;
  /** The interpreter the runtimes start on: set by each preparation. */
  #python: string;
  /** Counts preparations: one overtaken by a later one is not acted on. */
  #preparations = 0;
  /** Times the app was reloaded because its files changed: for the log. */
  #reloads = 0;
  #stopping = false;
  #backoffMs = FIRST_BACKOFF_MS;
  #restartTimer: NodeJS.Timeout | null = null;
  #firstReady: { promise: Promise<void>; resolve: () => void };
  /** Times the runtime exited unexpectedly; tests and the dev banner read it. */
  crashes = 0;
  /** Times the runtime recycled itself. */
  recycles = 0;

  constructor(target: AppTarget, launch: RuntimeLaunch, logger: Logger, options: SuperviseOptions = {}) {
    this.#target = target;
    this.#launch = launch;
    this.#options = options;
    this.#python = launch.kind === 'python' ? launch.python : '';
    this.#logger = logger.child({ app: `${target.projectId}/${target.appName}` });
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.#firstReady = { promise, resolve };
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /**
   * Starts the runtime; the returned promise resolves the first time it is ready, or is reported broken (see
   * importError). It may never resolve (a runtime that crashes at every start).
   */
  start(): Promise<void> {
    if (this.#options.watchIgnoring && this.#launch.kind === 'python') this.#watcher = this.#watchFiles(this.#options.watchIgnoring);
    void this.#prepare().then((python) => {
      if (python === null) return;
      this.#python = python;
      void this.#spawn();
    });
    return this.#firstReady.promise;
  }

  async stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    if (this.#reloadTimer) clearTimeout(this.#reloadTimer);
    this.#watcher?.close();
    const children = new Set([this.#child, this.#attached].filter((child): child is ChildProcess => child !== null));
    await this.#target.detach();
    await Promise.all([...children].map((child) => this.#terminate(child, graceMs)));
  }

  /**
   * The app's files changed: start it afresh on them (see the top of this file). `dependencies`: only files
   * that name its dependencies did, and it is started afresh only if that gives it another interpreter.
   */
  reload(changed: 'code' | 'dependencies' = 'code'): void {
    if (this.#stopping) return;
    const previous = this.#python;
    void this.#prepare().then((python) => {
      if (python === null) return;
      const broken = this.importError !== null || this.#target.brokenDetail !== null;
      // None started yet: the start's own preparation was overtaken by this one, which must start it.
      const started = this.#child !== null || this.#attached !== null;
      if (changed === 'dependencies' && python === previous && !broken && started) return;
      this.#python = python;
      this.#restart(python === previous ? 'app files changed; reloading' : 'dependencies changed; reloading on their new environment');
    });
  }

  /**
   * Prepares the app; resolves with its interpreter, or null when it could not be prepared (reported here) or
   * a later preparation overtook this one.
   */
  async #prepare(): Promise<string | null> {
    const prepare = this.#options.prepare;
    if (prepare === undefined || this.#launch.kind !== 'python') return this.#python;
    const preparation = ++this.#preparations;
    try {
      const python = await prepare();
      if (preparation !== this.#preparations || this.#stopping) return null;
      this.prepareError = null;
      return python;
    } catch (err) {
      if (preparation === this.#preparations && !this.#stopping) this.#prepareFailed((err as Error).message);
      return null;
    }
  }

  /** As an import that fails: reported once, calls answered 503 with why, tried again when the files change. */
  #prepareFailed(reason: string): void {
    this.prepareError = reason;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    this.#restartTimer = null;
    this.#target.markBroken(`App ${this.#target.projectId}/${this.#target.appName} cannot start: ${reason}. It is tried again when its files change.`);
    const starting = this.#child !== this.#attached ? this.#child : null;
    if (starting && isRunning(starting)) starting.kill('SIGKILL');
    this.#child = null;
    // The old runtime stops too, so the app answers with what its files now say; its environment stays.
    if (this.#attached) void this.#retire(this.#attached);
    this.#logger.error(`cannot start the app: ${reason}\nnot retrying until the app's files change`);
    this.#firstReady.resolve();
  }

  #restart(message: string): void {
    if (this.#stopping) return;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    this.#restartTimer = null;
    this.#reloads++;
    this.#importFailures = 0;
    this.#backoffMs = FIRST_BACKOFF_MS;
    this.importError = null;
    const starting = this.#child !== this.#attached ? this.#child : null;
    this.#child = null;
    // One still starting runs the old code: it is no longer wanted.
    if (starting && isRunning(starting)) starting.kill('SIGKILL');
    this.#logger.info({ reloads: this.#reloads, python: this.#python }, message);
    void this.#spawn();
  }

  /** SIGTERM: the runtime finishes its calls in flight and exits; SIGKILL past the app's run time limit. */
  #retire(child: ChildProcess): Promise<void> {
    return this.#terminate(child, Math.max(this.#target.runTimeLimitMs, 1000));
  }

  async #terminate(child: ChildProcess, graceMs: number): Promise<void> {
    if (!isRunning(child)) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(killer);
  }

  #watchFiles(ignoring: string[]): FSWatcher {
    const appDir = this.#launch.appDir;
    const ignored = ignoring.map((path) => relative(appDir, path)).filter((path) => path !== '' && !path.startsWith('..'));
    const dependencyFiles = this.#options.dependencyFiles ?? [];
    // What the burst of changes being waited out touched: code wins over dependency files alone.
    let changed: 'code' | 'dependencies' | null = null;
    const watcher = watch(appDir, { recursive: true });
    watcher.on('change', (_event, filename) => {
      if (filename === null) return;
      const name = String(filename);
      if (reloadsOn(name, ignored)) changed = 'code';
      else if (dependencyFiles.includes(name)) changed ??= 'dependencies';
      else return;
      if (this.#reloadTimer) clearTimeout(this.#reloadTimer);
      this.#reloadTimer = setTimeout(() => {
        this.#reloadTimer = null;
        const what = changed ?? 'code';
        changed = null;
        this.reload(what);
      }, RELOAD_DEBOUNCE_MS);
    });
    watcher.on('error', (err) => this.#logger.warn({ err, appDir }, 'cannot watch the app folder: changes will not reload it'));
    return watcher;
  }

  async #spawn(): Promise<void> {
    const launch = this.#launch;
    const startedAt = Date.now();
    const portDir = launch.kind === 'python' ? await mkdtemp(join(tmpdir(), 'runlet-runtime-')) : null;
    const child =
      launch.kind === 'python'
        ? spawn(
            this.#python,
            ['-m', 'runlet_runtime', '--app-dir', launch.appDir, '--module', launch.module, '--port', '0',
              '--port-file', join(portDir!, 'port'), '--import-error-file', join(portDir!, 'import-error'),
              '--concurrency', String(launch.concurrency), '--exit-with-stdin'],
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
            // As in a pod (operator/render/app-container.ts): the server listens on the loopback, behind the dev server.
            env: { ...process.env, ...launch.env, PORT: String(launch.port), HOST: '127.0.0.1' },
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
        const previous = this.#attached;
        this.#attached = child;
        this.#importFailures = 0;
        if (previous !== null && previous !== child && isRunning(previous)) {
          this.#target.handOver(origin);
          void this.#retire(previous);
        } else {
          this.#target.attach(origin);
        }
        if (portDir) portWatches.push(this.#pauseWhenGone(join(portDir, 'port'), child));
        this.#logger.info({ origin, pid: child.pid }, previous === null ? 'runtime ready' : 'runtime ready on the new code');
        this.#firstReady.resolve();
      },
      () => undefined, // It exited before it was ready: the exit handler below restarts it.
    );

    const { code, signal } = await exited;
    for (const watcher of portWatches) watcher.close();
    const importError = portDir && code === IMPORT_FAILED_EXIT_STATUS ? await readImportError(join(portDir, 'import-error')) : null;
    if (portDir) await rm(portDir, { recursive: true, force: true });
    if (this.#attached === child) {
      this.#attached = null;
      await this.#target.detach();
    }
    if (this.#stopping || this.#child !== child) return;
    if (importError) {
      this.#importFailed(importError);
      return;
    }
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

  #importFailed(error: ImportError): void {
    this.#importFailures++;
    if (this.#importFailures < IMPORT_TRIES) {
      this.#logger.debug({ tries: this.#importFailures, error: error.summary }, 'app cannot be imported; trying again');
      this.#restartTimer = setTimeout(() => void this.#spawn(), this.#backoffMs);
      this.#backoffMs = Math.min(this.#backoffMs * 2, MAX_BACKOFF_MS);
      return;
    }
    this.importError = error;
    // Only a Python runtime reports import errors.
    const module = this.#launch.kind === 'python' ? `${this.#launch.module.replaceAll('.', '/')}.py` : this.#launch.entrypoint.join(' ');
    this.#target.markBroken(
      `App ${this.#target.projectId}/${this.#target.appName} cannot be imported: ${error.summary}. ` +
        'It is tried again when its files change.',
    );
    // A reload that failed: the old code stops too, so the app answers with what its files now say.
    if (this.#attached) void this.#retire(this.#attached);
    this.#logger.error(
      { tries: this.#importFailures },
      `cannot import ${module}: ${error.summary}; not retrying until the app's files change\n${error.traceback}`,
    );
    this.#firstReady.resolve();
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

function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/**
 * Whether a change to `name` (relative to the app folder) is a change of the app's code. Python sources only:
 * an app that writes other files into its folder (a cache at import, an output per call) must not reload itself.
 */
export function reloadsOn(name: string, ignored: string[]): boolean {
  if (!name.endsWith('.py') || name.split(sep).some((part) => part.startsWith('.') || part === '__pycache__')) return false;
  return !ignored.some((path) => name.startsWith(path + sep));
}

async function readImportError(path: string): Promise<ImportError | null> {
  try {
    const report = JSON.parse(await readFile(path, 'utf8')) as ImportError;
    return typeof report.summary === 'string' ? report : null;
  } catch {
    return null; // Killed while writing it, or it never got that far: an ordinary crash.
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
