// The whole webhook endpoints (query string included) of a pod sidecar's runs whose delivery is pending, in a
// file of the pod's emptyDir beside the RunLog journal. The RunLog keeps each endpoint without its query string
// (where callers put credentials), and the journal lets go of a run once a RunLog write replicates it, long
// before a slow run ends: a sidecar restarted in the same pod reads its predecessor's destinations here, to
// deliver the failure of the runs it lost. Like the journal, written without fsync: the file only has to
// outlive the sidecar container, not the node.
//
// JSON lines, each a destination kept or a delivery settled:
//   {"run":"<id>","destination":"https://…?token=…"}
//   {"settled":"<id>"}
// Kept bounded: emptied whenever no destination is pending, rewritten with only the pending ones (a temporary
// file renamed over it) when it passes `maxBytes`. A torn last line (a crash mid-append) is skipped.
import { mkdir, open, readFile, rename, rm, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';

export const WEBHOOK_DESTINATIONS_FILE_NAME = 'webhook-destinations.jsonl';

const DEFAULT_MAX_BYTES = 1024 * 1024;

export interface WebhookDestinationsOptions {
  dataDir: string;
  logger: Logger;
  /** Past this size, the file is rewritten with the pending destinations only. Default 1 MiB. */
  maxBytes?: number;
}

/** The destinations a file holds that no line says are settled, by run id. */
function parseDestinations(text: string): Map<string, string> {
  const pending = new Map<string, string>();
  for (const line of text.split('\n')) {
    let fields: Record<string, unknown>;
    try {
      fields = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (typeof fields.run === 'string' && typeof fields.destination === 'string') pending.set(fields.run, fields.destination);
    else if (typeof fields.settled === 'string') pending.delete(fields.settled);
  }
  return pending;
}

function keptLine(runId: string, destination: string): string {
  return `${JSON.stringify({ run: runId, destination })}\n`;
}

export class WebhookDestinationsFile {
  readonly path: string;
  readonly #logger: Logger;
  readonly #maxBytes: number;
  #handle: FileHandle;
  #size: number;
  /** Destinations not settled, this sidecar's and its predecessor's: what a rewrite keeps. */
  readonly #pending: Map<string, string>;
  /** Lines waiting for the write under way; written together by the next. */
  #queued: string[] = [];
  #queuedWaiters: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
  #writing: Promise<void> | undefined;
  readonly #recoveredRunIds: readonly string[];

  private constructor(path: string, handle: FileHandle, size: number, pending: Map<string, string>, options: WebhookDestinationsOptions) {
    this.path = path;
    this.#handle = handle;
    this.#size = size;
    this.#pending = pending;
    this.#recoveredRunIds = [...pending.keys()];
    this.#logger = options.logger;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  }

  /** Opens (or creates) the file in `dataDir`, reading what a previous sidecar of this pod left in it. */
  static async open(options: WebhookDestinationsOptions): Promise<WebhookDestinationsFile> {
    const path = join(options.dataDir, WEBHOOK_DESTINATIONS_FILE_NAME);
    try {
      await mkdir(options.dataDir, { recursive: true });
      const text = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? '' : Promise.reject(error)));
      const handle = await open(path, 'a', 0o600);
      return new WebhookDestinationsFile(path, handle, Buffer.byteLength(text), parseDestinations(text), options);
    } catch (error) {
      throw new Error(`the webhook destinations file ${path} cannot be opened: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Runs whose destination a previous sidecar of this pod kept and did not settle. */
  get recoveredRunIds(): readonly string[] {
    return this.#recoveredRunIds;
  }

  /** The destination of `runId`'s pending delivery, if this file holds one (kept by a previous sidecar, or this one). */
  destinationOf(runId: string): string | undefined {
    return this.#pending.get(runId);
  }

  /** Keeps the destination until `settle(runId)`; resolves once it is in the file, rejects naming it otherwise. */
  keep(runId: string, destination: string): Promise<void> {
    this.#pending.set(runId, destination);
    return new Promise((resolve, reject) => {
      this.#queued.push(keptLine(runId, destination));
      this.#queuedWaiters.push({ resolve, reject });
      this.#startWriting();
    });
  }

  /** The delivery of `runId` is settled: its destination leaves the file (failures only logged). */
  settle(runId: string): void {
    if (!this.#pending.delete(runId)) return;
    this.#queued.push(`${JSON.stringify({ settled: runId })}\n`);
    this.#queuedWaiters.push({ resolve: () => undefined, reject: (error) => this.#logger.warn({ err: error, runId }, error.message) });
    this.#startWriting();
  }

  async close(): Promise<void> {
    while (this.#writing !== undefined) await this.#writing;
    await this.#handle.close();
  }

  #startWriting(): void {
    this.#writing ??= this.#writeQueued().finally(() => {
      this.#writing = undefined;
      if (this.#queued.length > 0) this.#startWriting();
    });
  }

  async #writeQueued(): Promise<void> {
    const lines = this.#queued.join('');
    const waiters = this.#queuedWaiters;
    this.#queued = [];
    this.#queuedWaiters = [];
    try {
      if (this.#pending.size === 0) await this.#replaceWith('');
      else if (this.#size + Buffer.byteLength(lines) > this.#maxBytes) await this.#replaceWith([...this.#pending].map(([run, destination]) => keptLine(run, destination)).join(''));
      else {
        await this.#handle.appendFile(lines);
        this.#size += Buffer.byteLength(lines);
      }
    } catch (error) {
      const failure = new Error(`could not write to the webhook destinations file ${this.path}: ${(error as Error).message}`, { cause: error });
      for (const waiter of waiters) waiter.reject(failure);
      return;
    }
    for (const waiter of waiters) waiter.resolve();
  }

  /** Empties the file, or replaces it in one rename with `text`: a crash leaves the old file or the new one. */
  async #replaceWith(text: string): Promise<void> {
    if (text === '') {
      await this.#handle.truncate(0);
      this.#size = 0;
      return;
    }
    const aside = `${this.path}.rewrite`;
    try {
      await writeFile(aside, text, { mode: 0o600 });
      await rename(aside, this.path);
    } catch (error) {
      await rm(aside, { force: true });
      throw error;
    }
    await this.#handle.close();
    this.#handle = await open(this.path, 'a', 0o600);
    this.#size = Buffer.byteLength(text);
  }
}
