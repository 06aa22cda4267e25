// A caller that pipelines requests and reads none of the answers until told to (unreading-caller.py, a real
// process with small socket buffers, so what piles up shows in the server rather than in the kernel).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';

const SCRIPT = resolve(import.meta.dirname, 'unreading-caller.py');

export class UnreadingCaller {
  readonly #child: ChildProcess;
  readonly #lines: AsyncIterator<string>;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.#lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  }

  /** Connects to `origin` and starts sending `request` `count` times; resolves once connected. */
  static async start(origin: string, count: number, request: string): Promise<UnreadingCaller> {
    const child = spawn('python3', [SCRIPT, new URL(origin).port, String(count), request], { stdio: ['pipe', 'pipe', 'inherit'] });
    const caller = new UnreadingCaller(child);
    const first = await caller.#nextLine();
    if (first !== 'connected') throw new Error(`unreading-caller.py said ${JSON.stringify(first)} instead of "connected"`);
    return caller;
  }

  /** Reads every answer at last: how many came, once all `count` have (or the server closed). */
  async readAll(): Promise<number> {
    this.#child.stdin!.write('read\n');
    const line = await this.#nextLine();
    const match = /^answers (\d+)$/.exec(line ?? '');
    if (!match) throw new Error(`unreading-caller.py said ${JSON.stringify(line)} instead of "answers N"`);
    return Number(match[1]);
  }

  async close(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = once(this.#child, 'exit');
    this.#child.kill();
    await exited;
  }

  async #nextLine(): Promise<string | undefined> {
    const next = await this.#lines.next();
    return next.done ? undefined : next.value;
  }
}
