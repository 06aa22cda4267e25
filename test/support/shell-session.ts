// One bash process that runs commands one at a time, as a person types them into a terminal: variables set by
// one command (TOKEN=$(…)) are there for the next. Each command's stdout, stderr and exit status come back
// separately, delimited by a marker the session prints after it. Commands read no input from the session
// (their stdin is /dev/null), so a command cannot swallow the ones after it.
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';

export interface CommandResult {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

const MARKER = '@@runlet-shell-session-done';
const STATUS = new RegExp(`\\n${MARKER} (\\d+)\\n$`);

export class ShellSession {
  readonly #bash: ChildProcessByStdio<Writable, Readable, Readable>;
  #stdout = '';
  #stderr = '';
  #exited = false;
  #changed: (() => void) | undefined;

  constructor(options: { cwd: string; env: NodeJS.ProcessEnv }) {
    this.#bash = spawn('bash', ['--noprofile', '--norc'], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      // Its own process group, so that close() also ends a command still running.
      detached: true,
    });
    const changed = () => this.#changed?.();
    this.#bash.stdout.setEncoding('utf8').on('data', (chunk: string) => ((this.#stdout += chunk), changed()));
    this.#bash.stderr.setEncoding('utf8').on('data', (chunk: string) => ((this.#stderr += chunk), changed()));
    this.#bash.once('exit', () => ((this.#exited = true), changed()));
    this.#bash.stdin.write('set -o pipefail\n');
  }

  /** Runs `command` (one line of shell); rejects when it has not finished within `timeoutMs`. */
  async run(command: string, timeoutMs: number): Promise<CommandResult> {
    if (this.#exited) throw new Error(`the shell has exited; cannot run: ${command}`);
    this.#stdout = '';
    this.#stderr = '';
    this.#bash.stdin.write(`{ ${command}\n} </dev/null; printf '\\n${MARKER} %d\\n' $?; printf '\\n${MARKER} 0\\n' >&2\n`);
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`not finished within ${timeoutMs} ms: ${command}\nstdout: ${this.#stdout}\nstderr: ${this.#stderr}`)), timeoutMs);
        this.#changed = () => {
          if (STATUS.test(this.#stdout) && STATUS.test(this.#stderr)) resolve();
          else if (this.#exited) reject(new Error(`the shell exited while running: ${command}\nstderr: ${this.#stderr}`));
        };
        this.#changed();
      });
    } finally {
      clearTimeout(timer);
      this.#changed = undefined;
    }
    return {
      status: Number(STATUS.exec(this.#stdout)![1]),
      stdout: this.#stdout.replace(STATUS, ''),
      stderr: this.#stderr.replace(STATUS, ''),
    };
  }

  /** Ends the shell and whatever it still runs. */
  async close(): Promise<void> {
    if (this.#exited) return;
    const exited = new Promise((resolve) => this.#bash.once('exit', resolve));
    process.kill(-this.#bash.pid!, 'SIGKILL');
    await exited;
  }
}
