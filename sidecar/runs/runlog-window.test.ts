import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import type { RunRecord, RunStatus } from '../../crds/run-record-schema.ts';
import { runRecord } from '../../test/support/runlog-store-kit.ts';
import { RunLogWindow, isFinished, type StatusSnapshot } from './runlog-window.ts';

function window(options: { keepFinished?: number; maxUnwritten?: number } = {}): RunLogWindow {
  return new RunLogWindow({ keepFinished: options.keepFinished ?? 200, maxUnwritten: options.maxUnwritten ?? 10_000 });
}

function written(w: RunLogWindow, maxBytes = 1 << 20): RunRecord[] {
  const snapshot = w.snapshot(maxBytes);
  w.markWritten(snapshot.seq);
  return (JSON.parse(snapshot.json) as { runs: RunRecord[] }).runs;
}

function finish(record: RunRecord, status: 'success' | 'failure' | 'cancelled' = 'success'): RunRecord {
  record.status = status;
  record.completedAt = new Date().toISOString();
  return record;
}

describe('RunLogWindow', () => {
  it('counts each run once, moving its contribution as its status changes', () => {
    const w = window();
    const a = runRecord('pending');
    const b = runRecord('running');
    w.upsert(a);
    w.upsert(b);
    expect(w.counts).toEqual({ total: 2, success: 0, failure: 0, inFlight: 2 });
    a.status = 'running';
    w.upsert(a);
    w.upsert(finish(a));
    w.upsert(finish(b, 'failure'));
    w.upsert(b); // saved again (a webhook outcome): no change
    const c = finish(runRecord('running'), 'cancelled');
    w.upsert(c);
    expect(w.counts).toEqual({ total: 3, success: 1, failure: 1, inFlight: 0 });
  });

  it('keeps every run in flight and the newest finished ones, newest first in the status', () => {
    const w = window({ keepFinished: 2 });
    const inFlight = [runRecord('running'), runRecord('pending')];
    const finished = Array.from({ length: 5 }, () => runRecord('running'));
    for (const record of [...inFlight, ...finished]) w.upsert(record);
    for (const record of finished) w.upsert(finish(record));
    const ids = written(w).map((run) => run.id);
    expect(new Set(ids)).toEqual(new Set([...inFlight, ...finished.slice(3)].map((run) => run.id)));
    expect(ids).toEqual([...ids].sort().reverse());
    expect(w.counts).toEqual({ total: 7, success: 5, failure: 0, inFlight: 2 });
  });

  it('does not count or bring back a trimmed run saved again', () => {
    const w = window({ keepFinished: 1 });
    const old = finish(runRecord('running'));
    w.upsert(old);
    w.upsert(finish(runRecord('running')));
    old.webhook = { endpoint: 'https://hooks.example/x', state: 'delivered', attempts: 1, lastStatusCode: 200, lastError: null };
    w.upsert(old);
    expect(w.counts.total).toBe(2);
    expect(written(w).map((run) => run.id)).not.toContain(old.id);
  });

  it('past the unwritten bound drops the oldest finished runs not yet written, never runs in flight', () => {
    const w = window({ maxUnwritten: 3 });
    const before = finish(runRecord('running'));
    w.upsert(before);
    written(w);
    const inFlight = [runRecord('running'), runRecord('running'), runRecord('running')];
    for (const record of inFlight) w.upsert(record);
    const finished = [finish(runRecord('running')), finish(runRecord('running'))];
    const dropped = finished.map((record) => w.upsert(record));
    expect(dropped).toEqual([1, 1]);
    expect(w.unwritten).toBe(3);
    const ids = written(w).map((run) => run.id);
    expect(new Set(ids)).toEqual(new Set([before, ...inFlight].map((run) => run.id)));
    expect(w.counts.total).toBe(6);
  });

  it('withdraws a run never written, as if it had not been saved', () => {
    const w = window();
    const kept = runRecord('pending');
    w.upsert(kept);
    written(w);
    const refused = runRecord('pending');
    w.upsert(refused);
    expect(w.withdraw(refused)).toBe(true);
    expect(w.withdraw(kept)).toBe(false);
    expect(w.counts).toEqual({ total: 1, success: 0, failure: 0, inFlight: 1 });
    expect(w.unwritten).toBe(0);
  });

  it('fits the status into the byte budget by dropping the oldest finished runs', () => {
    const w = window();
    const inFlight = runRecord('running', { error: { type: 'Big', message: 'x'.repeat(2000) } });
    w.upsert(inFlight);
    const finished = Array.from({ length: 20 }, () => finish(runRecord('running', { error: { type: 'E', message: 'y'.repeat(500) } })));
    for (const record of finished) w.upsert(record);
    const snapshot = w.snapshot(6000);
    expect(snapshot.bytes).toBeLessThanOrEqual(6000);
    expect(snapshot.trimmedForBytes).toBeGreaterThan(0);
    const ids = (JSON.parse(snapshot.json) as { runs: RunRecord[] }).runs.map((run) => run.id);
    expect(ids).toContain(inFlight.id);
    expect(ids).toContain(finished.at(-1)!.id);
    expect(ids).not.toContain(finished[0]!.id);
    // Runs in flight stay even when they alone pass the budget.
    expect(JSON.parse(w.snapshot(100).json).runs.map((run: RunRecord) => run.id)).toEqual([inFlight.id]);
  });

  it('adopts a previous status: its counts continue, its runs in flight are handed back', () => {
    const w = window({ keepFinished: 2 });
    const mine = runRecord('running');
    w.upsert(mine);
    const left = runRecord('running');
    const done = [finish(runRecord('running')), finish(runRecord('running')), finish(runRecord('running'))];
    const unfinished = w.adopt({ runs: [left, ...done], counts: { total: 40, success: 30, failure: 9, inFlight: 1 } });
    expect(unfinished).toEqual([left]);
    expect(w.counts).toEqual({ total: 41, success: 30, failure: 9, inFlight: 2 });
    left.status = 'failure';
    w.upsert(left);
    expect(w.counts).toEqual({ total: 41, success: 30, failure: 10, inFlight: 1 });
    const ids = written(w).map((run) => run.id);
    expect(new Set(ids)).toEqual(new Set([mine.id, left.id, done[2]!.id]));
  });

  it('adopts journaled runs the status lacks or holds at an earlier stage, counting those it did not count', () => {
    const w = window();
    const heldFurther = finish(runRecord('running'));
    const heldEarlier = runRecord('pending');
    const counts = { total: 2, success: 1, failure: 0, inFlight: 1 };
    const missing = runRecord('pending');
    const journaled = [{ ...heldFurther, status: 'pending' as const }, { ...heldEarlier, status: 'running' as const }, missing];
    const unfinished = w.adopt({ runs: [heldFurther, heldEarlier], counts }, journaled);
    // The status's finished run stands; the journal's later state of the other replaces it; the missing one joins.
    expect(unfinished).toEqual([journaled[1], missing]);
    expect(w.counts).toEqual({ total: 3, success: 1, failure: 0, inFlight: 2 });
    const runs = written(w);
    expect(new Map(runs.map((run) => [run.id, run.status]))).toEqual(
      new Map([
        [heldFurther.id, 'success'],
        [heldEarlier.id, 'running'],
        [missing.id, 'pending'],
      ]),
    );
  });

  it('merges a status another writer changed: its runs are added, mine keep their state', () => {
    const w = window();
    const mine = runRecord('running');
    w.upsert(mine);
    const theirs = finish(runRecord('running'));
    const staleMine = { ...mine, status: 'failure' as const };
    w.merge([theirs, staleMine]);
    const runs = written(w);
    expect(runs.find((run) => run.id === mine.id)?.status).toBe('running');
    expect(runs.map((run) => run.id)).toContain(theirs.id);
    w.merge([]);
    expect(written(w).map((run) => run.id)).toEqual([mine.id]);
    expect(w.counts.total).toBe(1);
  });
});

