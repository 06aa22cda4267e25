// What one replica's RunLog status should hold: its runs in flight and its last finished runs, and running
// counts of every run it has seen. Pure bookkeeping, no I/O: the RunLog store saves into it and snapshots it
// into status patches; what a snapshot leaves out (trimmed for the byte budget) leaves the window too, so the
// window is always what the next patch will write.
import type { RunLogCounts } from '../../crds/runlog-schema.ts';
import type { RunRecord, RunStatus } from './record.ts';

export const DEFAULT_KEEP_FINISHED = 200;

/** Bytes around the runs in `{"counts":…,"runs":[…]}` beyond the counts themselves: keys, brackets, commas. */
const STATUS_ENVELOPE_BYTES = '{"counts":,"runs":[]}'.length;

interface Entry {
  record: RunRecord;
  /** The status this run is counted under in `counts`; its contribution moves when the status changes. */
  countedAs: RunStatus;
  /** Sequence number of the entry's last change: a snapshot taken at or after it contains that change. */
  changedAt: number;
  /** Saved through this store, so its state wins over the API server's on a merge; adopted entries mirror it. */
  owned: boolean;
  /** Some version of it reached the API server (so withdrawing it would no longer undo anything). */
  written: boolean;
  /**
   * Its JSON as of change `at`: unchanged runs (most of a large window) are not serialised every write. The
   * recorder saves a run after every change to it, so its JSON changes only with a save.
   */
  serialized?: { at: number; json: string; bytes: number };
}

export interface StatusSnapshot {
  /** `{"counts":…,"runs":[…]}`, runs newest first (by id: UUID v7 sorts by creation). */
  json: string;
  bytes: number;
  runs: number;
  /** Every change up to this sequence number is in the snapshot. */
  seq: number;
  /** Finished runs dropped from the window to fit the byte budget. */
  trimmedForBytes: number;
}

/** What a RunLog's status held when this replica's sidecar (re)started, or when the API server had changed it. */
export interface RemoteStatus {
  runs?: RunRecord[];
  counts?: RunLogCounts;
}

export function isFinished(status: RunStatus): boolean {
  return status !== 'pending' && status !== 'running';
}

function zeroCounts(): RunLogCounts {
  return { total: 0, success: 0, failure: 0, inFlight: 0 };
}

/** Adds (sign 1) or removes (sign -1) one run's contribution to the counts. Cancelled runs count in total only. */
function count(counts: RunLogCounts, status: RunStatus, sign: 1 | -1): void {
  counts.total += sign;
  if (status === 'success') counts.success += sign;
  else if (status === 'failure') counts.failure += sign;
  else if (!isFinished(status)) counts.inFlight += sign;
}

function serialize(entry: Entry): { json: string; bytes: number } {
  if (entry.serialized?.at !== entry.changedAt) {
    const json = JSON.stringify(entry.record);
    entry.serialized = { at: entry.changedAt, json, bytes: Buffer.byteLength(json) };
  }
  return entry.serialized;
}

export interface RunLogWindowOptions {
  keepFinished?: number;
  /** Bound on runs saved and not yet written; past it the oldest such finished runs are dropped. */
  maxUnwritten: number;
}

export class RunLogWindow {
  #keepFinished: number;
  readonly #maxUnwritten: number;
  readonly #inFlight = new Map<string, Entry>();
  /** Oldest finished first (completion order), so trimming takes from the front. */
  #finished = new Map<string, Entry>();
  /** Ids changed since the last written snapshot, in the order they were first changed. */
  readonly #unwritten = new Set<string>();
  /**
   * Records that left the window (trimmed or dropped). A later save of one (a webhook outcome arriving after
   * the run was trimmed) must not count it again, and does not bring it back: it is no longer among the newest.
   */
  readonly #retired = new WeakSet<RunRecord>();
  #counts = zeroCounts();
  #seq = 0;

  constructor(options: RunLogWindowOptions) {
    this.#keepFinished = options.keepFinished ?? DEFAULT_KEEP_FINISHED;
    this.#maxUnwritten = options.maxUnwritten;
  }

  /** Sequence number of the latest change. */
  get seq(): number {
    return this.#seq;
  }

  get unwritten(): number {
    return this.#unwritten.size;
  }

  get counts(): Readonly<RunLogCounts> {
    return this.#counts;
  }

  setKeepFinished(keepFinished: number): void {
    this.#keepFinished = keepFinished;
    this.#trimFinished();
  }

