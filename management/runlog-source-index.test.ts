// The RunLog cache's bookkeeping without a server: merging RunLogs per app, the latest copy of a run held
// twice, filter indexes, and keyset pages — checked against a plain model (merge, sort, filter) on random
// histories of RunLog writes and deletions.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RunRecord, RunStatus } from '../crds/run-record-schema.ts';
import { RUN_STATUSES } from '../crds/run-record-values.ts';
import { RunLogIndex, appKey, type RunFilter } from './runlog-source-index.ts';
import { compareRunStates } from './runlog-source-precedence.ts';
import { SortedIds } from './runlog-source-sorted-ids.ts';

const APP = appKey('team-a', 'hello');
const OTHER_APP = appKey('team-a', 'other');

/** Ids in creation order: `id(3)` is newer than `id(2)`. */
function id(n: number): string {
  return `0190${n.toString(16).padStart(4, '0')}-0000-7000-8000-000000000000`;
}

function run(n: number, overrides: Partial<RunRecord> = {}): RunRecord {
  const status = overrides.status ?? 'success';
  const finished = status !== 'pending' && status !== 'running';
  return {
    id: id(n),
    projectId: 'team-a',
    appName: 'hello',
    functionName: 'run',
    method: 'POST',
    mode: 'sync',
    async: false,
    status,
    statusCode: finished ? 200 : null,
    error: null,
    reason: null,
    createdAt: '2025-01-01T00:00:00.000Z',
    startedAt: status === 'pending' ? null : '2025-01-01T00:00:00.100Z',
    completedAt: finished ? '2025-01-01T00:00:01.000Z' : null,
    queueTimeMs: null,
    runtimeMs: null,
    responseTimeMs: null,
    replica: 'hello-abc',
    webhook: null,
    ...overrides,
  };
}

function allPages(index: RunLogIndex, key: string, filter: RunFilter, pageSize: number): RunRecord[] {
  const items: RunRecord[] = [];
  let beforeId: string | null = null;
  for (;;) {
    const page = index.page(key, filter, beforeId, pageSize);
    items.push(...page.items);
    if (!page.hasMore) return items;
    expect(page.items).toHaveLength(pageSize);
    beforeId = page.items.at(-1)!.id;
  }
}

const ANY: RunFilter = { asyncOnly: false, status: null };

describe('SortedIds', () => {
  it('pages from the newest down, below a cursor that need not be one of its ids', () => {
    const ids = new SortedIds();
    for (const n of [5, 1, 9, 3, 7, 3]) ids.add(id(n));
    expect(ids.pageBefore(null, 2)).toEqual({ ids: [id(9), id(7)], hasMore: true });
    expect(ids.pageBefore(id(7), 2)).toEqual({ ids: [id(5), id(3)], hasMore: true });
    expect(ids.pageBefore(id(4), 2)).toEqual({ ids: [id(3), id(1)], hasMore: false });
    expect(ids.pageBefore(id(3), 5)).toEqual({ ids: [id(1)], hasMore: false });
    expect(ids.pageBefore(id(1), 5)).toEqual({ ids: [], hasMore: false });
    ids.delete(id(5));
    ids.delete(id(6));
    expect(ids.pageBefore(null, 10).ids).toEqual([id(9), id(7), id(3), id(1)]);
  });
});

describe('compareRunStates', () => {
  it('puts finished after running after pending, then the later completion, then webhook progress', () => {
    expect(compareRunStates(run(1, { status: 'failure' }), run(1, { status: 'running' }))).toBeGreaterThan(0);
    expect(compareRunStates(run(1, { status: 'pending' }), run(1, { status: 'running' }))).toBeLessThan(0);
    const early = run(1, { status: 'success', completedAt: '2025-01-01T00:00:01Z' });
    const late = run(1, { status: 'failure', reason: 'replica_lost', completedAt: '2025-01-01T00:00:02.5Z' });
    expect(compareRunStates(late, early)).toBeGreaterThan(0);
    const webhook = { endpoint: 'https://hooks.example/x', lastStatusCode: null, lastError: null };
    const delivered = run(1, { webhook: { ...webhook, state: 'delivered', attempts: 2 } });
    const waiting = run(1, { webhook: { ...webhook, state: 'pending', attempts: 1 } });
    expect(compareRunStates(delivered, waiting)).toBeGreaterThan(0);
    expect(compareRunStates(run(1), run(1))).toBe(0);
  });
});