describe('RunLogWindow serialisation', () => {
  it('writes a run saved again after its JSON was cached in its new state, in its place', () => {
    const w = window();
    const hooked = finish(runRecord('running', { webhook: { endpoint: 'https://hooks.example/x', state: 'pending', attempts: 0, lastStatusCode: null, lastError: null } }));
    w.upsert(hooked);
    const later = finish(runRecord('running'));
    w.upsert(later);
    expect(written(w).find((run) => run.id === hooked.id)?.webhook?.state).toBe('pending');
    hooked.webhook = { ...hooked.webhook!, state: 'delivered', attempts: 1, lastStatusCode: 200 };
    w.upsert(hooked); // as recorder.touch does
    expect(w.unwritten).toBe(1);
    const runs = written(w);
    expect(runs.find((run) => run.id === hooked.id)?.webhook).toMatchObject({ state: 'delivered', attempts: 1, lastStatusCode: 200 });
    // Still older than `later` among the finished: with room for one, `later` stays.
    expect(written(w, byteLength(runs.filter((run) => run.id === later.id))).map((run) => run.id)).toEqual([later.id]);
  });

  it('fits the byte budget exactly: a status of the same runs one byte larger than the budget trims one run', () => {
    const runs = Array.from({ length: 12 }, (_, i) => finish(runRecord('running', { error: { type: 'E', message: 'é'.repeat(i * 37) } })));
    const fill = (): RunLogWindow => {
      const w = window();
      for (const record of runs) w.upsert(record);
      return w;
    };
    const whole = fill().snapshot(1 << 20);
    expect(whole.bytes).toBe(Buffer.byteLength(whole.json));
    const exact = fill().snapshot(whole.bytes);
    expect(exact).toMatchObject({ json: whole.json, bytes: whole.bytes, runs: 12, trimmedForBytes: 0 });
    const short = fill().snapshot(whole.bytes - 1);
    expect(short.trimmedForBytes).toBe(1);
    expect(short.bytes).toBe(Buffer.byteLength(short.json));
    expect(short.bytes).toBeLessThan(whole.bytes);
    expect((JSON.parse(short.json) as { runs: RunRecord[] }).runs.map((run) => run.id)).not.toContain(runs[0]!.id);
  });

  it('serialises ahead a slice at a time, and the snapshot after is the one it would have taken anyway', () => {
    const records = Array.from({ length: 10 }, () => finish(runRecord('running')));
    const inFlight = runRecord('running');
    const sliced = window();
    const direct = window();
    for (const w of [sliced, direct]) for (const record of [inFlight, ...records]) w.upsert(record);
    const stringify = vi.spyOn(JSON, 'stringify');
    const serialisedRuns = (): number => stringify.mock.calls.filter(([value]) => (value as { id?: unknown }).id !== undefined).length;
    try {
      const perSlice: number[] = [];
      let more = true;
      while (more) {
        const before = serialisedRuns();
        more = sliced.prepare(1 << 20, 4);
        perSlice.push(serialisedRuns() - before);
      }
      expect(perSlice).toEqual([4, 4, 3]);
      // Changed after its slice: serialised again by the snapshot.
      inFlight.status = 'success';
      inFlight.completedAt = new Date().toISOString();
      for (const w of [sliced, direct]) w.upsert(inFlight);
      const before = serialisedRuns();
      const snapshot = sliced.snapshot(1 << 20);
      expect(serialisedRuns() - before).toBe(1);
      expect(snapshot).toEqual(direct.snapshot(1 << 20));
    } finally {
      stringify.mockRestore();
    }
  });

  it('does not count a trimmed run saved again, while it is leaving or after; another record of its id is a run of its own', () => {
    const w = window();
    const trimmed = Array.from({ length: 5 }, () => finish(runRecord('running')));
    for (const record of trimmed) w.upsert(record);
    expect(w.snapshot(100).trimmedForBytes).toBe(5);
    // Each save finishes the leaving of a couple: the last one trimmed is still leaving at first.
    for (const record of [trimmed[4]!, trimmed[0]!, trimmed[4]!]) w.upsert(record);
    expect(w.counts.total).toBe(5);
    expect(w.unwritten).toBe(0);
    const copy = { ...trimmed[4]! };
    w.upsert(copy);
    expect(w.counts.total).toBe(6);
    expect(written(w).map((run) => run.id)).toEqual([copy.id]);
  });

  it('agrees with a plain model of the window on random histories of saves, snapshots and withdrawals', () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('start' as const), status: fc.constantFrom<RunStatus>('pending', 'running', 'success'), size: fc.nat(600) }),
      fc.record({ kind: fc.constant('advance' as const), pick: fc.nat(), outcome: fc.constantFrom('success' as const, 'failure' as const, 'cancelled' as const), size: fc.nat(300) }),
      fc.record({ kind: fc.constant('snapshot' as const), maxBytes: fc.integer({ min: 200, max: 8000 }), slice: fc.integer({ min: 0, max: 5 }) }),
      // The last snapshot reached the API server, maybe after more saves.
      fc.record({ kind: fc.constant('written' as const) }),
      fc.record({ kind: fc.constant('withdraw' as const), pick: fc.nat() }),
    );
    fc.assert(
      fc.property(fc.array(step, { minLength: 10, maxLength: 80 }), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 8 }), (steps, keepFinished, maxUnwritten) => {
        const w = window({ keepFinished, maxUnwritten });
        const model = new ModelWindow(keepFinished, maxUnwritten);
        const known: RunRecord[] = [];
        let snapshotSeq: number | undefined;
        const save = (record: RunRecord): void => expect(w.upsert(record)).toBe(model.upsert(record));
        for (const s of steps) {
          if (s.kind === 'start') {
            const record = runRecord(s.status, { error: s.size > 0 ? { type: 'E', message: 'x'.repeat(s.size) } : null });
            known.push(record);
            save(record);
          } else if (s.kind === 'advance' && known.length > 0) {
            const record = known[s.pick % known.length]!;
            if (record.status === 'pending') record.status = 'running';
            else if (record.status === 'running') finish(record, s.outcome);
            else record.webhook = { endpoint: 'https://hooks.example/x', state: 'failed', attempts: s.size, lastStatusCode: 500, lastError: 'e'.repeat(s.size) };
            save(record);
          } else if (s.kind === 'withdraw' && known.length > 0) {
            const [record] = known.splice(s.pick % known.length, 1);
            expect(w.withdraw(record!)).toBe(model.withdraw(record!));
          } else if (s.kind === 'snapshot') {
            if (s.slice > 0) while (w.prepare(s.maxBytes, s.slice));
            const snapshot = w.snapshot(s.maxBytes);
            expect(snapshot).toEqual(model.snapshot(s.maxBytes));
            expect(snapshot.bytes).toBe(Buffer.byteLength(snapshot.json));
            snapshotSeq = snapshot.seq;
          } else if (s.kind === 'written' && snapshotSeq !== undefined) {
            w.markWritten(snapshotSeq);
            model.markWritten(snapshotSeq);
          }
          expect(w.counts).toEqual(model.counts);
          expect(w.unwritten).toBe(model.unwritten.length);
          expect(w.seq).toBe(model.seq);
        }
      }),
      { numRuns: 300 },
    );
  });
});

