import { describe, expect, it } from 'vitest';
import type { RunRecord } from './record.ts';
import { runRecord } from './runlog-test-kit.ts';
import { RunLogWindow } from './runlog-window.ts';

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
