import { existsSync } from 'node:fs';
import { appendFile, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUNLOG_JOURNAL_FILE_NAME, RunLogJournal } from './runlog-journal.ts';
import { WARN, captureLogger, makeDataDir, removeDataDir, runRecord, type LogLine } from '../../test/support/runlog-store-kit.ts';
import { waitFor } from '../../test/support/wait.ts';

const dataDirs: string[] = [];
const journals: RunLogJournal[] = [];

afterEach(async () => {
  for (const journal of journals.splice(0)) await journal.close();
  for (const dataDir of dataDirs.splice(0)) await removeDataDir(dataDir);
});

async function newDataDir(): Promise<string> {
  const dataDir = await makeDataDir();
  dataDirs.push(dataDir);
  return dataDir;
}

async function openJournal(dataDir: string, maxBytes?: number): Promise<{ journal: RunLogJournal; lines: LogLine[] }> {
  const { logger, lines } = captureLogger();
  const journal = await RunLogJournal.open({ dataDir, logger, maxBytes });
  journals.push(journal);
  return { journal, lines };
}

/** Closes the journal (finishing its writes) and opens the file again, as the next sidecar of the pod would. */
async function reopen(journal: RunLogJournal, dataDir: string, maxBytes?: number): Promise<{ journal: RunLogJournal; lines: LogLine[] }> {
  await journal.close();
  return openJournal(dataDir, maxBytes);
}

function pending(): RunRecord {
  return runRecord('pending', { mode: 'async', async: true });
}

function ids(records: RunRecord[]): string[] {
  return records.map((record) => record.id);
}

async function fileLines(dataDir: string): Promise<unknown[]> {
  const text = await readFile(join(dataDir, RUNLOG_JOURNAL_FILE_NAME), 'utf8');
  return text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as unknown);
}

async function fileSize(dataDir: string): Promise<number> {
  return (await stat(join(dataDir, RUNLOG_JOURNAL_FILE_NAME))).size;
}

