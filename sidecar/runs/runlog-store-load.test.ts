// The replica's load in its RunLog: written with the runs' writes, at most about once a second however often
// it changes, and not at all while it stays the same; on a simulated clock, against the in-memory API server.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Admission } from '../admission.ts';
import { LoadMeter } from '../load/load-meter.ts';
import { ManualTimers, createStore, removeDataDir, runRecord, startCluster, yieldToIo, type Cluster, type TestStore } from '../../test/support/runlog-store-kit.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import type { RunLogLoad } from '../../crds/runlog-schema.ts';

const STATUS_WRITES = { method: 'PATCH', pathPattern: '/status' };
const EPOCH = Date.parse('2030-01-01T00:00:00Z');
/** Simulated seconds a bounded wait may drive the clock through before it gives up. */
const MAX_SIMULATED_MS = 30_000;

let cluster: Cluster | undefined;
let tested: TestStore | undefined;

afterEach(async () => {
  await tested?.store.close();
  await cluster?.server.close();
  if (tested !== undefined) await removeDataDir(tested.dataDir);
  tested = undefined;
  cluster = undefined;
});

interface Harness {
  admission: Admission;
  timers: ManualTimers;
  /** 100 simulated ms: the clock moves, the meter samples, I/O under way gets a real millisecond. */
  tick(): Promise<void>;
  /** Ticks until the RunLog's load satisfies `test`; its load then. */
  tickUntil(what: string, test: (load: RunLogLoad) => boolean): Promise<RunLogLoad>;
}

async function openWithLoad(running: Cluster): Promise<Harness> {
  const timers = new ManualTimers();
  const admission = new Admission(4);
  const meter = new LoadMeter(admission, { clock: { now: () => timers.now(), wallNow: () => EPOCH + timers.now() } });
  tested = await createStore(running, { timers, load: meter });
  tested.store.start();
  await timers.drive(tested.store.flush());
  const tick = async (): Promise<void> => {
    timers.advance(100);
    meter.sample();
    await new Promise((resolve) => setTimeout(resolve, 1));
  };
  const tickUntil = async (what: string, test: (load: RunLogLoad) => boolean): Promise<RunLogLoad> => {
    for (let simulated = 0; simulated < MAX_SIMULATED_MS; simulated += 100) {
      const load = (await running.readRunLog())?.status?.load;
      if (load !== undefined && test(load)) return load;
      await tick();
    }
    throw new Error(`the RunLog's load did not come to ${what} within ${MAX_SIMULATED_MS / 1000} simulated seconds`);
  };
  return { admission, timers, tick, tickUntil };
}

describe('RunLogStore with the replica load', () => {
  it('writes the load at start, a burst within the write cadence, and nothing while the load stays the same', async () => {
    cluster = await startCluster();
    const running = cluster;
    const { admission, tick, tickUntil } = await openWithLoad(running);
    expect((await running.readRunLog())?.status?.load).toEqual({
      inFlight: 0,
      queued: 0,
      averageConcurrency: 0,
      peakConcurrency: 0,
      requestsPerSecond: 0,
      concurrency: 4,
      sampledAt: '2030-01-01T00:00:00.000Z',
    });

    // Idle: five simulated seconds without a write.
    running.server.clearRequests();
    for (let i = 0; i < 50; i += 1) await tick();
    expect(running.server.countRequests(STATUS_WRITES)).toBe(0);

    for (let i = 0; i < 4; i += 1) admission.tryAcquire();
    admission.reserve();
    const burst = await tickUntil('the burst', (load) => load.inFlight === 4 && load.queued === 1);
    expect(burst.peakConcurrency).toBe(5);
    expect(burst.requestsPerSecond).toBeGreaterThan(0);
    // Within the write cadence of the first sample that saw it: no later than a second and a tick.
    expect(Date.parse(burst.sampledAt) - EPOCH).toBeLessThanOrEqual(5000 + 1100);

    // Steady again (all five still there): once the window has settled and been written, no more writes.
    const settled = await tickUntil('the settled burst', (load) => load.averageConcurrency === 5 && load.requestsPerSecond === 0);
    expect(settled.inFlight).toBe(4);
    running.server.clearRequests();
    for (let i = 0; i < 50; i += 1) await tick();
    expect(running.server.countRequests(STATUS_WRITES)).toBe(0);

    for (let i = 0; i < 4; i += 1) admission.release();
    admission.unreserve();
    await tickUntil('zero', (load) => load.inFlight === 0 && load.queued === 0 && load.averageConcurrency === 0 && load.peakConcurrency === 0);
    running.server.clearRequests();
    for (let i = 0; i < 50; i += 1) await tick();
    expect(running.server.countRequests(STATUS_WRITES)).toBe(0);
  });

  it('writes a load that changes at every sample about once a second, not at every change', async () => {
    cluster = await startCluster();
    const running = cluster;
    const { admission, tick } = await openWithLoad(running);
    running.server.clearRequests();
    // Ten simulated seconds, the calls in flight moving at every sample.
    for (let i = 0; i < 100; i += 1) {
      if (i % 2 === 0) admission.tryAcquire();
      else admission.release();
      await tick();
    }
    const writes = running.server.countRequests(STATUS_WRITES);
    expect(writes).toBeGreaterThanOrEqual(5);
    expect(writes).toBeLessThanOrEqual(11);
  });

  it('carries the load beside the runs, and a run saved with a load unchanged writes the same load', async () => {
    cluster = await startCluster();
    const running = cluster;
    const { admission, timers, tickUntil } = await openWithLoad(running);
    admission.tryAcquire();
    const load = await tickUntil('one in flight', (written) => written.inFlight === 1 && written.averageConcurrency === 1);
    const record = runRecord('success');
    tested!.store.save(record);
    await timers.drive(tested!.store.flush());
    await yieldToIo();
    const status = (await running.readRunLog())?.status;
    expect(status?.runs?.map((run) => run.id)).toEqual([record.id]);
    expect(status?.load).toEqual(load);
  });

  it('serialises only the runs saved since the last write, though the load (and so the runs\' byte budget) changed in between', async () => {
    cluster = await startCluster();
    const running = cluster;
    const { admission, timers, tickUntil } = await openWithLoad(running);
    const earlier = Array.from({ length: 30 }, () => runRecord('success'));
    for (const record of earlier) tested!.store.save(record);
    await timers.drive(tested!.store.flush());
    const idleLength = JSON.stringify((await running.readRunLog())?.status?.load ?? null).length;

    const saved = new Set<RunRecord>(earlier);
    const stringify = vi.spyOn(JSON, 'stringify');
    const serialisedRuns = (): RunRecord[] => stringify.mock.calls.map(([value]) => value as RunRecord).filter((value) => saved.has(value));
    try {
      for (let i = 0; i < 3; i += 1) admission.tryAcquire();
      // Written while part of the window is still idle: a fractional average, a load longer than the idle one.
      await tickUntil('three in flight, in a load of another length', (load) => load.inFlight === 3 && JSON.stringify(load).length !== idleLength);
      const later = runRecord('success');
      saved.add(later);
      tested!.store.save(later);
      await timers.drive(tested!.store.flush());
      await yieldToIo();
      // The load's writes carried the thirty runs as first serialised; the new run was serialised once.
      expect(serialisedRuns()).toEqual([later]);
      const status = (await running.readRunLog())?.status;
      expect(status?.runs).toHaveLength(31);
      expect(status?.load).toMatchObject({ inFlight: 3 });
    } finally {
      stringify.mockRestore();
    }
  });
});
