// The contract every store of run history keeps, whichever database holds it: list (newest first, keyset pages
// stable while runs are written, every filter), get, counters and retention. run-history.test.ts runs it
// against SQLite (`runlet dev`) and against a real PostgreSQL (a cluster's results store).
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import type { ListRunsQuery } from '../../management/run-source.ts';
import type { RunHistory } from '../../results/run-history.ts';
import type { RunOutcome } from '../../sidecar/modes/outcome.ts';
import { keepResult } from '../../sidecar/runs/kept-result.ts';
import { runRecord } from '../support/sqlite-run-records.ts';
import { listQuery } from '../support/list-query.ts';

export interface HistoryUnderTest {
  history: RunHistory;
  /** Makes the records durable, as the store's writer would (the SQLite store's saves, the collector's batches). */
  write(records: readonly RunRecord[]): Promise<void>;
  close(): Promise<void>;
}

const BASE_MS = Date.parse('2026-10-01T00:00:00.000Z');
const MINUTE = 60_000;

let nextApp = 0;
/** Each test its own app, so tests of one store never see each other's runs. */
function freshApp(): string {
  nextApp += 1;
  return `app-${nextApp}`;
}

/** A run created `minutes` after BASE_MS (plus `ms`): its UUID v7 id carries the same instant. */
function runAt(appName: string, minutes: number, overrides: Partial<RunRecord> = {}, ms = 0): RunRecord {
  const at = BASE_MS + minutes * MINUTE + ms;
  return runRecord({ id: uuidv7({ msecs: at }), appName, createdAt: new Date(at).toISOString(), ...overrides });
}

function query(appName: string, overrides: Partial<ListRunsQuery> = {}): ListRunsQuery {
  return listQuery('demo', appName, overrides);
}

/** Every page of a list, following each page's last id as the API's nextToken does. */
async function listAll(history: RunHistory, q: ListRunsQuery, between?: () => Promise<void>): Promise<string[]> {
  const ids: string[] = [];
  let beforeId: string | null = null;
  for (;;) {
    const page = await history.listRuns({ ...q, beforeId });
    ids.push(...page.items.map((run) => run.id));
    const last = page.items.at(-1);
    if (!page.hasMore || last === undefined) return ids;
    beforeId = last.id;
    await between?.();
  }
}

const newestFirst = (runs: readonly RunRecord[]): string[] => runs.map((run) => run.id).sort().reverse();

