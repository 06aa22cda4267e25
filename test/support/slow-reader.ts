// A caller that reads its answer late, slowly, or never (slow-reader.py, a real process with small socket
// buffers, so the server meets backpressure after a few KiB rather than after the kernel's megabytes).
import { resolve } from 'node:path';
import { CallerProcess } from './caller-process.ts';

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
  readonly #process: CallerProcess;

  private constructor(process: CallerProcess) {
    this.#process = process;
  }

  /** Connects to `origin` and sends `request`; resolves once it is sent (at least into the socket). */
  static async start(origin: string, request: string): Promise<SlowReader> {
    return new SlowReader(await CallerProcess.start(SCRIPT, [new URL(origin).port, request]));
  }

  /**
   * Reads the whole answer, `chunkBytes` at a time with `pauseMs` after each; resolves with what came, or
   * rejects when the answer has not ended within `boundMs` (a stream that stalled).
   */
  async read(chunkBytes: number, pauseMs: number, boundMs = 30_000): Promise<SlowReadAnswer> {
    this.#process.send(`read ${chunkBytes} ${pauseMs}`);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the answer did not end within ${boundMs} ms of the caller starting to read`)), boundMs);
    });
    const line = await Promise.race([this.#process.nextLine(), expired]).finally(() => clearTimeout(timer));
    const match = this.#process.parse(line, /^read (\S+) (\d+) (\d+) ([01])$/, 'read STATUS BYTES EVENTS COMPLETE');
    return { status: match[1]!, bytes: Number(match[2]), events: Number(match[3]), complete: match[4] === '1' };
  }

  close(): Promise<void> {
    return this.#process.close();
  }
}