function byteLength(runs: RunRecord[]): number {
  return Buffer.byteLength(`{"counts":${JSON.stringify({ total: 2, success: 2, failure: 0, inFlight: 0 })},"runs":${JSON.stringify(runs)}}`);
}

/**
 * The window as its contract reads, with none of its economies: plain arrays, everything serialised at every
 * snapshot. Runs in flight and the newest keepFinished finished runs (in the order they finished) stay; past
 * maxUnwritten runs changed since the last written snapshot, the first changed finished ones leave; a snapshot
 * keeps the newest finished runs that fit its budget.
 */
class ModelWindow {
  readonly runs = new Map<string, { record: RunRecord; countedAs: RunStatus; changedAt: number; written: boolean }>();
  /** Ids of the finished runs held, oldest first. */
  finished: string[] = [];
  /** Ids of the runs changed since the last written snapshot, first changed first. */
  unwritten: string[] = [];
  readonly retired = new Set<RunRecord>();
  readonly counts = { total: 0, success: 0, failure: 0, inFlight: 0 };
  seq = 0;
  readonly #keepFinished: number;
  readonly #maxUnwritten: number;

  constructor(keepFinished: number, maxUnwritten: number) {
    this.#keepFinished = keepFinished;
    this.#maxUnwritten = maxUnwritten;
  }

