// A test caller run as a Python process of its own (real sockets with small buffers, so backpressure shows in
// the server rather than in the kernel), driven by lines: commands on its stdin, one answer line each on its
// stdout. The first line it says is `connected`, once its connection is open.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';

export class CallerProcess {
  readonly #child: ChildProcess;
  readonly #lines: AsyncIterator<string>;
  readonly #name: string;

  private constructor(child: ChildProcess, name: string) {
    this.#child = child;
    this.#name = name;
    this.#lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  }

  /** Starts `script` with `args`; resolves once it says it is connected. */
  static async start(script: string, args: string[]): Promise<CallerProcess> {
    const child = spawn('python3', [script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
    const caller = new CallerProcess(child, basename(script));
    const first = await caller.nextLine();
    if (first !== 'connected') throw new Error(`${caller.#name} said ${JSON.stringify(first)} instead of "connected"`);
    return caller;
  }

  send(command: string): void {
    this.#child.stdin!.write(`${command}\n`);
  }

  /** Its next line, or undefined once it has exited. */
  async nextLine(): Promise<string | undefined> {
    const next = await this.#lines.next();
    return next.done ? undefined : next.value;
  }

  /** Its next line, which must match `pattern` (`expected` names the shape in the error). */
  async answer(pattern: RegExp, expected: string): Promise<RegExpExecArray> {
    return this.parse(await this.nextLine(), pattern, expected);
  }

  /** `line`, one of its answers, matched against `pattern` (`expected` names the shape in the error). */
  parse(line: string | undefined, pattern: RegExp, expected: string): RegExpExecArray {
    const match = pattern.exec(line ?? '');
    if (!match) throw new Error(`${this.#name} said ${JSON.stringify(line)} instead of "${expected}"`);
    return match;
  }

  async close(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = once(this.#child, 'exit');
    this.#child.kill();
    await exited;
  }
}
