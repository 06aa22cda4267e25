// What one replica's RunLog status should hold: its runs in flight and its last finished runs, and running
// counts of every run it has seen. Pure bookkeeping, no I/O: the RunLog store saves into it and snapshots it
// into status patches; what a snapshot leaves out (trimmed for the byte budget) leaves the window too, so the
// window is always what the next patch will write.
//
// Cost: the sidecar saves every run about three times (pending, running, finished), thousands of times a
// second, so a save is a Map lookup, a few flags and array pushes (runlog-queue.ts), and at most once a run
// leaving. A snapshot serialises only runs changed since they were last serialised, and of the finished runs
// only the newest that fit the byte budget: older ones leave unserialised, and a status of many new runs can
// be serialised ahead in slices (prepare). Runs leave in two steps, the second (freeing the id, remembering
// the record) spread over later saves, so trimming thousands at a snapshot costs it little.
import type { RunRecord, RunStatus } from '../../crds/run-record-schema.ts';
import type { RunLogCounts } from '../../crds/runlog-schema.ts';
import { LazyQueue } from './runlog-queue.ts';

export const DEFAULT_KEEP_FINISHED = 200;

/**
 * Retired runs whose leaving each save finishes. A run retires once and is saved at least once, so two a save
 * outpace the retiring: after a snapshot trims thousands at once, the next few thousand saves take them away.
 */
const LEAVING_PER_SAVE = 2;

/** Bytes around the runs in `{"counts":…,"runs":[…]}` beyond the counts themselves: keys, brackets. */
const STATUS_ENVELOPE_BYTES = '{"counts":,"runs":[]}'.length;

class Entry {
  readonly id: string;
  record: RunRecord;
  /** The status this run is counted under in `counts`; its contribution moves when the status changes. */
  countedAs: RunStatus;
  /** Filed among the finished runs rather than those in flight. */
  finished: boolean;
  /** Sequence number of the entry's last change: a snapshot taken at or after it contains that change. */
  changedAt: number;
  /** Saved through this store, so its state wins over the API server's on a merge; adopted entries mirror it. */
  owned: boolean;
  /** Some version of it reached the API server (so withdrawing it would no longer undo anything). */
  written: boolean;
  /** Changed since the last snapshot that was written: counted in `unwritten`, and in the unwritten queue. */
  unwritten = false;
  /** Still in the window; false for good once it leaves (trimmed, dropped, withdrawn, or gone remotely). */
  present = true;
  /** Retired, and still in the window's map until its leaving is finished (in the leaving queue). */
  leaving = false;
  /**
   * Its JSON as of change `jsonAt`: unchanged runs (most of a large window) are not serialised every write.
   * The recorder saves a run after every change to it, so its JSON changes only with a save.
   */
  json = '';
  bytes = 0;
  jsonAt = -1;

  constructor(record: RunRecord, changedAt: number, owned: boolean) {
    this.id = record.id;
    this.record = record;
    this.countedAs = record.status;
    this.finished = isFinished(record.status);
    this.changedAt = changedAt;
    this.owned = owned;
    this.written = !owned;
  }
}

