// The RunLog store's write-ahead journal: a file in the pod's data dir (an emptyDir) that holds the durable
// saves (an async run's `pending` record, before its 202) until a RunLog write has replicated them. An append
// is one write() into the page cache, shared by every append that arrives while the previous one is being
// written (group commit), so a 202 waits tens of microseconds rather than for the API server and etcd.
//
// Why write() without fsync is enough: the emptyDir lives as long as the pod, so what reached its page cache
// survives a crash or restart of the sidecar container, which is what the journal is for; a node loss takes
// the emptyDir with it whether or not it was fsynced. What a node loss can lose is what no RunLog write has
// replicated yet: the store asks for one within ~50 ms of a durable save, so that window is one prompt write.
//
// The file is JSON lines, each an entry or a replication mark:
//   {"entry":17,"run":{…the RunRecord…}}    the run as saved durably; entries are numbered in append order
//   {"entry":18,"run":{…},"kept":{"json":"…","expiresAt":"…"}}   (the results shipper) with the run's kept result
//   {"replicatedThrough":17}                 every entry up to 17 is in the RunLog (the store says so after a write)
// A mark lets a journal that still holds replicated entries say so: without it, a crash would bring back runs
// the RunLog has since completed and let go of (keepFinished) as if they had been lost.
//
// The results shipper lets go of entries one by one instead (`release`): a run stays in its journal until its final
// state (its webhook settled) is collected, and a long run must not hold every later entry with it. Released
// entries stay in the file until the next compaction; read back after a crash, they only bring states the
// collector already took (it keeps the newest), or an older state of a run whose newer entry follows them.
//
// Kept bounded: once every entry is replicated the file is truncated to empty; when it passes `maxBytes` with
// some still unreplicated, it is rewritten with only those (a temporary file, renamed over it). At every point
// a crash leaves a file that holds each acknowledged entry not yet replicated: appends are written in place
// after the last complete line, a truncation happens only when nothing in the file is unreplicated, and a
// rewrite replaces the file in one rename. A torn last line (a crash mid-append) is skipped when read back.
import { constants } from 'node:fs';
import { access, mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUN_STATUSES } from '../../crds/run-record-values.ts';
import { restoreKeptResult, type KeptResult } from './kept-result.ts';
import { WebhookDestinationsFile } from './webhook-destinations-file.ts';

export const RUNLOG_JOURNAL_FILE_NAME = 'runlog-journal.jsonl';

/** Default bound on the file before its replicated entries are compacted away. */
const DEFAULT_MAX_BYTES = 1024 * 1024;

const NEWLINE = 0x0a;

export interface RunLogJournalOptions {
  /** The folder of the journal: the sidecar's `--data-dir`, created when missing. */
  dataDir: string;
  logger: Logger;
  /** Past this size, a file that still holds replicated entries is rewritten without them. Default 1 MiB. */
  maxBytes?: number;
}

interface QueuedAppend {
  entry: number;
  line: string;
  resolve: () => void;
  reject: (error: Error) => void;
}

/** An entry in the file that no RunLog write has replicated yet; its line is kept to rewrite the file. */
interface UnreplicatedEntry {
  entry: number;
  line: string;
}

/** What a journal file held when it was opened. */
interface JournalContents {
  /** Entries after the last replication mark, oldest first. */
  unreplicated: UnreplicatedEntry[];
  /** The latest state of each of their runs. */
  records: RunRecord[];
  /** The highest entry number or mark seen: numbering continues after it. */
  lastEntry: number;
  /** Bytes of complete lines; past them, a torn last line. */
  completeBytes: number;
  /** 1-based numbers of complete lines that are not an entry nor a mark. */
  unreadableLines: number[];
}

/** Where a rewrite writes the new file before renaming it over the journal. */
function rewritePathOf(path: string): string {
  return `${path}.rewrite`;
}

function entryLine(entry: number, record: RunRecord, kept: KeptResult | undefined): string {
  const result = kept === undefined ? '' : `,"kept":${JSON.stringify({ json: kept.json, expiresAt: kept.expiresAt })}`;
  return `{"entry":${entry},"run":${JSON.stringify(record)}${result}}\n`;
}

function isKeptResult(value: unknown): value is KeptResult {
  if (typeof value !== 'object' || value === null) return false;
  const { json, expiresAt } = value as Record<string, unknown>;
  return typeof json === 'string' && typeof expiresAt === 'string';
}

function markLine(through: number): string {
  return `{"replicatedThrough":${through}}\n`;
}

