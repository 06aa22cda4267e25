// One container of a running pod: starts its process, restarts it when it exits (restartPolicy Always;
// a plain init container only until it succeeds) with a doubling backoff, runs its startup, readiness and
// liveness probes, and stops it the way the kubelet does (preStop hook, SIGTERM, SIGKILL at the deadline).
import type { V1Probe } from '@kubernetes/client-node';
import type { ContainerLaunch } from './launch.ts';
import { spawnLocal, type LocalProcess, type ProcessExit } from './local-process.ts';
import { attempt, type ProbeAction } from './probe-action.ts';
import type { LogFile } from './log-file.ts';
import { BACKOFF_RESET_MS, PROBE_RESTART_GRACE_MS, type KubeletTiming } from './timing.ts';

/** `init`: runs to completion before the others; `sidecar`: an init container with restartPolicy Always. */
export type ContainerRole = 'init' | 'sidecar' | 'main';

export interface ProbeSpec {
  action: ProbeAction;
  probe: V1Probe;
}

export interface ContainerSetup {
  name: string;
  image: string;
  role: ContainerRole;
  launch: ContainerLaunch;
  startupProbe?: ProbeSpec;
  readinessProbe?: ProbeSpec;
  livenessProbe?: ProbeSpec;
  preStop?: ProbeAction;
}

/** The container's state in the shape of the Pod API's ContainerState. */
export interface ContainerStateView {
  running?: { startedAt: string };
  waiting?: { reason: string; message?: string };
  terminated?: { exitCode: number; signal?: number; reason: string; message?: string; startedAt: string; finishedAt: string };
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = { SIGKILL: 9, SIGTERM: 15, SIGINT: 2, SIGHUP: 1, SIGSEGV: 11, SIGABRT: 6 };

function failureBudgetMs(probe: V1Probe): number {
  return ((probe.initialDelaySeconds ?? 0) + (probe.failureThreshold ?? 3) * (probe.periodSeconds ?? 10)) * 1000;
}

function withinMs<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), Math.max(ms, 0))));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

interface Waiter {
  satisfied: () => boolean;
  resolve: () => void;
  reject: (error: Error) => void;
}

export class ContainerRunner {
  readonly name: string;
  readonly image: string;
  readonly role: ContainerRole;
  readonly launch: ContainerLaunch;
  restartCount = 0;
  /** The startup probe passed (or there is none) in the current run. */
  started = false;
  ready = false;
  /** A plain init container that exited 0. */
  completed = false;
  state: ContainerStateView = { waiting: { reason: 'PodInitializing' } };
  /** `local://<pid>` of the latest run, as a container runtime would name the container. */
  containerID: string | undefined;
  lastState: ContainerStateView = {};

  readonly #setup: ContainerSetup;
  readonly #log: LogFile;
  readonly #timing: KubeletTiming;
  readonly #onChange: () => void;
  readonly #waiters = new Set<Waiter>();
  #process: LocalProcess | undefined;
  #generation = 0;
  #runStartedAt = 0;
  #consecutiveRestarts = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  #probeTimer: NodeJS.Timeout | undefined;
  #killTimer: NodeJS.Timeout | undefined;
  #readinessSuccesses = 0;
  #readinessFailures = 0;
  #livenessFailures = 0;
  #livenessFailingSince: number | undefined;
  #stopping: Promise<void> | undefined;

  constructor(setup: ContainerSetup, log: LogFile, timing: KubeletTiming, onChange: () => void) {
    this.name = setup.name;
    this.image = setup.image;
    this.role = setup.role;
    this.launch = setup.launch;
    this.#setup = setup;
    this.#log = log;
    this.#timing = timing;
    this.#onChange = onChange;
  }

