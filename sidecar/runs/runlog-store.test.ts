import { existsSync } from 'node:fs';
import { readFile, stat, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUNLOG_JOURNAL_FILE_NAME, RunLogJournal } from './runlog-journal.ts';
import {
  APP_NAME,
  ManualTimers,
  WAIT_MS,
  WARN,
  captureLogger,
  createStore,
  makeDataDir,
  removeDataDir,
  runIds,
  runRecord,
  startCluster,
  yieldToIo,
  type Cluster,
  type TestStore,
  type TestStoreOptions,
} from '../../test/support/runlog-store-kit.ts';
import { waitFor } from '../../test/support/wait.ts';

/** Fast cadence and short bounds, so the tests that use real time take little of it. */
const QUICK = { flushIntervalMs: 50, retryInitialMs: 20, retryMaxMs: 200, durableTimeoutMs: 500, closeTimeoutMs: 2000 };
const STATUS_WRITES = { method: 'PATCH', pathPattern: '/status' };

let cluster: Cluster;
const stores: TestStore[] = [];
const dataDirs = new Set<string>();

/** A store, not started. */
async function create(options: TestStoreOptions = {}): Promise<TestStore> {
  const created = await createStore(cluster, options);
  stores.push(created);
  dataDirs.add(created.dataDir);
  return created;
}

/** A store that has read or created its RunLog. */
async function open(options: TestStoreOptions = {}): Promise<TestStore> {
  const opened = await create(options);
  opened.store.start();
  if (options.timers instanceof ManualTimers) await options.timers.drive(opened.store.flush());
  else await opened.store.flush();
  return opened;
}

function finished(status: 'success' | 'failure' = 'success'): RunRecord {
  return runRecord(status);
}

/** Every one of `records` is in the RunLog. */
async function written(records: RunRecord[]): Promise<boolean> {
  const ids = new Set(runIds(await cluster.readRunLog()));
  return records.every((record) => ids.has(record.id));
}

async function droppedMetric(tested: TestStore, reason: string): Promise<number> {
  const metric = await tested.registry.getSingleMetric('runlet_run_records_dropped_total')!.get();
  return metric.values.find((value) => value.labels.reason === reason)?.value ?? 0;
}

afterEach(async () => {
  cluster?.server.resume();
  for (const { store } of stores.splice(0)) await store.close();
  await cluster?.server.close();
  for (const dataDir of dataDirs) await removeDataDir(dataDir);
  dataDirs.clear();
});

function asyncRun(): RunRecord {
  return runRecord('pending', { mode: 'async', async: true });
}

function journalPath(tested: TestStore): string {
  return join(tested.dataDir, RUNLOG_JOURNAL_FILE_NAME);
}

async function journalSize(tested: TestStore): Promise<number> {
  return (await stat(journalPath(tested))).size;
}

