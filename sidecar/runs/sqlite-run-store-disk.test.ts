// The SQLite run store on a disk that fills up, and on a data directory it cannot write: a small tmpfs this
// test mounts, filled by a file of its own, and a read-only bind mount (both need root: elsewhere these tests
// are skipped, their titles say why). A refused async run (its durable save failed) is never written later,
// so never listed nor taken for a lost run; reads while the disk is full answer a clear `run-store-unavailable`
// with the cause, and log it; a read-only data directory is named with its cause at start.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProblemError } from '../../crds/problem.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { pendingAsyncRunRecord, runRecord } from '../../test/support/sqlite-run-records.ts';
import { SqliteRunStore } from './sqlite-run-store.ts';
import { listQuery } from '../../test/support/list-query.ts';

const IS_ROOT = process.getuid?.() === 0;

let mountPoint: string;
let stores: SqliteRunStore[];

beforeEach(() => {
  mountPoint = mkdtempSync(join(tmpdir(), 'runlet-full-disk-'));
  // 2 MiB: room for the database and its WAL, quickly filled.
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0777', 'tmpfs', mountPoint]);
  stores = [];
});

afterEach(async () => {
  for (const store of stores) await store.close().catch(() => undefined);
  execFileSync('umount', [mountPoint]);
  rmSync(mountPoint, { recursive: true, force: true });
});

function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { logger: pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) }), lines };
}

function open(dataDir: string, logger: Logger = pino({ level: 'silent' })): SqliteRunStore {
  const store = new SqliteRunStore({ dataDir, logger });
  stores.push(store);
  return store;
}

/** Fills the tmpfs to the last byte with a file of its own; returns the function that frees it. */
function fillDisk(): () => void {
  const filler = join(mountPoint, 'filler');
  const chunk = Buffer.alloc(64 * 1024);
  let written = 0;
  for (;;) {
    try {
      writeFileSync(filler, chunk, { flag: 'a' });
      written += chunk.length;
    } catch {
      break;
    }
  }
  // The last bytes, in smaller pieces.
  for (const size of [4096, 512, 1]) {
    for (;;) {
      try {
        writeFileSync(filler, Buffer.alloc(size), { flag: 'a' });
        written += size;
      } catch {
        break;
      }
    }
  }
  expect(written).toBeGreaterThan(0);
  return () => rmSync(filler);
}

/** A big record: a batch of a few of them cannot fit in what a full tmpfs has left in SQLite's pages. */
function bulky(record: RunRecord): RunRecord {
  return { ...record, error: { type: 'Padding', message: 'x'.repeat(64 * 1024) } };
}

describe.runIf(IS_ROOT)('the SQLite run store on a full disk (needs root: it mounts a tmpfs)', () => {
  it('never writes a refused async run later: not listed, not gettable, not taken for a lost run after a restart', async () => {
    const dataDir = join(mountPoint, 'data');
    const store = open(dataDir);
    const before = runRecord();
    await store.saveDurably(before);
    const free = fillDisk();

    const refused = bulky(pendingAsyncRunRecord());
    await expect(store.saveDurably(refused)).rejects.toThrow(/writing a batch of 1 run records failed/);
    free();
    // Space is back: what is saved now is written, and nothing of the refused run with it.
    const after = runRecord();
    await store.saveDurably(after);
    await store.flush();
    const listed = await store.listRuns(listQuery('demo', 'hello'));
    expect(listed.items.map((run) => run.id).sort()).toEqual([before.id, after.id].sort());
    expect(await store.getRun('demo', 'hello', refused.id)).toBeUndefined();
    expect(store.has(refused.id)).toBe(false);
    await store.close();

    const restarted = open(dataDir);
    const lost: RunRecord[] = [];
    restarted.deliverOwedWebhooks((record) => {
      lost.push(record);
      return true;
    });
    expect(lost).toEqual([]);
    expect(await restarted.getRun('demo', 'hello', refused.id)).toBeUndefined();
  });

  it('while the disk is full, list and get answer 503 run-store-unavailable with the cause, and log it; they answer again once space is back', async () => {
    const { logger, lines } = capturingLogger();
    const store = open(join(mountPoint, 'data'), logger);
    const kept = runRecord();
    await store.saveDurably(kept);
    const free = fillDisk();
    // A finished sync run (a plain save) cannot be written now: it waits in the store.
    const waiting = bulky(runRecord());
    store.save(waiting);

    const query = listQuery('demo', 'hello');
    for (const read of [() => store.listRuns(query), () => store.getRun('demo', 'hello', kept.id)]) {
      const error = await read().then(() => undefined, (failure: unknown) => failure);
      expect(error).toBeInstanceOf(ProblemError);
      const problem = (error as ProblemError).toBody();
      expect(problem).toMatchObject({ status: 503, type: 'https://runlet.dev/problems#run-store-unavailable' });
      expect(problem.detail).toMatch(/database or disk is full|SQLITE_FULL|disk/i);
      expect(problem.detail).toContain(store.path);
      expect((error as ProblemError).headers).toMatchObject({ 'retry-after': expect.any(String) });
    }
    expect(lines.some((line) => line.level === 50 && String(line.msg).includes(store.path))).toBe(true);

    free();
    const listed = await store.listRuns(query);
    expect(listed.items.map((run) => run.id).sort()).toEqual([kept.id, waiting.id].sort());
  });
});

describe.runIf(IS_ROOT)('the SQLite run store on a read-only data directory (needs root: a read-only bind mount)', () => {
  it('says at start which path it cannot write, and why: the directory, or the one it would be made in', () => {
    const dataDir = join(mountPoint, 'read-only');
    mkdirSync(dataDir);
    execFileSync('mount', ['--bind', '-o', 'ro', dataDir, dataDir]);
    try {
      expect(() => open(dataDir)).toThrow(`run store ${join(dataDir, 'runs.sqlite')}: cannot open the database: ${dataDir} is on a read-only file system (EROFS): give --data-dir a writable directory`);
      // A data dir still to be made there: mkdir says ENOENT; the directory it would be made in says why.
      const below = join(dataDir, 'runs', 'here');
      expect(() => open(below)).toThrow(`run store ${join(below, 'runs.sqlite')}: cannot create its directory ${below}: ${dataDir} is on a read-only file system (EROFS)`);
    } finally {
      execFileSync('umount', [dataDir]);
    }
  });
});