export interface StatusSnapshot {
  /** `{"counts":…,"runs":[…]}`, runs newest first (by id: UUID v7 sorts by creation). */
  json: string;
  /** UTF-8 bytes of `json`. */
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

/** How far along a run is: a run's status only ever moves to a later stage. */
function stage(status: RunStatus): number {
  if (status === 'pending') return 0;
  return status === 'running' ? 1 : 2;
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

/** Serialises the entry's record unless its JSON is as of its last change already. */
function serialize(entry: Entry): void {
  if (entry.jsonAt === entry.changedAt) return;
  entry.json = JSON.stringify(entry.record);
  entry.bytes = Buffer.byteLength(entry.json);
  entry.jsonAt = entry.changedAt;
}

/** The UTF-8 bytes of a status JSON as runs join it, against its budget. */
class ByteBudget {
  readonly countsJson: string;
  bytes: number;
  readonly #maxBytes: number;
  #runs = 0;

  constructor(maxBytes: number, counts: RunLogCounts) {
    this.#maxBytes = maxBytes;
    this.countsJson = JSON.stringify(counts);
    // Keys and digits only: as many bytes as characters.
    this.bytes = STATUS_ENVELOPE_BYTES + this.countsJson.length;
  }

  /** The serialised entry joins the runs within the budget, with the comma before it. */
  fits(entry: Entry): boolean {
    return this.bytes + entry.bytes + (this.#runs > 0 ? 1 : 0) <= this.#maxBytes;
  }

  add(entry: Entry): void {
    this.bytes += entry.bytes + (this.#runs > 0 ? 1 : 0);
    this.#runs += 1;
  }
}

/** Newest first, as the status lists runs. Ids are unique within a window. */
function byIdDescending(a: Entry, b: Entry): number {
  return a.id < b.id ? 1 : -1;
}

/** Completion order, for runs adopted with their own completion times among this replica's. */
function byCompletion(a: Entry, b: Entry): number {
  const completion = (entry: Entry): number => Date.parse(entry.record.completedAt ?? entry.record.createdAt) || 0;
  return completion(a) - completion(b) || (a.id < b.id ? -1 : 1);
}

export interface RunLogWindowOptions {
  keepFinished?: number;
  /** Bound on runs saved and not yet written; past it the oldest such finished runs are dropped. */
  maxUnwritten: number;
}

export class RunLogWindow {
  #keepFinished: number;
  readonly #maxUnwritten: number;
  /** Every run in the window by id, and the retired ones whose leaving is not yet finished (`leaving`). */
  readonly #entries = new Map<string, Entry>();
  readonly #inFlight = new LazyQueue<Entry>((entry) => entry.present && !entry.finished);
  /** Oldest finished first (completion order), so trimming takes from the front. */
  readonly #finished = new LazyQueue<Entry>((entry) => entry.present && entry.finished);
  /** Entries changed since the last written snapshot, in the order they were first changed. */
  readonly #unwritten = new LazyQueue<Entry>((entry) => entry.unwritten);
  /**
   * Retired entries still in `#entries`, oldest first. Retiring a run only marks it; the rest (freeing its id,
   * remembering its record in `#retired`) is done a few at a time by later saves, so a snapshot that trims
   * thousands of runs for the byte budget does not spend milliseconds on it in one go.
   */
  readonly #leaving = new LazyQueue<Entry>((entry) => entry.leaving);
  #inFlightCount = 0;
  #finishedCount = 0;
  #unwrittenCount = 0;
  #leavingCount = 0;
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
    return this.#unwrittenCount;
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
    if (this.#leavingCount > 0) this.#finishLeaving(LEAVING_PER_SAVE);
    const finished = isFinished(record.status);
    let entry = this.#entries.get(record.id);
    if (entry?.leaving === true) {
      // Retired and still leaving: once left, its record is known as retired, and its id free for another's.
      this.#finishLeavingOf(entry);
      entry = undefined;
    }
    // Only finished runs ever leave, and a run's status never goes back (RunRecorder moves it forward only).
    if (entry === undefined && finished && this.#retired.has(record)) return 0;
    this.#seq += 1;
    if (entry === undefined) {
      entry = new Entry(record, this.#seq, true);
      this.#entries.set(entry.id, entry);
      count(this.#counts, record.status, 1);
      this.#file(entry);
    } else {
      if (entry.countedAs !== record.status) {
        count(this.#counts, entry.countedAs, -1);
        count(this.#counts, record.status, 1);
        entry.countedAs = record.status;
      }
      entry.record = record;
      entry.owned = true;
      entry.changedAt = this.#seq;
      // A finished run saved again (a webhook outcome) keeps its place among the finished.
      if (finished !== entry.finished) this.#refile(entry, finished);
    }
    if (!entry.unwritten) {
      entry.unwritten = true;
      this.#unwrittenCount += 1;
      this.#unwritten.push(entry, this.#unwrittenCount);
    }
    if (this.#finishedCount > this.#keepFinished) this.#trimFinished();
    return this.#unwrittenCount > this.#maxUnwritten ? this.#dropOverflow() : 0;
  }

  /** True when a run with this id is in the window (kept, or saved and not yet written). */
  has(id: string): boolean {
    return this.#present(id) !== undefined;
  }

  /**
   * Takes back a run that never reached the API server (its durable save failed, so the caller refused it):
   * it leaves the window and the counts as if never saved. False when it can no longer be taken back.
   */
  withdraw(record: RunRecord): boolean {
    const entry = this.#present(record.id);
    if (entry === undefined || entry.record !== record || entry.written) return false;
    this.#remove(entry);
    count(this.#counts, entry.countedAs, -1);
    return true;
  }

  /**
   * Takes over the status a previous sidecar of this replica left: its counts continue, its finished runs stay
   * in the window. `journaled` are the runs that sidecar saved durably in its journal: each joins the status
   * unless the status holds its run in the same or a later state, and is counted if the status did not count
   * it. Returns the runs left in flight, which nothing will complete.
   */
  adopt(status: RemoteStatus, journaled: readonly RunRecord[] = []): RunRecord[] {
    const runs = new Map<string, RunRecord>();
    for (const record of status.runs ?? []) runs.set(record.id, record);
    /** What the journaled runs add to the counts the status carries. */
    const uncounted = zeroCounts();
    for (const record of journaled) {
      const held = runs.get(record.id);
      if (held !== undefined && stage(held.status) >= stage(record.status)) continue;
      if (held !== undefined) count(uncounted, held.status, -1);
      count(uncounted, record.status, 1);
      runs.set(record.id, record);
    }
    const unfinished: RunRecord[] = [];
    const derived = zeroCounts();
    for (const record of runs.values()) {
      if (this.#present(record.id) !== undefined) continue;
      this.#entries.set(record.id, new Entry(record, 0, false));
      count(derived, record.status, 1);
      if (!isFinished(record.status)) unfinished.push(record);
    }
    // In flight is a gauge of the runs held, not a running total: taken from the runs, so it can never go negative.
    const { counts } = status;
    const base =
      counts === undefined
        ? derived
        : {
            total: counts.total + uncounted.total,
            success: counts.success + uncounted.success,
            failure: counts.failure + uncounted.failure,
            inFlight: derived.inFlight,
          };
    for (const key of ['total', 'success', 'failure', 'inFlight'] as const) this.#counts[key] += base[key];
    this.#refileAll();
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
      const entry = this.#present(record.id);
      if (entry === undefined) {
        this.#entries.set(record.id, new Entry(record, 0, false));
      } else if (!entry.owned) {
        entry.record = record;
        entry.finished = isFinished(record.status);
        entry.jsonAt = -1;
      }
    }
    for (const entry of this.#entries.values()) {
      if (entry.present && !entry.owned && !remoteIds.has(entry.id)) this.#remove(entry);
    }
    this.#refileAll();
    this.#trimFinished();
  }

  /**
   * Serialises up to `maxRecords` of the runs the next snapshot within `maxBytes` will hold, so that a large
   * status can be serialised a slice at a time with other work in between. True while some remain; the
   * snapshot serialises those, and any that change meanwhile, itself.
   */
  prepare(maxBytes: number, maxRecords: number): boolean {
    let left = maxRecords;
    let more = false;
    const budget = new ByteBudget(maxBytes, this.#counts);
    /** Serialises the entry unless the slice is full; false (and `more`) when it is. */
    const serializeInSlice = (entry: Entry): boolean => {
      if (entry.jsonAt === entry.changedAt) return true;
      if (left === 0) {
        more = true;
        return false;
      }
      left -= 1;
      serialize(entry);
      return true;
    };
    this.#inFlight.visitNewestFirst((entry) => {
      if (!serializeInSlice(entry)) return false;
      budget.add(entry);
      return true;
    });
    if (more) return true;
    this.#finished.visitNewestFirst((entry) => {
      if (!serializeInSlice(entry) || !budget.fits(entry)) return false;
      budget.add(entry);
      return true;
    });
    return more;
  }

  /**
   * The status as it should be written now, within `maxBytes` of JSON: the oldest finished runs leave the
   * window until it fits; runs in flight always stay (even past the budget: dropping them would lose runs a
   * caller is still waiting on).
   */
  snapshot(maxBytes: number): StatusSnapshot {
    const budget = new ByteBudget(maxBytes, this.#counts);
    const kept: Entry[] = [];
    this.#inFlight.visitNewestFirst((entry) => {
      serialize(entry);
      budget.add(entry);
      kept.push(entry);
      return true;
    });
    // The newest finished runs that fit; the first that does not, and every older one, leave (unserialised).
    let trimmedForBytes = 0;
    this.#finished.visitNewestFirst((entry) => {
      if (trimmedForBytes === 0) {
        serialize(entry);
        if (budget.fits(entry)) {
          budget.add(entry);
          kept.push(entry);
          return true;
        }
      }
      this.#retire(entry);
      trimmedForBytes += 1;
      return true;
    });
    kept.sort(byIdDescending);
    const runs = kept.map((entry) => entry.json).join(',');
    const json = `{"counts":${budget.countsJson},"runs":[${runs}]}`;
    return { json, bytes: budget.bytes, runs: kept.length, seq: this.#seq, trimmedForBytes };
  }

  /** A snapshot taken at `seq` reached the API server. */
  markWritten(seq: number): void {
    this.#unwritten.retain((entry) => {
      if (entry.changedAt > seq) return true;
      entry.written = true;
      entry.unwritten = false;
      this.#unwrittenCount -= 1;
      return false;
    });
  }

  /** Files a new entry among the runs in flight or the finished ones (as the newest). */
  #file(entry: Entry): void {
    if (entry.finished) {
      this.#finishedCount += 1;
      this.#finished.push(entry, this.#finishedCount);
    } else {
      this.#inFlightCount += 1;
      this.#inFlight.push(entry, this.#inFlightCount);
    }
  }

  /** A run in flight finished (as the newest finished), or — never from RunRecorder — a finished one reopened. */
  #refile(entry: Entry, finished: boolean): void {
    if (finished) {
      entry.finished = true;
      this.#inFlightCount -= 1;
      this.#file(entry);
      return;
    }
    // Its place among the finished would turn live again if it finished once more: file everything afresh.
    entry.finished = false;
    this.#refileAll();
  }

  /** Files every entry afresh, the finished ones in completion order (after adopting or merging remote runs). */
  #refileAll(): void {
    const inFlight: Entry[] = [];
    const finished: Entry[] = [];
    for (const entry of this.#entries.values()) {
      if (entry.present) (entry.finished ? finished : inFlight).push(entry);
    }
    finished.sort(byCompletion);
    this.#inFlight.reset(inFlight);
    this.#finished.reset(finished);
    this.#inFlightCount = inFlight.length;
    this.#finishedCount = finished.length;
  }

  #trimFinished(): void {
    while (this.#finishedCount > this.#keepFinished) this.#retire(this.#finished.shift()!);
  }

  #dropOverflow(): number {
    let dropped = 0;
    // First changed first: for finished runs that is close to completion order. Runs in flight are never dropped.
    this.#unwritten.takeOldest(
      (entry) => {
        if (!entry.finished) return false;
        this.#retire(entry);
        dropped += 1;
        return true;
      },
      () => this.#unwrittenCount > this.#maxUnwritten,
    );
    return dropped;
  }

  /** The entry of a run in the window. One retired under that id finishes leaving first: the id is free. */
  #present(id: string): Entry | undefined {
    const entry = this.#entries.get(id);
    if (entry?.leaving !== true) return entry;
    this.#finishLeavingOf(entry);
    return undefined;
  }

  /** A finished run leaves for good: a later save of its record is ignored. */
  #retire(entry: Entry): void {
    this.#leave(entry);
    entry.leaving = true;
    this.#leavingCount += 1;
    this.#leaving.push(entry, this.#leavingCount);
  }

  /** Finishes the leaving of up to `max` retired runs, oldest first. */
  #finishLeaving(max: number): void {
    for (let left = Math.min(max, this.#leavingCount); left > 0; left -= 1) this.#finishLeavingOf(this.#leaving.shift()!);
  }

  /** Frees a retired run's id, remembering its record as retired. */
  #finishLeavingOf(entry: Entry): void {
    entry.leaving = false;
    this.#entries.delete(entry.id);
    this.#retired.add(entry.record);
    this.#leavingCount -= 1;
  }

  /** A run leaves without a trace: withdrawn, or gone from the API server's status. */
  #remove(entry: Entry): void {
    this.#leave(entry);
    this.#entries.delete(entry.id);
  }

  #leave(entry: Entry): void {
    entry.present = false;
    if (entry.finished) this.#finishedCount -= 1;
    else this.#inFlightCount -= 1;
    if (entry.unwritten) {
      entry.unwritten = false;
      this.#unwrittenCount -= 1;
    }
  }
}
