// The whole webhook endpoints (query string included) of a pod sidecar's runs whose delivery is pending, in a
// file of the pod's emptyDir beside the RunLog journal. The RunLog keeps each endpoint without its query string
// (where callers put credentials), and the journal lets go of a run once a RunLog write replicates it, long
// before a slow run ends: a sidecar restarted in the same pod reads its predecessor's destinations here, to
// deliver the failure of the runs it lost. Like the journal, written without fsync: the file only has to
// outlive the sidecar container, not the node.
//
// The results shipper keeps more here (webhook-destination.ts OwedDelivery): the signing secret the call gave, and
// once the run has finished the body being delivered, so its successor signs what it sends and can send a
// finished run's interrupted delivery again. The secret is in no other store: not in the records the collector
// or the RunLog get, nor in the journal beside this file. The file is the sidecar's alone (mode 0600, in the
// emptyDir only the sidecar container mounts).
//
// JSON lines, each a delivery kept (the latest line of a run wins) or settled:
//   {"run":"<id>","destination":"https://…?token=…"}
//   {"run":"<id>","destination":"…","secret":"<base64>","body":"<the JSON text delivered>"}
//   {"settled":"<id>"}
// Kept bounded: emptied whenever no delivery is pending, rewritten with only the pending ones (a temporary file
// renamed over it) when it passes `maxBytes` and twice what the pending ones take (so large bodies are not
// rewritten at every line). A torn last line (a crash mid-append) is skipped.
import { mkdir, open, readFile, rename, rm, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { WebhookSigner } from '../webhook/sign.ts';
import type { OwedDelivery } from './webhook-destination.ts';

export const WEBHOOK_DESTINATIONS_FILE_NAME = 'webhook-destinations.jsonl';

const DEFAULT_MAX_BYTES = 1024 * 1024;

export interface WebhookDestinationsOptions {
  dataDir: string;
  logger: Logger;
  /** Past this size, the file is rewritten with the pending destinations only. Default 1 MiB. */
  maxBytes?: number;
}

/** A delivery as its line keeps it: the secret as base64 of the key's bytes. */
interface KeptFields {
  destination: string;
  secret?: string;
  body?: string;
}

/** A pending delivery, and its line as a rewrite writes it again. */
interface Kept {
  fields: KeptFields;
  line: string;
}

/** The deliveries a file holds that no line says are settled, by run id. */
function parseDeliveries(text: string): Map<string, Kept> {
  const pending = new Map<string, Kept>();
  for (const line of text.split('\n')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      continue;
    }
    // A line that is JSON but no object (`null`, a number: a damaged file) is skipped like one that is no JSON.
    if (typeof parsed !== 'object' || parsed === null) continue;
    const fields = parsed as Record<string, unknown>;
    if (typeof fields.run === 'string' && typeof fields.destination === 'string') {
      const kept: KeptFields = { destination: fields.destination };
      // A secret that decodes to no byte is no key (WebhookSigner refuses it): the delivery is kept without one.
      if (typeof fields.secret === 'string' && Buffer.from(fields.secret, 'base64').length > 0) kept.secret = fields.secret;
      if (typeof fields.body === 'string') kept.body = fields.body;
      pending.set(fields.run, { fields: kept, line: keptLine(fields.run, kept) });
    } else if (typeof fields.settled === 'string') pending.delete(fields.settled);
  }
  return pending;
}

function keptLine(runId: string, fields: KeptFields): string {
  return `${JSON.stringify({ run: runId, ...fields })}\n`;
}

export class WebhookDestinationsFile {
  readonly path: string;
  readonly #logger: Logger;
  readonly #maxBytes: number;
  #handle: FileHandle;
  #size: number;
  /** Deliveries not settled, this sidecar's and its predecessor's: what a rewrite keeps. */
  readonly #pending: Map<string, Kept>;
  /** Bytes of the pending deliveries' lines: what a rewrite would write. */
  #pendingBytes = 0;
  /** Lines waiting for the write under way; written together by the next. */
  #queued: string[] = [];
  #queuedWaiters: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
  #writing: Promise<void> | undefined;
  readonly #recoveredRunIds: readonly string[];