function isEntryNumber(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

function isRunRecord(value: unknown): value is RunRecord {
  if (typeof value !== 'object' || value === null) return false;
  const { id, status } = value as Record<string, unknown>;
  return typeof id === 'string' && RUN_STATUSES.some((known) => known === status);
}

/** Reads a journal file's bytes: its entries after the last mark, and where its complete lines end. */
function parseJournal(bytes: Buffer): JournalContents {
  const completeBytes = bytes.lastIndexOf(NEWLINE) + 1;
  const lines = bytes.subarray(0, completeBytes).toString('utf8').split('\n');
  lines.pop(); // the empty string after the last newline
  const entries: { entry: number; line: string; record: RunRecord }[] = [];
  const unreadableLines: number[] = [];
  let replicatedThrough = 0;
  lines.forEach((line, index) => {
    if (line === '') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      unreadableLines.push(index + 1);
      return;
    }
    const fields = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
    if (isEntryNumber(fields.replicatedThrough)) {
      replicatedThrough = Math.max(replicatedThrough, fields.replicatedThrough);
    } else if (isEntryNumber(fields.entry) && isRunRecord(fields.run)) {
      // The result travels beside the record, never in it (kept-result.ts): held by reference again.
      if (isKeptResult(fields.kept)) restoreKeptResult(fields.run, fields.kept);
      entries.push({ entry: fields.entry, line: `${line}\n`, record: fields.run });
    } else {
      unreadableLines.push(index + 1);
    }
  });
  const unreplicated = entries.filter((entry) => entry.entry > replicatedThrough);
  const latest = new Map<string, RunRecord>();
  for (const { record } of unreplicated) latest.set(record.id, record);
  return {
    unreplicated: unreplicated.map(({ entry, line }) => ({ entry, line })),
    records: [...latest.values()],
    lastEntry: entries.reduce((last, { entry }) => Math.max(last, entry), replicatedThrough),
    completeBytes,
    unreadableLines,
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Writes all of `bytes` at `position` (a write may take fewer bytes than given). Returns their length. */
async function writeFully(handle: FileHandle, bytes: Buffer, position: number): Promise<number> {
  let written = 0;
  while (written < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, written, bytes.length - written, position + written);
    written += bytesWritten;
  }
  return written;
}

export class RunLogJournal {
  readonly path: string;
  /** Beside the journal, the whole endpoints of pending webhook deliveries, kept until each settles. */
  readonly destinations: WebhookDestinationsFile;
  readonly #rewritePath: string;
  readonly #logger: Logger;
  readonly #maxBytes: number;
  #handle: FileHandle;
  /** Bytes of complete lines in the file: the next write goes there. */
  #size: number;
  #lastEntry: number;
  /** Every entry up to this one is in the RunLog, as the store last said. */
  #replicatedThrough: number;
  /** What the file says is replicated (by a mark, or by no longer holding the entries). */
  #recordedThrough: number;
  #queued: QueuedAppend[] = [];
  /** Entries let go of one by one (`release`) and not yet dropped from `#unreplicated`. */
  #released = new Set<number>();
  /** Entries in the file not yet replicated, in entry order. */
  #unreplicated: UnreplicatedEntry[];
  #recovered: RunRecord[];
  #writing: Promise<void> | undefined;
  #closed = false;

  private constructor(
    path: string,
    handle: FileHandle,
    contents: JournalContents,
    destinations: WebhookDestinationsFile,
    options: RunLogJournalOptions,
    logger: Logger,
  ) {
    this.path = path;
    this.destinations = destinations;
    this.#rewritePath = rewritePathOf(path);
    this.#logger = logger;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.#handle = handle;
    this.#size = contents.completeBytes;
    this.#lastEntry = contents.lastEntry;
    const firstUnreplicated = contents.unreplicated[0]?.entry ?? contents.lastEntry + 1;
    this.#replicatedThrough = firstUnreplicated - 1;
    this.#recordedThrough = this.#replicatedThrough;
    this.#unreplicated = contents.unreplicated;
    this.#recovered = contents.records;
  }

  /**
   * Opens (or creates) the journal in `dataDir`, reading what a previous sidecar of this pod left in it.
   * Rejects, naming the path, when the folder cannot be written: the sidecar then fails at start rather than
   * at its first async run.
   */
  static async open(options: RunLogJournalOptions): Promise<RunLogJournal> {
    const { dataDir } = options;
    const path = join(dataDir, RUNLOG_JOURNAL_FILE_NAME);
    const logger = options.logger.child({ journal: path });
    try {
      await mkdir(dataDir, { recursive: true });
      await access(dataDir, constants.W_OK);
      // Left by a rewrite a crash interrupted; the journal itself is whole either way.
      await rm(rewritePathOf(path), { force: true });
    } catch (error) {
      throw new Error(`the run journal's folder ${dataDir} is not writable: ${messageOf(error)}`, { cause: error });
    }
    let handle: FileHandle;
    try {
      // Not O_APPEND: writes go at an explicit position, after the last complete line.
      handle = await open(path, constants.O_RDWR | constants.O_CREAT, 0o600);
    } catch (error) {
      throw new Error(`the run journal ${path} cannot be opened for writing: ${messageOf(error)}`, { cause: error });
    }
    try {
      const contents = await readContents(handle, path, logger);
      const destinations = await WebhookDestinationsFile.open({ dataDir, logger });
      const journal = new RunLogJournal(path, handle, contents, destinations, options, logger);
      if (contents.records.length > 0) {
        logger.info({ entries: contents.unreplicated.length, runs: contents.records.length }, 'the run journal holds runs a previous sidecar of this pod saved and did not replicate');
      }
      return journal;
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** The number of the latest entry appended (or being appended). */
  get lastEntry(): number {
    return this.#lastEntry;
  }

  /**
   * The runs a previous sidecar of this pod journaled and no RunLog write replicated, latest state of each;
   * handed over once (they stay in the file until a write replicates them).
   */
  takeRecovered(): RunRecord[] {
    const recovered = this.#recovered;
    this.#recovered = [];
    return recovered;
  }

  /**
   * Appends the record as it is now (later changes to the object are not journaled), with its kept result when
   * given (read back beside the record). Resolves once it is in the file; rejects, naming the file, when the
   * write fails.
   */
  append(record: RunRecord, kept?: KeptResult): Promise<void> {
    if (this.#closed) return Promise.reject(new Error(`the run journal ${this.path} is closed: cannot append run ${record.id}`));
    this.#lastEntry += 1;
    const line = entryLine(this.#lastEntry, record, kept);
    return new Promise<void>((resolve, reject) => {
      this.#queued.push({ entry: this.#lastEntry, line, resolve, reject });
      this.#startWriting();
    });
  }

  /** Every entry up to `through` is in the RunLog: the journal can let go of them (once closed, it keeps them). */
  replicated(through: number): void {
    if (this.#closed || through <= this.#replicatedThrough) return;
    this.#replicatedThrough = Math.min(through, this.#lastEntry);
    this.#startWriting();
  }

  /**
   * These entries are no longer needed: the file lets go of them at its next compaction — at once when nothing
   * else in it is needed (an entry still being appended, once it is written).
   */
  release(entries: Iterable<number>): void {
    if (this.#closed) return;
    for (const entry of entries) this.#released.add(entry);
    if (this.#released.size > 0) this.#startWriting();
  }

  /** Finishes the writes under way, then closes the file; what is unreplicated stays in it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    while (this.#writing !== undefined) await this.#writing;
    await this.#handle.close();
    await this.destinations.close();
  }

  /** Starts the writer unless it runs: one file operation at a time, so appends and compactions never interleave. */
  #startWriting(): void {
    this.#writing ??= this.#writeAll().finally(() => {
      this.#writing = undefined;
      // Work that arrived after the writer's last look.
      if (this.#queued.length > 0 || this.#replicatedThrough > this.#recordedThrough || this.#released.size > 0) this.#startWriting();
    });
  }

  async #writeAll(): Promise<void> {
    for (;;) {
      const appending = this.#queued.length > 0;
      if (appending) await this.#writeQueued();
      // After each append too, so a steady stream of appends does not hold compaction off.
      if (this.#replicatedThrough > this.#recordedThrough) await this.#recordReplication();
      else if (this.#released.size > 0) await this.#dropReleased();
      else if (!appending) return;
    }
  }

  /** Writes every queued append in one write (group commit). */
  async #writeQueued(): Promise<void> {
    const batch = this.#queued;
    this.#queued = [];
    const position = this.#size;
    try {
      this.#size += await writeFully(this.#handle, Buffer.from(batch.map((append) => append.line).join('')), position);
    } catch (error) {
      await this.#cutTornTail(position);
      const failure = new Error(`could not append ${batch.length} run record(s) to the run journal ${this.path}: ${messageOf(error)}`, { cause: error });
      for (const append of batch) append.reject(failure);
      return;
    }
    for (const append of batch) {
      this.#unreplicated.push({ entry: append.entry, line: append.line });
      append.resolve();
    }
  }

  /** After a failed append: drops what part of it reached the file, so the next append follows a whole line. */
  async #cutTornTail(size: number): Promise<void> {
    try {
      await this.#handle.truncate(size);
    } catch (error) {
      this.#logger.warn({ err: error, bytes: size }, 'could not cut a failed append off the run journal; reading it back will skip it');
    }
  }

  /** Lets go of the replicated entries: empties the file, rewrites it without them, or marks them. */
  async #recordReplication(): Promise<void> {
    const through = this.#replicatedThrough;
    this.#recordedThrough = through;
    const replicated = this.#unreplicated.findIndex((entry) => entry.entry > through);
    this.#unreplicated.splice(0, replicated === -1 ? this.#unreplicated.length : replicated);
    try {
      if (this.#unreplicated.length === 0) {
        // Nothing in the file is needed any more, and nothing is being appended (one operation at a time).
        if (this.#size > 0) await this.#handle.truncate(0);
        this.#size = 0;
        return;
      }
      if (this.#size > this.#maxBytes) {
        await this.#rewrite();
        return;
      }
    } catch (error) {
      this.#logger.warn({ err: error, bytes: this.#size }, 'could not compact the run journal; marking its replicated entries instead');
    }
    try {
      this.#size += await writeFully(this.#handle, Buffer.from(markLine(through)), this.#size);
    } catch (error) {
      // The next mark covers these entries too; until then a crash would recover them from the journal.
      this.#logger.warn({ err: error, through }, 'could not mark replicated entries in the run journal');
      await this.#cutTornTail(this.#size);
    }
  }

  /** Drops the released entries: empties the file when nothing in it is needed, rewrites it past its bound. */
  async #dropReleased(): Promise<void> {
    // An entry still queued is let go of once written; one whose append failed was never in the file.
    const queued = new Set(this.#queued.map((append) => append.entry));
    const released = this.#released;
    this.#released = new Set([...released].filter((entry) => queued.has(entry)));
    this.#unreplicated = this.#unreplicated.filter((entry) => !released.has(entry.entry));
    try {
      if (this.#unreplicated.length === 0) {
        if (this.#size > 0) await this.#handle.truncate(0);
        this.#size = 0;
      } else if (this.#size > Math.max(this.#maxBytes, 2 * this.#unreplicatedBytes())) {
        await this.#rewrite();
      }
    } catch (error) {
      // Released entries left in the file are harmless read back (see the top); the next release tries again.
      this.#logger.warn({ err: error, bytes: this.#size }, 'could not compact the run journal');
    }
  }

  #unreplicatedBytes(): number {
    let bytes = 0;
    for (const entry of this.#unreplicated) bytes += entry.line.length;
    return bytes;
  }

  /** Replaces the file with one of the unreplicated entries only: written aside, then renamed over it. */
  async #rewrite(): Promise<void> {
    const bytes = Buffer.from(this.#unreplicated.map((entry) => entry.line).join(''));
    const handle = await open(this.#rewritePath, 'w', 0o600);
    try {
      await writeFully(handle, bytes, 0);
      await rename(this.#rewritePath, this.path);
    } catch (error) {
      await handle.close();
      await rm(this.#rewritePath, { force: true });
      throw error;
    }
    const previous = this.#handle;
    this.#handle = handle;
    this.#size = bytes.length;
    this.#logger.debug({ entries: this.#unreplicated.length, bytes: bytes.length }, 'rewrote the run journal with its unreplicated entries only');
    await previous.close();
  }
}

/** The file's contents; a torn last line is skipped with a warning and cut off, so appends follow a whole line. */
async function readContents(handle: FileHandle, path: string, logger: Logger): Promise<JournalContents> {
  const { size } = await handle.stat();
  const bytes = Buffer.alloc(size);
  let read = 0;
  while (read < size) {
    const { bytesRead } = await handle.read(bytes, read, size - read, read);
    if (bytesRead === 0) break;
    read += bytesRead;
  }
  const contents = parseJournal(bytes.subarray(0, read));
  if (contents.unreadableLines.length > 0) {
    logger.warn({ lines: contents.unreadableLines }, `skipped ${contents.unreadableLines.length} unreadable line(s) of the run journal ${path}`);
  }
  if (contents.completeBytes < read) {
    logger.warn({ bytes: read - contents.completeBytes }, `skipped the torn last line of the run journal ${path} (a crash during an append)`);
  }
  if (contents.unreplicated.length === 0) {
    // Every entry was replicated (or there were none): nothing in the file is needed.
    if (read > 0) await handle.truncate(0);
    return { ...contents, completeBytes: 0 };
  }
  if (contents.completeBytes < read) await handle.truncate(contents.completeBytes);
  return contents;
}
