// A caller that pipelines requests and reads none of the answers until told to (unreading-caller.py, a real
// process with small socket buffers, so what piles up shows in the server rather than in the kernel).
import { resolve } from 'node:path';
import { CallerProcess } from './caller-process.ts';

const SCRIPT = resolve(import.meta.dirname, 'unreading-caller.py');

export class UnreadingCaller {
  readonly #process: CallerProcess;

  private constructor(process: CallerProcess) {
    this.#process = process;
  }

  /** Connects to `origin` and starts sending `request` `count` times; resolves once connected. */
  static async start(origin: string, count: number, request: string): Promise<UnreadingCaller> {
    return new UnreadingCaller(await CallerProcess.start(SCRIPT, [new URL(origin).port, String(count), request]));
  }

  /** Reads every answer at last: how many came, once all `count` have (or the server closed). */
  async readAll(): Promise<number> {
    this.#process.send('read');
    const match = await this.#process.answer(/^answers (\d+)$/, 'answers N');
    return Number(match[1]);
  }

  close(): Promise<void> {
    return this.#process.close();
  }
}