  get pid(): number | undefined {
    return this.#process?.alive() ? this.#process.pid : undefined;
  }

  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /** Sends a signal to the current process (tests use it to crash a container; the restart policy applies). */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    this.#log.event(`${this.name}: sending ${signal} to pid ${this.pid ?? '(none)'}`);
    this.#process?.signal(signal);
  }

  start(): void {
    if (this.#stopping !== undefined || this.#process !== undefined) return;
    this.#run();
  }

  /** Resolves once the startup probe passed (sidecars gate the main containers on it). */
  whenStarted(): Promise<void> {
    return this.#waitUntil(() => this.started);
  }

  /** Resolves once a plain init container exited 0. */
  whenCompleted(): Promise<void> {
    return this.#waitUntil(() => this.completed);
  }

  /** Stops for good: preStop hook (when `runPreStop`), SIGTERM, and SIGKILL at `deadline` (a performance.now() time). */
  stop(deadline: number, runPreStop: boolean): Promise<void> {
    this.#stopping ??= this.#stop(deadline, runPreStop);
    return this.#stopping;
  }

  #run(): void {
    const generation = ++this.#generation;
    this.started = this.#setup.startupProbe === undefined;
    this.ready = this.started && this.#setup.readinessProbe === undefined && this.role !== 'init';
    this.#readinessSuccesses = 0;
    this.#readinessFailures = 0;
    this.#livenessFailures = 0;
    this.#livenessFailingSince = undefined;
    this.#runStartedAt = performance.now();
    const child = spawnLocal(this.name, this.launch, this.#log);
    this.#process = child;
    if (child.pid !== undefined) this.containerID = `local://${child.pid}`;
    const startedAt = new Date().toISOString();
    this.state = { running: { startedAt } };
    this.#log.event(`${this.name}: started pid ${child.pid ?? '(failed)'}: ${this.launch.argv.join(' ')}`);
    void child.exited.then((exit) => this.#exited(generation, exit, startedAt));
    this.#scheduleProbe(generation);
    this.#changed();
  }

  #exited(generation: number, exit: ProcessExit, startedAt: string): void {
    if (generation !== this.#generation) return;
    clearTimeout(this.#probeTimer);
    clearTimeout(this.#killTimer);
    const exitCode = exit.code ?? 128 + (exit.signal === null ? 0 : (SIGNAL_NUMBERS[exit.signal] ?? 0));
    const terminated: ContainerStateView['terminated'] = {
      exitCode,
      reason: exitCode === 0 ? 'Completed' : 'Error',
      startedAt,
      finishedAt: new Date().toISOString(),
    };
    if (exit.signal !== null) terminated.signal = SIGNAL_NUMBERS[exit.signal] ?? 0;
    if (exit.spawnError !== undefined) terminated.message = exit.spawnError.message;
    this.#log.event(
      `${this.name}: exited with ${exit.signal ?? `code ${exit.code}`}${exit.spawnError ? ` (${exit.spawnError.message})` : ''}`,
    );
    this.started = false;
    this.ready = false;
    if (this.#stopping !== undefined || (this.role === 'init' && exitCode === 0)) {
      this.completed = this.role === 'init' && exitCode === 0;
      this.state = { terminated };
      this.#changed();
      return;
    }
    if (performance.now() - this.#runStartedAt >= BACKOFF_RESET_MS) this.#consecutiveRestarts = 0;
    const backoff = Math.min(this.#timing.restartBackoffMs * 2 ** this.#consecutiveRestarts, this.#timing.maxRestartBackoffMs);
    this.#consecutiveRestarts += 1;
    this.lastState = { terminated };
    this.state = { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${backoff} ms restarting failed container ${this.name}` } };
    this.#restartTimer = setTimeout(() => {
      if (this.#stopping !== undefined) return;
      this.restartCount += 1;
      this.#run();
    }, backoff);
    this.#changed();
  }

  #scheduleProbe(generation: number): void {
    if (this.role === 'init') return;
    const { startupProbe, readinessProbe, livenessProbe } = this.#setup;
    if (startupProbe === undefined && readinessProbe === undefined && livenessProbe === undefined) return;
    this.#probeTimer = setTimeout(() => void this.#probe(generation), this.#timing.probeIntervalMs);
  }

  async #probe(generation: number): Promise<void> {
    const current = (): boolean => generation === this.#generation && this.#stopping === undefined && this.#process?.alive() === true;
    if (!current()) return;
    if (!this.started) await this.#startupProbe(current);
    else {
      await this.#readinessProbe(current);
      await this.#livenessProbe(current);
    }
    if (current()) this.#scheduleProbe(generation);
  }

  async #startupProbe(current: () => boolean): Promise<void> {
    const spec = this.#setup.startupProbe!;
    const ok = await attempt(spec.action, this.#timing.probeTimeoutMs);
    if (!current()) return;
    if (ok) {
      this.#log.event(`${this.name}: startup probe succeeded`);
      this.started = true;
      this.ready = this.#setup.readinessProbe === undefined;
      this.#changed();
    } else if (performance.now() - this.#runStartedAt > failureBudgetMs(spec.probe)) {
      this.#restartForProbe('startup', spec.probe);
    }
  }

  async #readinessProbe(current: () => boolean): Promise<void> {
    const spec = this.#setup.readinessProbe;
    if (spec === undefined) return;
    const ok = await attempt(spec.action, this.#timing.probeTimeoutMs);
    if (!current()) return;
    if (ok) {
      this.#readinessFailures = 0;
      this.#readinessSuccesses += 1;
      if (!this.ready && this.#readinessSuccesses >= (spec.probe.successThreshold ?? 1)) {
        this.ready = true;
        this.#log.event(`${this.name}: ready`);
        this.#changed();
      }
    } else {
      this.#readinessSuccesses = 0;
      this.#readinessFailures += 1;
      if (this.ready && this.#readinessFailures >= (spec.probe.failureThreshold ?? 3)) {
        this.ready = false;
        this.#log.event(`${this.name}: not ready (readiness probe failed ${this.#readinessFailures} times)`);
        this.#changed();
      }
    }
  }

  async #livenessProbe(current: () => boolean): Promise<void> {
    const spec = this.#setup.livenessProbe;
    if (spec === undefined) return;
    const ok = await attempt(spec.action, this.#timing.probeTimeoutMs);
    if (!current()) return;
    if (ok) {
      this.#livenessFailures = 0;
      this.#livenessFailingSince = undefined;
      return;
    }
    this.#livenessFailures += 1;
    this.#livenessFailingSince ??= performance.now();
    const threshold = spec.probe.failureThreshold ?? 3;
    const window = (threshold - 1) * (spec.probe.periodSeconds ?? 10) * 1000;
    if (this.#livenessFailures >= threshold && performance.now() - this.#livenessFailingSince >= window) {
      this.#restartForProbe('liveness', spec.probe);
    }
  }

  #restartForProbe(which: 'startup' | 'liveness', probe: V1Probe): void {
    const child = this.#process!;
    this.#log.event(`${this.name}: ${which} probe failed (failureThreshold ${probe.failureThreshold ?? 3}); restarting: SIGTERM`);
    child.signal('SIGTERM');
    this.#killTimer = setTimeout(() => {
      this.#log.event(`${this.name}: still running ${PROBE_RESTART_GRACE_MS} ms after SIGTERM: SIGKILL`);
      child.signal('SIGKILL');
    }, PROBE_RESTART_GRACE_MS);
  }

  async #stop(deadline: number, runPreStop: boolean): Promise<void> {
    clearTimeout(this.#restartTimer);
    clearTimeout(this.#probeTimer);
    clearTimeout(this.#killTimer);
    for (const waiter of this.#waiters) waiter.reject(new Error(`container ${this.name} is stopping`));
    this.#waiters.clear();
    const child = this.#process;
    if (child?.alive()) {
      const { preStop } = this.#setup;
      if (runPreStop && preStop !== undefined) {
        this.#log.event(`${this.name}: preStop hook`);
        const ok = await withinMs(attempt(preStop, deadline - performance.now()), deadline - performance.now());
        this.#log.event(`${this.name}: preStop hook ${ok === true ? 'succeeded' : 'failed or ran out of time'}`);
      }
      this.#log.event(`${this.name}: SIGTERM`);
      child.signal('SIGTERM');
      if ((await withinMs(child.exited, deadline - performance.now())) === undefined) {
        this.#log.event(`${this.name}: still running at the end of the grace period: SIGKILL`);
        child.signal('SIGKILL');
        await child.exited;
      }
    }
    this.ready = false;
    this.started = false;
    this.#changed();
  }

  #waitUntil(satisfied: () => boolean): Promise<void> {
    if (satisfied()) return Promise.resolve();
    if (this.#stopping !== undefined) return Promise.reject(new Error(`container ${this.name} is stopping`));
    return new Promise((resolve, reject) => this.#waiters.add({ satisfied, resolve, reject }));
  }

  #changed(): void {
    for (const waiter of [...this.#waiters]) {
      if (waiter.satisfied()) {
        this.#waiters.delete(waiter);
        waiter.resolve();
      }
    }
    this.#onChange();
  }
}