describe('RunLogStore', () => {
  it('creates the RunLog labelled with and owned by its App, and replicates a durable save into it', async () => {
    cluster = await startCluster();
    const { store } = await create(QUICK);
    const record = asyncRun();
    await store.saveDurably(record);
    await waitFor(() => written([record]), { what: 'the durable save to be replicated' });
    const runLog = await cluster.readRunLog();
    expect(runIds(runLog)).toEqual([record.id]);
    expect(runLog?.metadata.labels).toEqual({ 'runlet.dev/app': APP_NAME });
    expect(runLog?.metadata.ownerReferences).toEqual([
      { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: APP_NAME, uid: cluster.appUid, controller: true },
    ]);
    expect(runLog?.spec).toEqual({ appName: APP_NAME });
    expect(runLog?.status?.counts).toEqual({ total: 1, success: 0, failure: 0, inFlight: 1 });
    expect(store.healthy).toBe(true);
  });

  it('batches saves into about one status write a second', async () => {
    cluster = await startCluster({ keepFinished: 1000 });
    const timers = new ManualTimers();
    const { store } = await open({ timers });
    cluster.server.clearRequests();
    // 1,000 runs over two simulated seconds, five every 10 ms.
    for (let step = 0; step < 200; step += 1) {
      for (let i = 0; i < 5; i += 1) store.save(finished());
      timers.advance(10);
      await yieldToIo();
    }
    await timers.drive(store.flush());
    const writes = cluster.server.countRequests(STATUS_WRITES);
    expect(writes).toBeGreaterThanOrEqual(2);
    expect(writes).toBeLessThanOrEqual(4);
    const runLog = await cluster.readRunLog();
    expect(runIds(runLog)).toHaveLength(1000);
    expect(runLog?.status?.counts).toEqual({ total: 1000, success: 1000, failure: 0, inFlight: 0 });
  });

  it('writes the first save of a quiet period soon, not after a full interval', async () => {
    cluster = await startCluster();
    const timers = new ManualTimers();
    const { store } = await open({ timers });
    timers.advance(5000);
    cluster.server.clearRequests();
    const record = finished();
    store.save(record);
    timers.advance(10);
    await cluster.server.waitForRequest(STATUS_WRITES, WAIT_MS);
    await waitFor(async () => runIds(await cluster.readRunLog()).includes(record.id), { what: 'the save to be written' });
  });

  it('shares one status write among concurrent durable saves', async () => {
    cluster = await startCluster();
    const { store } = await open(QUICK);
    cluster.server.clearRequests();
    const records = Array.from({ length: 20 }, asyncRun);
    await Promise.all(records.map((record) => store.saveDurably(record)));
    await waitFor(() => written(records), { what: 'the durable saves to be replicated' });
    expect(cluster.server.countRequests(STATUS_WRITES)).toBe(1);
    expect(runIds(await cluster.readRunLog()).sort()).toEqual(records.map((record) => record.id).sort());
  });

  it('keeps the runs in flight and the newest keepFinished finished runs, with running counts', async () => {
    cluster = await startCluster({ keepFinished: 5 });
    const { store } = await open(QUICK);
    const inFlight = [runRecord('running'), runRecord('pending'), runRecord('running')];
    for (const record of inFlight) store.save(record);
    const done = Array.from({ length: 12 }, (_, i) => finished(i % 4 === 0 ? 'failure' : 'success'));
    for (const record of done) store.save(record);
    await store.flush();
    const runLog = await cluster.readRunLog();
    expect(new Set(runIds(runLog))).toEqual(new Set([...inFlight, ...done.slice(-5)].map((record) => record.id)));
    expect(runLog?.status?.counts).toEqual({ total: 15, success: 9, failure: 3, inFlight: 3 });
  });

  it('retries a write that conflicts with another writer, losing neither side', async () => {
    cluster = await startCluster();
    const { store } = await open(QUICK);
    const first = finished();
    store.save(first);
    await store.flush();
    const theirs = runRecord('failure', { replica: 'someone-else' });
    await cluster.patchStatusAsOther((status) => {
      status.runs = [...(status.runs ?? []), theirs];
    });
    cluster.server.clearRequests();
    const second = finished();
    store.save(second);
    await store.flush();
    expect(cluster.server.requests.filter((request) => request.method === 'PATCH').map((request) => request.status)).toEqual([409, 200]);
    expect(new Set(runIds(await cluster.readRunLog()))).toEqual(new Set([first.id, theirs.id, second.id]));

    cluster.server.failNext({ method: 'PATCH', pathPattern: '/status', status: 409 });
    const third = asyncRun();
    await store.saveDurably(third);
    await store.flush();
    expect(runIds(await cluster.readRunLog())).toContain(third.id);
    expect(store.healthy).toBe(true);
  });

  it('creates the RunLog again when it vanishes', async () => {
    cluster = await startCluster();
    const { store } = await open(QUICK);
    const before = finished();
    store.save(before);
    await store.flush();
    await cluster.deleteRunLog();
    const after = finished();
    store.save(after);
    await store.flush();
    const runLog = await cluster.readRunLog();
    expect(runIds(runLog)).toContain(after.id);
    expect(runLog?.metadata.ownerReferences?.[0]?.uid).toBe(cluster.appUid);
  });

  it('buffers saves while the API server is unreachable, and refuses durable saves once a write has failed', async () => {
    cluster = await startCluster();
    const { store } = await open(QUICK);
    cluster.server.pause('refuse');
    const buffered = Array.from({ length: 10 }, () => finished());
    for (const record of buffered) store.save(record);
    await waitFor(() => store.lastError !== undefined, { what: 'a write to fail' });
    const refused = asyncRun();
    await expect(store.saveDurably(refused)).rejects.toThrow(/could not be recorded in RunLog team-a\/hello-7d9c-abcde: writing it failed/);
    expect(store.healthy).toBe(false);
    expect(store.lastError?.message).toMatch(/PATCH .*\/status: no answer/);

    cluster.server.resume();
    await waitFor(() => written(buffered), { what: 'the buffered runs' });
    const runLog = await cluster.readRunLog();
    expect(runIds(runLog)).not.toContain(refused.id);
    expect(runLog?.status?.counts).toEqual({ total: 10, success: 10, failure: 0, inFlight: 0 });
    await waitFor(() => store.healthy, { what: 'the store to be healthy again' });
    const accepted = asyncRun();
    await store.saveDurably(accepted);
    await waitFor(() => written([accepted]), { what: 'a durable save accepted again' });
  });

  it('refuses durable saves once one has waited past the bound for a write that hangs, and loses none it accepted', async () => {
    cluster = await startCluster();
    const timers = new ManualTimers();
    const { store } = await open({ ...QUICK, timers, durableTimeoutMs: 300, requestTimeoutMs: 1000 });
    cluster.server.pause('hang');
    const buffered = Array.from({ length: 5 }, () => finished());
    for (const record of buffered) store.save(record);
    const accepted = asyncRun();
    await store.saveDurably(accepted);
    // Its write starts and hangs; past the bound, the store no longer counts on writes keeping up.
    timers.advance(301);
    await cluster.server.waitForRequest(STATUS_WRITES, WAIT_MS);
    const refused = asyncRun();
    await expect(store.saveDurably(refused)).rejects.toThrow(/durable saves have waited more than 300 ms for a write \(one is under way\)/);
    // Let a request time out on the client while the server still holds it.
    await waitFor(() => store.lastError !== undefined, { what: 'a request to time out' });
    const later = finished();
    store.save(later);
    cluster.server.resume();
    await timers.drive(store.flush());
    const ids = runIds(await cluster.readRunLog());
    expect(ids).toEqual(expect.arrayContaining([...buffered, accepted, later].map((record) => record.id)));
    expect(ids).not.toContain(refused.id);
  });

  it('refuses durable saves while its buffer of unwritten runs is full', async () => {
    cluster = await startCluster();
    const timers = new ManualTimers();
    const { store } = await open({ ...QUICK, timers, maxBufferedRuns: 5 });
    const inFlight = Array.from({ length: 5 }, () => runRecord('running'));
    for (const record of inFlight) store.save(record);
    const refused = asyncRun();
    await expect(store.saveDurably(refused)).rejects.toThrow(/5 run records wait to be written, the most it buffers/);
    await timers.drive(store.flush());
    const accepted = asyncRun();
    await store.saveDurably(accepted);
    await timers.drive(store.flush());
    const ids = runIds(await cluster.readRunLog());
    expect(new Set(ids)).toEqual(new Set([...inFlight, accepted].map((record) => record.id)));
  });

  it('drops the oldest finished runs past the buffer bound, counting and logging them', async () => {
    cluster = await startCluster();
    const tested = await open({ ...QUICK, maxBufferedRuns: 10 });
    const { store, lines } = tested;
    cluster.server.pause('refuse');
    const inFlight = runRecord('running');
    store.save(inFlight);
    const done = Array.from({ length: 25 }, () => finished());
    for (const record of done) store.save(record);
    expect(await droppedMetric(tested, 'buffer_full')).toBe(16);
    cluster.server.resume();
    await waitFor(async () => runIds(await cluster.readRunLog()).length === 10, { what: 'the buffered runs' });
    const runLog = await cluster.readRunLog();
    expect(new Set(runIds(runLog))).toEqual(new Set([inFlight, ...done.slice(-9)].map((record) => record.id)));
    expect(runLog?.status?.counts).toEqual({ total: 26, success: 25, failure: 0, inFlight: 1 });
    await waitFor(() => lines.some((line) => line.level === WARN && line.dropped === 16 && /buffer full/.test(line.msg)), { what: 'the drop to be logged' });
  });

  it('keeps the status within its byte budget, dropping the oldest finished runs first', async () => {
    cluster = await startCluster();
    const { store, lines } = await open({ ...QUICK, maxStatusBytes: 16 * 1024 });
    const inFlight = [runRecord('running'), runRecord('pending')];
    for (const record of inFlight) store.save(record);
    const done = Array.from({ length: 60 }, () => runRecord('failure', { error: { type: 'ValueError', message: 'e'.repeat(400) } }));
    for (const record of done) store.save(record);
    await store.flush();
    const runLog = await cluster.readRunLog();
    expect(Buffer.byteLength(JSON.stringify(runLog?.status))).toBeLessThanOrEqual(16 * 1024);
    const ids = runIds(runLog);
    for (const record of inFlight) expect(ids).toContain(record.id);
    expect(ids).toContain(done.at(-1)!.id);
    expect(ids).not.toContain(done[0]!.id);
    expect(runLog?.status?.counts?.total).toBe(62);
    expect(lines.some((line) => line.level === WARN && /byte budget/.test(line.msg))).toBe(true);
  });

  it('takes over the RunLog a previous sidecar of the pod left, closing its runs in flight', async () => {
    cluster = await startCluster();
    const previous = await open(QUICK);
    const abandoned = runRecord('running');
    const done = [finished(), finished('failure')];
    for (const record of [abandoned, ...done]) previous.store.save(record);
    await previous.store.close();

    const { store } = await open(QUICK);
    const next = finished();
    store.save(next);
    await store.flush();
    const runLog = await cluster.readRunLog();
    expect(new Set(runIds(runLog))).toEqual(new Set([abandoned, ...done, next].map((record) => record.id)));
    const closed = runLog?.status?.runs?.find((run) => run.id === abandoned.id);
    expect(closed).toMatchObject({ status: 'failure', reason: 'replica_lost' });
    expect(runLog?.status?.counts).toEqual({ total: 4, success: 2, failure: 2, inFlight: 0 });
    // So a held run id is taken once: the store knows the runs it took over and the ones it saved.
    for (const record of [abandoned, ...done, next]) expect(store.has(record.id), record.id).toBe(true);
    expect(store.has(finished().id)).toBe(false);
  });

  it('writes what is left on close, emptying the journal, then refuses saves', async () => {
    cluster = await startCluster();
    const tested = await create({ ...QUICK, flushIntervalMs: 60_000, durableMinIntervalMs: 60_000 });
    const { store } = tested;
    const records = [finished(), runRecord('running'), asyncRun()];
    store.save(records[0]!);
    store.save(records[1]!);
    await store.saveDurably(records[2]!);
    await store.close();
    expect(new Set(runIds(await cluster.readRunLog()))).toEqual(new Set(records.map((record) => record.id)));
    expect(await journalSize(tested)).toBe(0);
    expect(() => store.save(finished())).toThrow(/closed/);
    await expect(store.saveDurably(finished())).rejects.toThrow(/closed/);
  });

  it('counts what it could not write before the close bound as dropped', async () => {
    cluster = await startCluster();
    const tested = await open({ ...QUICK, closeTimeoutMs: 300 });
    cluster.server.pause('refuse');
    for (let i = 0; i < 3; i += 1) tested.store.save(finished());
    await tested.store.close();
    expect(await droppedMetric(tested, 'closed')).toBe(3);
    expect(tested.lines.some((line) => line.level === 50 && line.dropped === 3)).toBe(true);
  });
});