describe('RunLogJournal', () => {
  it('starts empty where no journal was left', async () => {
    const dataDir = await newDataDir();
    const { journal, lines } = await openJournal(join(dataDir, 'not-yet-made'));
    expect(journal.takeRecovered()).toEqual([]);
    expect(journal.lastEntry).toBe(0);
    expect(journal.path).toBe(join(dataDir, 'not-yet-made', RUNLOG_JOURNAL_FILE_NAME));
    expect(lines.filter((line) => line.level >= WARN)).toEqual([]);
  });

  it('appends each record as it was when appended, and resolves once it is in the file', async () => {
    const dataDir = await newDataDir();
    const { journal } = await openJournal(dataDir);
    const record = pending();
    const appended = journal.append(record);
    record.status = 'running';
    await appended;
    expect(await fileLines(dataDir)).toEqual([{ entry: 1, run: { ...record, status: 'pending' } }]);
  });

  it('hands a new journal the runs no replication covered, latest state of each', async () => {
    const dataDir = await newDataDir();
    const { journal } = await openJournal(dataDir);
    const [replicated, waiting, changed] = [pending(), pending(), pending()];
    await Promise.all([replicated, waiting, changed].map((record) => journal.append(record)));
    journal.replicated(1);
    await journal.append({ ...changed, status: 'running' });

    const { journal: next } = await reopen(journal, dataDir);
    const recovered = next.takeRecovered();
    expect(ids(recovered).sort()).toEqual(ids([waiting, changed]).sort());
    expect(recovered.find((record) => record.id === changed.id)?.status).toBe('running');
    expect(next.takeRecovered()).toEqual([]);
    // Numbering continues after what the file held.
    await next.append(pending());
    expect(next.lastEntry).toBe(5);
  });

  it('empties the file once every entry is replicated', async () => {
    const dataDir = await newDataDir();
    const { journal } = await openJournal(dataDir);
    await Promise.all([pending(), pending()].map((record) => journal.append(record)));
    expect(await fileSize(dataDir)).toBeGreaterThan(0);
    journal.replicated(journal.lastEntry);
    await waitFor(async () => (await fileSize(dataDir)) === 0, { what: 'the journal to be emptied' });
    const { journal: next } = await reopen(journal, dataDir);
    expect(next.takeRecovered()).toEqual([]);
  });

  it('marks replicated entries while others wait, and rewrites the file without them past its size bound', async () => {
    const dataDir = await newDataDir();
    const maxBytes = 4096;
    const { journal } = await openJournal(dataDir, maxBytes);
    const records = Array.from({ length: 20 }, pending);
    for (const record of records) await journal.append(record);
    expect(await fileSize(dataDir)).toBeGreaterThan(maxBytes);

    journal.replicated(15);
    await waitFor(async () => (await fileSize(dataDir)) < maxBytes, { what: 'the journal to be rewritten' });
    expect(await fileLines(dataDir)).toEqual(records.slice(15).map((record, i) => ({ entry: 16 + i, run: record })));

    // Under the bound, a mark says which entries are replicated.
    journal.replicated(17);
    await waitFor(async () => (await fileLines(dataDir)).some((line) => JSON.stringify(line) === '{"replicatedThrough":17}'), { what: 'the mark' });
    const { journal: next } = await reopen(journal, dataDir, maxBytes);
    expect(ids(next.takeRecovered())).toEqual(ids(records.slice(17)));
  });

  it('skips a torn last line with a warning, and appends after the last whole line', async () => {
    const dataDir = await newDataDir();
    const { journal } = await openJournal(dataDir);
    const whole = [pending(), pending()];
    for (const record of whole) await journal.append(record);
    await journal.close();
    await appendFile(join(dataDir, RUNLOG_JOURNAL_FILE_NAME), '{"entry":3,"run":{"id":"torn');

    const { journal: next, lines } = await openJournal(dataDir);
    expect(ids(next.takeRecovered())).toEqual(ids(whole));
    expect(lines.some((line) => line.level === WARN && /torn last line/.test(line.msg))).toBe(true);
    const later = pending();
    await next.append(later);
    const { journal: third } = await reopen(next, dataDir);
    expect(ids(third.takeRecovered())).toEqual(ids([...whole, later]));
  });

  it('skips unreadable lines with a warning naming them', async () => {
    const dataDir = await newDataDir();
    const record = pending();
    await writeFile(join(dataDir, RUNLOG_JOURNAL_FILE_NAME), `not json\n{"entry":1,"run":${JSON.stringify(record)}}\n{"entry":"2"}\n`);
    const { journal, lines } = await openJournal(dataDir);
    expect(ids(journal.takeRecovered())).toEqual([record.id]);
    expect(lines.some((line) => line.level === WARN && JSON.stringify(line.lines) === '[1,3]')).toBe(true);
  });

  it('refuses to open, naming the folder, where the data dir cannot be made', async () => {
    const dataDir = await newDataDir();
    const file = join(dataDir, 'a-file');
    await writeFile(file, '');
    await expect(RunLogJournal.open({ dataDir: join(file, 'data'), logger: captureLogger().logger })).rejects.toThrow(
      `the run journal's folder ${join(file, 'data')} is not writable`,
    );
  });

  it.skipIf(!existsSync('/dev/full'))('rejects appends the file system refuses, naming the journal', async () => {
    const dataDir = await newDataDir();
    // Writes to /dev/full fail with ENOSPC, as on a full disk.
    await symlink('/dev/full', join(dataDir, RUNLOG_JOURNAL_FILE_NAME));
    const { journal } = await openJournal(dataDir);
    const appends = [journal.append(pending()), journal.append(pending())];
    for (const append of appends) {
      await expect(append).rejects.toThrow(`run record(s) to the run journal ${join(dataDir, RUNLOG_JOURNAL_FILE_NAME)}: ENOSPC`);
    }
  });

  it('refuses appends once closed', async () => {
    const dataDir = await newDataDir();
    const { journal } = await openJournal(dataDir);
    await journal.close();
    await expect(journal.append(pending())).rejects.toThrow(/run journal .* is closed/);
  });
  it('lets go of released entries one by one, one released while its append is queued once written: empty once none is needed', async () => {
    const dataDir = await newDataDir();
    const { journal } = await openJournal(dataDir);
    await journal.append(pending());
    const first = journal.lastEntry;
    const appended = journal.append(pending());
    journal.release([journal.lastEntry]);
    await appended;
    expect(await fileLines(dataDir)).toHaveLength(2);
    journal.release([first]);
    await waitFor(async () => (await fileSize(dataDir)) === 0, { what: 'the journal emptied' });
  });

  it('rewrites a file of released entries past its bound, keeping the one still needed', async () => {
    const dataDir = await newDataDir();
    const { journal } = await openJournal(dataDir, 2048);
    const long = pending();
    await journal.append(long);
    for (let i = 0; i < 20; i += 1) {
      await journal.append(pending());
      journal.release([journal.lastEntry]);
    }
    await waitFor(async () => (await fileSize(dataDir)) <= 2048, { what: 'the journal compacted' });
    const { journal: next } = await reopen(journal, dataDir, 2048);
    expect(ids(next.takeRecovered())).toContain(long.id);
  });
});