export function describeRunHistoryContract(storeName: string, open: () => Promise<HistoryUnderTest>): void {
  describe(`run history contract: ${storeName}`, () => {
    let store: HistoryUnderTest;
    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await store?.close();
    });

    it('gets a run of its app only, and answers nothing for an unknown or malformed id', async () => {
      const app = freshApp();
      const run = runAt(app, 0, { error: { type: 'ValueError', message: 'boom\u0000 "quoted" \u{1F600}' }, status: 'failure' });
      await store.write([run]);
      expect(await store.history.getRun('demo', app, run.id)).toEqual(run);
      expect(await store.history.getRun('demo', 'other', run.id)).toBeUndefined();
      expect(await store.history.getRun('other', app, run.id)).toBeUndefined();
      expect(await store.history.getRun('demo', app, uuidv7())).toBeUndefined();
      expect(await store.history.getRun('demo', app, "x' OR '1'='1")).toBeUndefined();
    });

    it('lists newest first in pages that neither skip nor repeat', async () => {
      const app = freshApp();
      const runs = Array.from({ length: 23 }, (_, i) => runAt(app, i));
      await store.write(runs);
      const first = await store.history.listRuns(query(app, { pageSize: 10 }));
      expect(first.items.map((run) => run.id)).toEqual(newestFirst(runs).slice(0, 10));
      expect(first.hasMore).toBe(true);
      expect(await listAll(store.history, query(app, { pageSize: 10 }))).toEqual(newestFirst(runs));
      expect(await listAll(store.history, query(app, { pageSize: 23 }))).toEqual(newestFirst(runs));
      expect((await store.history.listRuns(query(app, { pageSize: 23 }))).hasMore).toBe(false);
    });

    it('filters by async, status, function and creation time, alone and together', async () => {
      const app = freshApp();
      const runs = Array.from({ length: 40 }, (_, i) =>
        runAt(app, i, {
          async: i % 2 === 0,
          mode: i % 2 === 0 ? 'async' : 'sync',
          status: i % 3 === 0 ? 'failure' : 'success',
          functionName: i % 4 === 0 ? 'train' : 'run',
        }),
      );
      await store.write(runs);
      const expectFilter = async (filter: Partial<ListRunsQuery>, keep: (run: RunRecord) => boolean) => {
        expect(await listAll(store.history, query(app, { pageSize: 7, ...filter }))).toEqual(newestFirst(runs.filter(keep)));
      };
      await expectFilter({ asyncOnly: true }, (run) => run.async);
      await expectFilter({ status: 'failure' }, (run) => run.status === 'failure');
      await expectFilter({ functionName: 'train' }, (run) => run.functionName === 'train');
      await expectFilter({ functionName: "train' OR '1'='1" }, () => false);
      const at = (minutes: number) => new Date(BASE_MS + minutes * MINUTE).toISOString();
      // createdAfter is inclusive, createdBefore exclusive: [10, 20) and [20, 30) tile.
      await expectFilter({ createdAfter: at(10), createdBefore: at(20) }, (run) => run.createdAt >= at(10) && run.createdAt < at(20));
      await expectFilter({ createdAfter: at(20) }, (run) => run.createdAt >= at(20));
      await expectFilter({ createdBefore: at(20) }, (run) => run.createdAt < at(20));
      await expectFilter(
        { asyncOnly: true, status: 'failure', functionName: 'train', createdAfter: at(5), createdBefore: at(35) },
        (run) => run.async && run.status === 'failure' && run.functionName === 'train' && run.createdAt >= at(5) && run.createdAt < at(35),
      );
    });

    it('pages through a list while runs are written, with no gap and no duplicate', async () => {
      const app = freshApp();
      const before = Array.from({ length: 200 }, (_, i) => runAt(app, i));
      await store.write(before);
      let written = 0;
      const ids = await listAll(store.history, query(app, { pageSize: 9 }), async () => {
        // Newer runs, and one more state of runs already listed and still to list: none moves the cursor.
        written += 1;
        await store.write([
          runAt(app, 1000 + written),
          { ...before[written]!, status: 'failure' },
          { ...before[199 - written]!, status: 'failure' },
        ]);
      });
      expect(written).toBeGreaterThan(10);
      expect(ids).toEqual(newestFirst(before));
    });

    it('counts an app\'s runs by outcome, with the time of the newest', async () => {
      const app = freshApp();
      expect(await store.history.countRuns('demo', app)).toEqual({ total: 0, success: 0, failure: 0, inFlight: 0, lastRunTime: null });
      const statuses = ['success', 'success', 'failure', 'pending', 'running', 'cancelled'] as const;
      const runs = statuses.map((status, i) => runAt(app, i, { status }));
      await store.write([...runs, runAt(freshApp(), 100)]);
      expect(await store.history.countRuns('demo', app)).toEqual({
        total: 6,
        success: 2,
        failure: 1,
        inFlight: 2,
        lastRunTime: runs.at(-1)!.createdAt,
      });
    });

    it('counts a run once, in the state it last moved to; runs deleted by retention leave the counts', async () => {
      const app = freshApp();
      const count = () => store.history.countRuns('demo', app);
      const pending = runAt(app, 10, { status: 'pending', mode: 'async', async: true, startedAt: null, completedAt: null, statusCode: null });
      const running: RunRecord = { ...pending, status: 'running', startedAt: pending.createdAt };
      const done: RunRecord = { ...running, status: 'failure', statusCode: 500, completedAt: running.createdAt };
      const old = runAt(app, 0, { status: 'success' });
      await store.write([old, pending]);
      expect(await count()).toEqual({ total: 2, success: 1, failure: 0, inFlight: 1, lastRunTime: pending.createdAt });
      await store.write([running]);
      await store.write([running]);
      expect(await count()).toEqual({ total: 2, success: 1, failure: 0, inFlight: 1, lastRunTime: pending.createdAt });
      await store.write([done, old]);
      expect(await count()).toEqual({ total: 2, success: 1, failure: 1, inFlight: 0, lastRunTime: pending.createdAt });
      // A cutoff between the two runs' creation times: `old` goes.
      await store.history.pruneExpired({ defaultDays: 40, apps: [], batchSize: 10, now: new Date(BASE_MS + 40 * 24 * 60 * MINUTE + 5 * MINUTE) });
      expect(await count()).toEqual({ total: 1, success: 0, failure: 1, inFlight: 0, lastRunTime: pending.createdAt });
    });

    it('deletes runs past their app\'s retention in bounded batches, and keeps the rest', async () => {
      const kept = freshApp();
      const short = freshApp();
      const now = new Date(BASE_MS + 40 * 24 * 60 * MINUTE);
      const day = 24 * 60;
      // 31 days old: past the default 30; 10 days old: past `short`'s 7 days only.
      const old = Array.from({ length: 25 }, (_, i) => runAt(kept, 9 * day, {}, i));
      const recent = Array.from({ length: 5 }, (_, i) => runAt(kept, 30 * day, {}, i));
      const shortOld = Array.from({ length: 8 }, (_, i) => runAt(short, 30 * day, {}, i));
      const shortRecent = Array.from({ length: 3 }, (_, i) => runAt(short, 35 * day, {}, i));
      await store.write([...old, ...recent, ...shortOld, ...shortRecent]);
      const deleted = await store.history.pruneExpired({
        defaultDays: 30,
        apps: [{ projectId: 'demo', appName: short, days: 7 }],
        batchSize: 4,
        now,
      });
      expect(deleted).toBeGreaterThanOrEqual(old.length + shortOld.length);
      expect(await listAll(store.history, query(kept))).toEqual(newestFirst(recent));
      expect(await listAll(store.history, query(short))).toEqual(newestFirst(shortRecent));
      expect(await store.history.getRun('demo', kept, old[0]!.id)).toBeUndefined();
      expect(await store.history.pruneExpired({ defaultDays: 30, apps: [{ projectId: 'demo', appName: short, days: 7 }], batchSize: 4, now })).toBe(0);
    });

    describe('kept results ([runs] keep_results)', () => {
      const keeping = { maxBytes: 1024, ttlSeconds: 3600 };
      const HOUR = 60 * MINUTE;

      it('returns a kept result with the run until it expires, never in the list', async () => {
        const app = freshApp();
        const run = runAt(app, 0);
        const value = { text: 'h\u00e9llo \u{1F600} "q" \u0000', items: [1, 2.5, null, true] };
        keepResult(run, outcome(JSON.stringify(value)), keeping);
        await store.write([run]);
        const got = await store.history.getRun('demo', app, run.id);
        expect(got).toEqual({ ...run, result: value, resultKept: true });
        expect(Date.parse(got!.resultExpiresAt!)).toBeGreaterThan(Date.now() + HOUR - MINUTE);
        const [listed] = (await store.history.listRuns(query(app))).items;
        expect(listed).toEqual(run);
        expect(listed).not.toHaveProperty('result');
      });

      it('keeps a null result, and a failed run\'s error', async () => {
        const app = freshApp();
        const none = runAt(app, 0);
        keepResult(none, outcome('null'), keeping);
        const failed = runAt(app, 1, { status: 'failure', statusCode: 500, error: { type: 'ValueError', message: 'bad input' } });
        keepResult(failed, { ...outcome(null), success: false, statusCode: 500, error: failed.error }, keeping);
        await store.write([none, failed]);
        expect(await store.history.getRun('demo', app, none.id)).toHaveProperty('result', null);
        expect(await store.history.getRun('demo', app, failed.id)).toHaveProperty('result', { type: 'ValueError', message: 'bad input' });
      });

      it('returns no result once it has expired, and the sweep drops it in batches', async () => {
        const app = freshApp();
        const expired = Array.from({ length: 5 }, (_, i) => runAt(app, i));
        for (const run of expired) keepResult(run, outcome('"old"'), keeping, Date.now() - 2 * HOUR);
        const live = runAt(app, 10);
        keepResult(live, outcome('"new"'), keeping);
        await store.write([...expired, live]);
        const got = await store.history.getRun('demo', app, expired[0]!.id);
        expect(got).not.toHaveProperty('result');
        expect(got).toMatchObject({ resultKept: true });
        expect(await store.history.dropExpiredResults({ batchSize: 2 })).toBeGreaterThanOrEqual(expired.length);
        expect(await store.history.dropExpiredResults({ batchSize: 2 })).toBe(0);
        expect(await store.history.getRun('demo', app, live.id)).toHaveProperty('result', 'new');
      });

      it('keeps no result larger than result_keep_bytes (counted in UTF-8), and says so', async () => {
        const app = freshApp();
        const large = runAt(app, 0);
        // 400 characters, 1200 bytes in UTF-8: under the bound in characters, over it in bytes.
        keepResult(large, outcome(JSON.stringify('\u20AC'.repeat(400))), keeping);
        const exact = runAt(app, 1);
        keepResult(exact, outcome(JSON.stringify('x'.repeat(1022))), keeping);
        await store.write([large, exact]);
        const got = await store.history.getRun('demo', app, large.id);
        expect(got).not.toHaveProperty('result');
        expect(got).toMatchObject({ resultKept: false });
        expect(got).not.toHaveProperty('resultExpiresAt');
        expect(await store.history.getRun('demo', app, exact.id)).toHaveProperty('result', 'x'.repeat(1022));
      });

      it('keeps nothing when the app keeps no results', async () => {
        const app = freshApp();
        const run = runAt(app, 0);
        await store.write([run]);
        const got = await store.history.getRun('demo', app, run.id);
        expect(got).toEqual(run);
        expect(got).not.toHaveProperty('resultKept');
      });

      it('a later state of the run without its result (read back, or closed by a sweep) keeps the result', async () => {
        const app = freshApp();
        const run = runAt(app, 0, { webhook: { endpoint: 'https://hooks.example/x', state: 'pending', attempts: 1, lastStatusCode: null, lastError: null } });
        keepResult(run, outcome('{"n":1}'), keeping);
        await store.write([run]);
        const readBack = structuredClone(run);
        readBack.webhook!.state = 'delivered';
        readBack.webhook!.attempts = 2;
        await store.write([readBack]);
        expect(await store.history.getRun('demo', app, run.id)).toEqual({ ...readBack, result: { n: 1 } });
      });
    });
  });
}

function outcome(resultJson: string | null): RunOutcome {
  return { statusCode: 200, success: true, resultJson, error: null, runTimeMs: 1 };
}