  private constructor(path: string, handle: FileHandle, size: number, pending: Map<string, Kept>, options: WebhookDestinationsOptions) {
    this.path = path;
    this.#handle = handle;
    this.#size = size;
    this.#pending = pending;
    for (const kept of pending.values()) this.#pendingBytes += Buffer.byteLength(kept.line);
    this.#recoveredRunIds = [...pending.keys()];
    this.#logger = options.logger;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  }

  /** Opens (or creates) the file in `dataDir`, reading what a previous sidecar of this pod left in it. */
  static async open(options: WebhookDestinationsOptions): Promise<WebhookDestinationsFile> {
    const path = join(options.dataDir, WEBHOOK_DESTINATIONS_FILE_NAME);
    try {
      await mkdir(options.dataDir, { recursive: true });
      const bytes = await readFile(path).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? Buffer.alloc(0) : Promise.reject(error)));
      // Only whole lines count; a torn last line (a crash mid-append) is cut off, or the next line appended
      // would be glued to it and be unreadable to the next sidecar.
      const completeBytes = bytes.lastIndexOf(0x0a) + 1;
      const handle = await open(path, 'a', 0o600);
      if (completeBytes < bytes.length) {
        options.logger.warn({ bytes: bytes.length - completeBytes }, `skipped the torn last line of the webhook destinations file ${path} (a crash during an append)`);
        await handle.truncate(completeBytes);
      }
      return new WebhookDestinationsFile(path, handle, completeBytes, parseDeliveries(bytes.subarray(0, completeBytes).toString('utf8')), options);
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
    return this.#pending.get(runId)?.fields.destination;
  }

  /** The whole pending delivery of `runId` as this file keeps it: its destination, signer (if a secret was kept) and body (if kept). */
  deliveryOf(runId: string): OwedDelivery | undefined {
    const kept = this.#pending.get(runId)?.fields;
    if (kept === undefined) return undefined;
    const delivery: OwedDelivery = { destination: kept.destination, signer: kept.secret === undefined ? null : new WebhookSigner(Buffer.from(kept.secret, 'base64')) };
    if (kept.body !== undefined) delivery.body = kept.body;
    return delivery;
  }

  /** Keeps the destination until `settle(runId)`; resolves once it is in the file, rejects naming it otherwise. */
  keep(runId: string, destination: string): Promise<void> {
    return this.#keep(runId, { destination });
  }

  /**
   * Keeps the delivery — destination, the signer's secret, the body once known — until `settle(runId)`, replacing
   * what was kept of it; resolves once it is in the file, rejects naming it otherwise.
   */
  keepDelivery(runId: string, delivery: OwedDelivery): Promise<void> {
    const fields: KeptFields = { destination: delivery.destination };
    if (delivery.signer !== null) fields.secret = delivery.signer.exportKey().toString('base64');
    if (delivery.body !== undefined) fields.body = delivery.body;
    return this.#keep(runId, fields);
  }

  #keep(runId: string, fields: KeptFields): Promise<void> {
    const line = keptLine(runId, fields);
    this.#forget(runId);
    this.#pending.set(runId, { fields, line });
    this.#pendingBytes += Buffer.byteLength(line);
    return new Promise((resolve, reject) => {
      this.#queued.push(line);
      this.#queuedWaiters.push({ resolve, reject });
      this.#startWriting();
    });
  }

  /** Drops `runId`'s pending delivery from what a rewrite keeps; false when none was pending. */
  #forget(runId: string): boolean {
    const kept = this.#pending.get(runId);
    if (kept === undefined) return false;
    this.#pending.delete(runId);
    this.#pendingBytes -= Buffer.byteLength(kept.line);
    return true;
  }

  /** The delivery of `runId` is settled: its destination leaves the file (failures only logged). */
  settle(runId: string): void {
    if (!this.#forget(runId)) return;
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
      else if (this.#size + Buffer.byteLength(lines) > Math.max(this.#maxBytes, 2 * this.#pendingBytes)) await this.#replaceWith([...this.#pending.values()].map((kept) => kept.line).join(''));
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
