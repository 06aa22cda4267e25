// A caller that reads its answer late, slowly, or never (slow-reader.py, a real process with small socket
// buffers, so the server meets backpressure after a few KiB rather than after the kernel's megabytes).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';

const SCRIPT = resolve(import.meta.dirname, 'slow-reader.py');

export interface SlowReadAnswer {
  /** The status code, or 'none' when no status line came. */
  status: string;
  bytes: number;
  /** `data: ` fields in what came. */
  events: number;
  /** The chunked body ended with its last chunk (false: the connection ended first). */
  complete: boolean;
}

export class SlowReader {
  readonly #child: ChildProcess;
  readonly #lines: AsyncIterator<string>;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.#lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  }

  /** Connects to `origin` and sends `request`; resolves once it is sent (at least into the socket). */
  static async start(origin: string, request: string): Promise<SlowReader> {
    const child = spawn('python3', [SCRIPT, new URL(origin).port, request], { stdio: ['pipe', 'pipe', 'inherit'] });
    const reader = new SlowReader(child);
    const first = await reader.#nextLine();
    if (first !== 'connected') throw new Error(`slow-reader.py said ${JSON.stringify(first)} instead of "connected"`);
    return reader;
  }

  /**
   * Reads the whole answer, `chunkBytes` at a time with `pauseMs` after each; resolves with what came, or
   * rejects when the answer has not ended within `boundMs` (a stream that stalled).
   */
  async read(chunkBytes: number, pauseMs: number, boundMs = 30_000): Promise<SlowReadAnswer> {
    this.#child.stdin!.write(`read ${chunkBytes} ${pauseMs}\n`);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the answer did not end within ${boundMs} ms of the caller starting to read`)), boundMs);
    });
    const line = await Promise.race([this.#nextLine(), expired]).finally(() => clearTimeout(timer));
    const match = /^read (\S+) (\d+) (\d+) ([01])$/.exec(line ?? '');
    if (!match) throw new Error(`slow-reader.py said ${JSON.stringify(line)} instead of "read STATUS BYTES EVENTS COMPLETE"`);
    return { status: match[1]!, bytes: Number(match[2]), events: Number(match[3]), complete: match[4] === '1' };
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
