// The benchmarks' servers are real processes, started as a user would start them. Every one is registered in
// a group that stops them all, whatever way the run ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const OUTPUT_KEPT_CHARS = 16 * 1024;
const STOP_GRACE_MS = 10_000;
/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcessSpec {
  name: string;
  command: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

export class BenchProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  #output = '';
  #outputListeners: Array<() => void> = [];

  constructor(spec: ProcessSpec) {
    this.name = spec.name;
    this.child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: string): void => {
      this.#output = (this.#output + chunk).slice(-OUTPUT_KEPT_CHARS);
      for (const listener of this.#outputListeners) listener();
    };
    this.child.stdout!.setEncoding('utf8').on('data', keep);
    this.child.stderr!.setEncoding('utf8').on('data', keep);
    this.exited = once(this.child, 'exit').then(() => undefined);
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error(`${this.name} did not start: ${this.#output}`);
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last lines it printed, for error messages. */
  output(): string {
    return this.#output;
  }

  /** Resolves with the first match of `pattern` in the output; rejects if the process exits first. */
  async waitForOutput(pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const match = pattern.exec(this.#output);
        if (!match) return;
        finish();
        resolve(match);
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`${this.name} did not print ${pattern} within ${timeoutMs} ms; its output:\n${this.#output}`));
      }, timeoutMs);
      const onExit = (): void => {
        finish();
        reject(new Error(`${this.name} exited (${this.child.exitCode ?? this.child.signalCode}) before printing ${pattern}; its output:\n${this.#output}`));
      };
      const finish = (): void => {
        clearTimeout(timer);
        this.child.off('exit', onExit);
        this.#outputListeners = this.#outputListeners.filter((listener) => listener !== check);
      };
      this.#outputListeners.push(check);
      this.child.once('exit', onExit);
      check();
    });
  }

  /** Resident set size, in MB (MiB), from /proc. */
  rssMb(): number {
    return this.#statusKb('VmRSS') / 1024;
  }

  /** The highest resident set size so far, in MB. */
  peakRssMb(): number {
    return this.#statusKb('VmHWM') / 1024;
  }

  #statusKb(field: string): number {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!match) throw new Error(`no ${field} in /proc/${this.pid}/status of ${this.name}`);
    return Number(match[1]);
  }

  /**
   * CPU time used so far (user + system, all threads) by the process and its direct children (nginx's worker
   * is a child of the process started), in ms; 10 ms resolution.
   */
  cpuMs(): number {
    const children = readFileSync(`/proc/${this.pid}/task/${this.pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
    return [this.pid, ...children].reduce((sum, pid) => sum + processCpuMs(pid), 0);
  }

  /** SIGTERM, then SIGKILL if it has not exited within the grace period. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const killer = setTimeout(() => this.child.kill('SIGKILL'), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(killer);
  }
}

function processCpuMs(pid: number): number {
  // Fields after the parenthesised command name, which may itself hold spaces.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** The processes of one benchmark run: stopped together, in reverse order of start. */
export class ProcessGroup {
  readonly #processes: BenchProcess[] = [];
  readonly #killOnExit = (): void => {
    // Last resort when the orchestrator dies without reaching stopAll(): nothing may outlive it.
    for (const started of this.#processes) if (started.running) started.child.kill('SIGKILL');
  };

  constructor() {
    process.on('exit', this.#killOnExit);
  }

  start(spec: ProcessSpec): BenchProcess {
    const started = new BenchProcess(spec);
    this.#processes.push(started);
    return started;
  }

  async stopAll(): Promise<void> {
    for (const started of [...this.#processes].reverse()) await started.stop();
    process.off('exit', this.#killOnExit);
  }
}

/** A port free on loopback now (the process that gets it binds it a moment later). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  await once(server, 'close');
  if (address === null || typeof address === 'string') throw new Error('could not read the port of a loopback listener');
  return address.port;
}

/** Polls `url` until it answers with `status`; fails with the process output once `timeoutMs` passes. */
export async function waitForHttp(url: string, owner: BenchProcess, options: { status?: number; timeoutMs?: number; method?: string } = {}): Promise<void> {
  const status = options.status ?? 200;
  const deadline = performance.now() + (options.timeoutMs ?? 30_000);
  let last = 'no answer yet';
  while (performance.now() < deadline) {
    if (!owner.running) throw new Error(`${owner.name} exited before ${url} answered; its output:\n${owner.output()}`);
    try {
      const response = await fetch(url, { method: options.method ?? 'GET', signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.status === status) return;
      last = `HTTP ${response.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${url} of ${owner.name} did not answer ${status} in time (last: ${last}); its output:\n${owner.output()}`);
}