  upsert(record: RunRecord): number {
    const run = this.runs.get(record.id);
    if (run === undefined && this.retired.has(record)) return 0;
    this.seq += 1;
    if (run === undefined) {
      this.runs.set(record.id, { record, countedAs: record.status, changedAt: this.seq, written: false });
      this.#count(record.status, 1);
      if (isFinished(record.status)) this.finished.push(record.id);
    } else {
      if (!isFinished(run.countedAs) && isFinished(record.status)) this.finished.push(record.id);
      this.#count(run.countedAs, -1);
      this.#count(record.status, 1);
      Object.assign(run, { record, countedAs: record.status, changedAt: this.seq });
    }
    if (!this.unwritten.includes(record.id)) this.unwritten.push(record.id);
    while (this.finished.length > this.#keepFinished) this.#retire(this.finished[0]!);
    let dropped = 0;
    while (this.unwritten.length > this.#maxUnwritten) {
      const oldest = this.unwritten.find((id) => isFinished(this.runs.get(id)!.record.status));
      if (oldest === undefined) break;
      this.#retire(oldest);
      dropped += 1;
    }
    return dropped;
  }

  withdraw(record: RunRecord): boolean {
    const run = this.runs.get(record.id);
    if (run === undefined || run.record !== record || run.written) return false;
    this.#forget(record.id);
    this.#count(run.countedAs, -1);
    return true;
  }

  snapshot(maxBytes: number): StatusSnapshot {
    const countsJson = JSON.stringify(this.counts);
    const kept: RunRecord[] = [...this.runs.values()].map((run) => run.record).filter((record) => !isFinished(record.status));
    const size = (): number => Buffer.byteLength(`{"counts":${countsJson},"runs":${JSON.stringify(kept)}}`);
    let trimmedForBytes = 0;
    for (const id of [...this.finished].reverse()) {
      const record = this.runs.get(id)!.record;
      if (trimmedForBytes === 0) {
        kept.push(record);
        if (size() <= maxBytes) continue;
        kept.pop();
      }
      this.#retire(id);
      trimmedForBytes += 1;
    }
    kept.sort((a, b) => (a.id < b.id ? 1 : -1));
    const json = `{"counts":${countsJson},"runs":${JSON.stringify(kept)}}`;
    return { json, bytes: Buffer.byteLength(json), runs: kept.length, seq: this.seq, trimmedForBytes };
  }

  markWritten(seq: number): void {
    this.unwritten = this.unwritten.filter((id) => {
      const run = this.runs.get(id)!;
      if (run.changedAt > seq) return true;
      run.written = true;
      return false;
    });
  }

  #retire(id: string): void {
    this.retired.add(this.runs.get(id)!.record);
    this.#forget(id);
  }

  #forget(id: string): void {
    this.runs.delete(id);
    this.finished = this.finished.filter((other) => other !== id);
    this.unwritten = this.unwritten.filter((other) => other !== id);
  }

  #count(status: RunStatus, sign: 1 | -1): void {
    this.counts.total += sign;
    if (status === 'success') this.counts.success += sign;
    else if (status === 'failure') this.counts.failure += sign;
    else if (!isFinished(status)) this.counts.inFlight += sign;
  }
}