  /**
   * Adds or updates a run (the reference is kept and serialised at snapshot time). Returns how many finished
   * runs not yet written were dropped because the unwritten bound was passed.
   */
  upsert(record: RunRecord): number {
    const existing = this.#entry(record.id);
    if (existing === undefined && this.#retired.has(record)) return 0;
    this.#seq += 1;
    let entry: Entry;
    if (existing === undefined) {
      entry = { record, countedAs: record.status, changedAt: this.#seq, owned: true, written: false };
      count(this.#counts, record.status, 1);
    } else {
      entry = existing;
      if (entry.countedAs !== record.status) {
        count(this.#counts, entry.countedAs, -1);
        count(this.#counts, record.status, 1);
        entry.countedAs = record.status;
      }
      entry.record = record;
      entry.owned = true;
      entry.changedAt = this.#seq;
    }
    this.#place(entry);
    this.#unwritten.add(record.id);
    this.#trimFinished();
    return this.#dropOverflow();
  }

  /**
   * Takes back a run that never reached the API server (its durable save failed, so the caller refused it):
   * it leaves the window and the counts as if never saved. False when it can no longer be taken back.
   */
  withdraw(record: RunRecord): boolean {
    const entry = this.#entry(record.id);
    if (entry === undefined || entry.record !== record || entry.written) return false;
    this.#inFlight.delete(record.id);
    this.#finished.delete(record.id);
    this.#unwritten.delete(record.id);
    count(this.#counts, entry.countedAs, -1);
    return true;
  }

  /**
   * Takes over the status a previous sidecar of this replica left: its counts continue, its finished runs stay
   * in the window. Returns the runs it left in flight, which nothing will complete.
   */
  adopt(status: RemoteStatus): RunRecord[] {
    const unfinished: RunRecord[] = [];
    const derived = zeroCounts();
    for (const record of status.runs ?? []) {
      if (this.#entry(record.id) !== undefined) continue;
      this.#addAdopted(record);
      count(derived, record.status, 1);
      if (!isFinished(record.status)) unfinished.push(record);
    }
    // In flight is a gauge of the runs held, not a running total: taken from the runs, so it can never go negative.
    const base = status.counts === undefined ? derived : { ...status.counts, inFlight: derived.inFlight };
    for (const key of ['total', 'success', 'failure', 'inFlight'] as const) this.#counts[key] += base[key];
    this.#sortFinished();
    this.#trimFinished();
    return unfinished;
  }

  /**
   * Rebases onto a status someone else changed (the write conflicted): runs saved here keep their state; the
   * rest mirror the API server — added, updated or removed as it has them. Counts are this replica's and stay.
   */
  merge(runs: readonly RunRecord[]): void {
    const remoteIds = new Set<string>();
    for (const record of runs) {
      remoteIds.add(record.id);
      const entry = this.#entry(record.id);
      if (entry === undefined) {
        this.#addAdopted(record);
      } else if (!entry.owned) {
        entry.record = record;
        entry.serialized = undefined;
        this.#place(entry);
      }
    }
    for (const map of [this.#inFlight, this.#finished]) {
      for (const [id, entry] of map) {
        if (!entry.owned && !remoteIds.has(id)) map.delete(id);
      }
    }
    this.#sortFinished();
    this.#trimFinished();
  }

  /**
   * The status as it should be written now, within `maxBytes` of JSON: the oldest finished runs leave the
   * window until it fits; runs in flight always stay (even past the budget: dropping them would lose runs a
   * caller is still waiting on).
   */
  snapshot(maxBytes: number): StatusSnapshot {
    const countsJson = JSON.stringify(this.#counts);
    const serialized = new Map<string, string>();
    let bytes = STATUS_ENVELOPE_BYTES + countsJson.length;
    for (const map of [this.#inFlight, this.#finished]) {
      for (const [id, entry] of map) {
        const { json, bytes: size } = serialize(entry);
        serialized.set(id, json);
        bytes += size + 1; // and its comma
      }
    }
    let trimmedForBytes = 0;
    for (const [id, entry] of this.#finished) {
      if (bytes <= maxBytes) break;
      bytes -= serialize(entry).bytes + 1;
      serialized.delete(id);
      this.#retire(id, entry);
      trimmedForBytes += 1;
    }
    const ids = [...serialized.keys()].sort().reverse();
    const json = `{"counts":${countsJson},"runs":[${ids.map((id) => serialized.get(id)!).join(',')}]}`;
    return { json, bytes: Buffer.byteLength(json), runs: ids.length, seq: this.#seq, trimmedForBytes };
  }

  /** A snapshot taken at `seq` reached the API server. */
  markWritten(seq: number): void {
    for (const id of this.#unwritten) {
      const entry = this.#entry(id);
      if (entry === undefined || entry.changedAt > seq) continue;
      entry.written = true;
      this.#unwritten.delete(id);
    }
  }

  #entry(id: string): Entry | undefined {
    return this.#inFlight.get(id) ?? this.#finished.get(id);
  }

  #addAdopted(record: RunRecord): void {
    this.#place({ record, countedAs: record.status, changedAt: 0, owned: false, written: true });
  }

  /** Files the entry by its record's status; a run that just finished goes to the end (the newest finished). */
  #place(entry: Entry): void {
    const { id, status } = entry.record;
    if (isFinished(status)) {
      this.#inFlight.delete(id);
      // A finished run saved again (a webhook outcome) keeps its place: Map.set does not move an existing key.
      this.#finished.set(id, entry);
    } else {
      this.#finished.delete(id);
      this.#inFlight.set(id, entry);
    }
  }

  #trimFinished(): void {
    for (const [id, entry] of this.#finished) {
      if (this.#finished.size <= this.#keepFinished) break;
      this.#retire(id, entry);
    }
  }

  #dropOverflow(): number {
    let dropped = 0;
    // First changed first: for finished runs that is close to completion order, and it skips the written ones.
    for (const id of this.#unwritten) {
      if (this.#unwritten.size <= this.#maxUnwritten) break;
      const entry = this.#finished.get(id);
      if (entry === undefined) continue; // in flight: never dropped
      this.#retire(id, entry);
      dropped += 1;
    }
    return dropped;
  }

  #retire(id: string, entry: Entry): void {
    this.#finished.delete(id);
    this.#unwritten.delete(id);
    this.#retired.add(entry.record);
  }

  /** Completion order, after runs with their own completion times were adopted among this replica's. */
  #sortFinished(): void {
    const completion = (entry: Entry): number => Date.parse(entry.record.completedAt ?? entry.record.createdAt) || 0;
    const sorted = [...this.#finished].sort(([idA, a], [idB, b]) => completion(a) - completion(b) || (idA < idB ? -1 : 1));
    this.#finished = new Map(sorted);
  }
}
