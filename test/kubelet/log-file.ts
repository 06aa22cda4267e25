// The kubelet's log files, which keep the test's own output clean: one per pod, holding every line its
// containers print (prefixed with container and stream) and the kubelet's account of the pod (starts,
// probe failures, restarts, signals); and one for the kubelet itself. Tests print them when they fail.
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';
import type { Readable } from 'node:stream';

export class LogFile {
  readonly path: string;
  readonly #file: WriteStream;
  #closed = false;

  constructor(path: string) {
    this.path = path;
    this.#file = createWriteStream(path, { flags: 'a' });
  }

  /** A line of the kubelet's own. */
  event(text: string): void {
    this.#write('kubelet', text);
  }

  /** A line of the kubelet's own, with the error's stack. */
  error(text: string, error: unknown): void {
    this.#write('kubelet', `${text}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  }

  /** Copies a process stream into the log, line by line. */
  attach(container: string, stream: Readable, name: 'stdout' | 'stderr'): void {
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) this.#write(`${container} ${name}`, line);
    });
    stream.on('end', () => {
      if (partial !== '') this.#write(`${container} ${name}`, partial);
    });
  }

  /** The log so far (what has been flushed to the file). */
  read(): string {
    try {
      return readFileSync(this.path, 'utf8');
    } catch {
      return '';
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await new Promise<void>((resolve) => this.#file.end(() => resolve()));
  }

  #write(source: string, text: string): void {
    if (this.#closed) return;
    this.#file.write(`${new Date().toISOString()} [${source}] ${text}\n`);
  }
}