describe('RunLogStore journal', () => {
  it('answers a durable save from the journal while the API server holds every request, and replicates it after', async () => {
    cluster = await startCluster();
    const tested = await open(QUICK);
    const { store } = tested;
    cluster.server.pause('hang');
    const records = [asyncRun(), asyncRun()];
    // No write can be answered: these resolve on the journal alone.
    await Promise.all(records.map((record) => store.saveDurably(record)));
    const journaled = (await readFile(journalPath(tested), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { run?: RunRecord }).run?.id);
    expect(journaled).toEqual(records.map((record) => record.id));
    // The prompt write they asked for is under way, held by the API server.
    await cluster.server.waitForRequest(STATUS_WRITES, WAIT_MS);

    cluster.server.resume();
    await waitFor(() => written(records), { what: 'the journaled runs to be replicated' });
    await waitFor(async () => (await journalSize(tested)) === 0, { what: 'the journal to be emptied' });
  });

  it('recovers into the RunLog, as failures (replica_lost), the runs a crashed sidecar journaled and did not replicate', async () => {
    cluster = await startCluster();
    const timers = new ManualTimers();
    const crashed = await open({ ...QUICK, timers });
    const before = finished();
    crashed.store.save(before);
    await timers.drive(crashed.store.flush());
    cluster.server.pause('refuse');
    const lost = [asyncRun(), asyncRun(), asyncRun()];
    await Promise.all(lost.map((record) => crashed.store.saveDurably(record)));
    timers.advance(100);
    await waitFor(() => crashed.store.lastError !== undefined, { what: "the crashed sidecar's write to fail" });
    // The sidecar crashes: its store is dropped without a close, and its clock never moves again.
    cluster.server.resume();

    const next = await open({ ...QUICK, dataDir: crashed.dataDir });
    const runLog = await cluster.readRunLog();
    expect(new Set(runIds(runLog))).toEqual(new Set([before, ...lost].map((record) => record.id)));
    for (const record of lost) {
      expect(runLog?.status?.runs?.find((run) => run.id === record.id)).toMatchObject({ status: 'failure', reason: 'replica_lost', async: true });
    }
    expect(runLog?.status?.counts).toEqual({ total: 4, success: 1, failure: 3, inFlight: 0 });
    expect(next.lines.some((line) => line.level === WARN && line.fromJournal === 3)).toBe(true);
    await waitFor(async () => (await journalSize(next)) === 0, { what: 'the journal to be emptied' });
  });

  it('keeps the state the RunLog holds of a journaled run further along, counting each run once', async () => {
    cluster = await startCluster();
    const dataDir = await makeDataDir();
    dataDirs.add(dataDir);
    // What a sidecar leaves that replicated its runs and completed one of them, then crashed before its journal
    // recorded the replication: both runs are still journaled as pending.
    const [completed, lost] = [asyncRun(), asyncRun()];
    const journal = await RunLogJournal.open({ dataDir, logger: captureLogger().logger });
    for (const record of [completed, lost]) await journal.append(record);
    await journal.close();
    const writer = await open(QUICK);
    writer.store.save(runRecord('success', { id: completed.id, mode: 'async', async: true }));
    await writer.store.close();

    await open({ ...QUICK, dataDir });
    const runLog = await cluster.readRunLog();
    expect(runLog?.status?.runs?.find((run) => run.id === completed.id)).toMatchObject({ status: 'success', reason: null });
    expect(runLog?.status?.runs?.find((run) => run.id === lost.id)).toMatchObject({ status: 'failure', reason: 'replica_lost' });
    expect(runLog?.status?.counts).toEqual({ total: 2, success: 1, failure: 1, inFlight: 0 });
  });

  it.skipIf(!existsSync('/dev/full'))('refuses a durable save the journal cannot take, and takes the run back', async () => {
    cluster = await startCluster();
    const dataDir = await makeDataDir();
    dataDirs.add(dataDir);
    // Writes to /dev/full fail with ENOSPC, as on a full disk.
    await symlink('/dev/full', join(dataDir, RUNLOG_JOURNAL_FILE_NAME));
    const timers = new ManualTimers();
    const { store } = await open({ ...QUICK, timers, dataDir });
    const refused = asyncRun();
    await expect(store.saveDurably(refused)).rejects.toThrow(`to the run journal ${join(dataDir, RUNLOG_JOURNAL_FILE_NAME)}: ENOSPC`);
    const other = finished();
    store.save(other);
    await timers.drive(store.flush());
    const runLog = await cluster.readRunLog();
    expect(runIds(runLog)).toEqual([other.id]);
    expect(runLog?.status?.counts).toEqual({ total: 1, success: 1, failure: 0, inFlight: 0 });
  });
});