describe('RunLogIndex', () => {
  it('merges the RunLogs of an app newest first, and keeps apps apart', () => {
    const index = new RunLogIndex();
    index.putRunLog('team-a/hello-1', APP, [run(6), run(4), run(2)]);
    index.putRunLog('team-a/hello-2', APP, [run(5), run(3), run(1)]);
    index.putRunLog('team-a/other-1', OTHER_APP, [run(7)]);
    expect(allPages(index, APP, ANY, 4).map((record) => record.id)).toEqual([6, 5, 4, 3, 2, 1].map(id));
    expect(index.get(APP, id(7))).toBeUndefined();
    expect(index.get(OTHER_APP, id(7))?.id).toBe(id(7));
    expect(index.page(appKey('team-b', 'hello'), ANY, null, 10)).toEqual({ items: [], hasMore: false });
  });

  it('shows the latest copy of a run two RunLogs hold, whichever arrives first, and the other when one goes', () => {
    const finished = run(1, { status: 'success' });
    const inFlight = run(1, { status: 'running' });
    for (const order of [['old', 'new'], ['new', 'old']]) {
      const index = new RunLogIndex();
      for (const which of order) index.putRunLog(`team-a/${which}`, APP, [which === 'old' ? inFlight : finished]);
      expect(index.get(APP, id(1))).toBe(finished);
      expect(index.page(APP, { asyncOnly: false, status: 'running' }, null, 10).items).toEqual([]);
      expect(index.page(APP, { asyncOnly: false, status: 'success' }, null, 10).items).toEqual([finished]);
      expect(index.size).toBe(1);
      index.deleteRunLog('team-a/new');
      expect(index.get(APP, id(1))).toBe(inFlight);
      expect(index.page(APP, { asyncOnly: false, status: 'running' }, null, 10).items).toEqual([inFlight]);
    }
  });

  it('follows a run through its states across the filter indexes, and drops runs a RunLog no longer holds', () => {
    const index = new RunLogIndex();
    index.putRunLog('team-a/hello-1', APP, [run(2, { async: true, status: 'pending' }), run(1)]);
    index.putRunLog('team-a/hello-1', APP, [run(3), run(2, { async: true, status: 'failure' })]);
    const asyncFailures = index.page(APP, { asyncOnly: true, status: 'failure' }, null, 10).items;
    expect(asyncFailures.map((record) => record.id)).toEqual([id(2)]);
    expect(index.page(APP, { asyncOnly: true, status: 'pending' }, null, 10).items).toEqual([]);
    expect(allPages(index, APP, ANY, 10).map((record) => record.id)).toEqual([id(3), id(2)]);
    index.deleteRunLog('team-a/hello-1');
    expect(index.size).toBe(0);
    expect(index.get(APP, id(3))).toBeUndefined();
  });

  it('agrees with merge-sort-filter on random histories of RunLog writes and deletions', () => {
    const times = ['2025-01-01T00:00:01Z', '2025-01-01T00:00:02Z', '2025-01-01T00:00:03.5Z'];
    const copy = fc.record({
      n: fc.integer({ min: 0, max: 40 }),
      status: fc.constantFrom(...RUN_STATUSES),
      async: fc.boolean(),
      completedAt: fc.constantFrom(...times),
    });
    const step = fc.oneof(
      fc.record({
        kind: fc.constant('put' as const),
        runLog: fc.integer({ min: 0, max: 3 }),
        app: fc.constantFrom(APP, OTHER_APP),
        runs: fc.uniqueArray(copy, { selector: (c) => c.n, maxLength: 25 }),
      }),
      fc.record({ kind: fc.constant('delete' as const), runLog: fc.integer({ min: 0, max: 3 }) }),
    );
    const filters: RunFilter[] = [ANY, { asyncOnly: true, status: null }];
    for (const status of RUN_STATUSES) filters.push({ asyncOnly: false, status }, { asyncOnly: true, status });

    fc.assert(
      fc.property(fc.array(step, { maxLength: 12 }), fc.integer({ min: 1, max: 9 }), (steps, pageSize) => {
        const index = new RunLogIndex();
        const model = new Map<string, { app: string; runs: RunRecord[] }>();
        for (const s of steps) {
          const key = `team-a/log-${s.runLog}`;
          if (s.kind === 'delete') {
            index.deleteRunLog(key);
            model.delete(key);
          } else {
            const runs = s.runs.map((c) => run(c.n, { status: c.status, async: c.async, completedAt: isDone(c.status) ? c.completedAt : null }));
            index.putRunLog(key, s.app, runs);
            model.set(key, { app: s.app, runs });
          }
        }
        for (const app of [APP, OTHER_APP]) {
          const expected = mergedByModel(model, app);
          for (const filter of filters) {
            const wanted = expected.filter((r) => (!filter.asyncOnly || r.async) && (filter.status === null || r.status === filter.status));
            expect(allPages(index, app, filter, pageSize)).toEqual(wanted);
          }
          for (const record of expected) expect(index.get(app, record.id)).toBe(record);
        }
      }),
      { numRuns: 300 },
    );
  });
});

function isDone(status: RunStatus): boolean {
  return status !== 'pending' && status !== 'running';
}

/** The plain answer: every copy of the app's runs, the latest per id (ties to the greater RunLog key), newest first. */
function mergedByModel(model: Map<string, { app: string; runs: RunRecord[] }>, app: string): RunRecord[] {
  const latest = new Map<string, { record: RunRecord; from: string }>();
  for (const [from, runLog] of model) {
    if (runLog.app !== app) continue;
    for (const record of runLog.runs) {
      const held = latest.get(record.id);
      const order = held === undefined ? 1 : compareRunStates(record, held.record);
      if (order > 0 || (order === 0 && from > held!.from)) latest.set(record.id, { record, from });
    }
  }
  return [...latest.values()].map((entry) => entry.record).sort((a, b) => (a.id < b.id ? 1 : -1));
}
