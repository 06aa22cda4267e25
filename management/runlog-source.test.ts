// The RunLog cache on the in-memory API server: RunLogs of one app merged and paged newest first while
// RunLogs come, change and go; filters; runs found across RunLogs; and the cache kept whole through cut
// watches and a relist after 410 Gone.
import { afterEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { ListRunsQuery } from './run-source.ts';
import { KubeApi } from '../kube/client.ts';
import { startWatchProxy, type WatchProxy } from '../test/support/watch-proxy.ts';
import type { RestartReason } from '../kube/watch.ts';
import { kubeConfigCredentials } from '../kube/kubeconfig.ts';
import { kubeConfigFor } from '../test/kube/kubeconfig.ts';
import { waitFor } from '../test/support/wait.ts';
import type { RunLogSource } from './runlog-source.ts';
import {
  OTHER_PROJECT,
  PROJECT,
  STATE_TIMEOUT_MS,
  appRuns,
  createApp,
  deleteRunLog,
  newestFirst,
  onReplica,
  runRecord,
  startSource,
  startTestCluster,
  writeRunLog,
  type TestCluster,
} from '../test/support/runlog-source-kit.ts';

const APP = 'hello';
const REPLICAS = ['hello-7d9c-aaaaa', 'hello-7d9c-bbbbb'];

let cluster: TestCluster | undefined;
let source: (RunLogSource & { api: KubeApi }) | undefined;
let proxy: WatchProxy | undefined;

afterEach(async () => {
  await source?.stop();
  await source?.api.close();
  await proxy?.close();
  await cluster?.close();
  cluster = source = proxy = undefined;
});

/** The cluster with App `hello` and its two replicas' RunLogs holding `runs`; a source synced on it. */
async function startWithRuns(count: number): Promise<{ cluster: TestCluster; source: RunLogSource; runs: RunRecord[] }> {
  cluster = await startTestCluster();
  await createApp(cluster.api, PROJECT, APP);
  const runs = appRuns({ appName: APP, count, replicas: REPLICAS });
  for (const replica of REPLICAS) await writeRunLog(cluster.api, PROJECT, replica, APP, onReplica(runs, replica));
  source = await startSource(cluster);
  return { cluster, source, runs };
}

function query(overrides: Partial<ListRunsQuery> = {}): ListRunsQuery {
  return { projectId: PROJECT, appName: APP, pageSize: 7, beforeId: null, asyncOnly: false, status: null, functionName: null, createdAfter: null, createdBefore: null, ...overrides };
}

/** Every page, following the cursor as the plugin's nextToken does; `between(n)` runs after page n. */
async function pageThrough(runSource: RunLogSource, base: Partial<ListRunsQuery>, between: (page: number) => Promise<void> = async () => {}): Promise<RunRecord[]> {
  const items: RunRecord[] = [];
  let beforeId: string | null = null;
  for (let page = 1; ; page++) {
    const answer = await runSource.listRuns(query({ ...base, beforeId }));
    items.push(...answer.items);
    if (!answer.hasMore) return items;
    expect(answer.items).toHaveLength(base.pageSize ?? 7);
    beforeId = answer.items.at(-1)!.id;
    await between(page);
  }
}

function ids(runs: RunRecord[]): string[] {
  return runs.map((run) => run.id);
}

/** Waits until the cache answers `runId` (or, with `gone`, no longer does). */
function untilCached(runSource: RunLogSource, runId: string, what: string, gone = false): Promise<true> {
  return waitFor(async () => ((await runSource.getRun(PROJECT, APP, runId)) === undefined) === gone, { timeoutMs: STATE_TIMEOUT_MS, what });
}

describe('RunLogSource', () => {
  it('lists the RunLogs of an app together, newest first, in pages without gaps or duplicates', async () => {
    const { source, runs } = await startWithRuns(50);
    expect(source.synced).toBe(true);
    expect(source.runs).toBe(50);
    const listed = await pageThrough(source, { pageSize: 7 });
    expect(ids(listed)).toEqual(ids(newestFirst(runs)));
    expect(listed).toEqual(newestFirst(runs));
  });

  it('pages on without gaps or duplicates while a third RunLog comes and a run changes between pages', async () => {
    cluster = await startTestCluster();
    await createApp(cluster.api, PROJECT, APP);
    // A third replica's runs interleave with the others', but its RunLog reaches the cache only between pages.
    const third = 'hello-7d9c-ccccc';
    const runs = appRuns({ appName: APP, count: 60, replicas: [...REPLICAS, third] });
    for (const replica of REPLICAS) await writeRunLog(cluster.api, PROJECT, replica, APP, onReplica(runs, replica));
    source = await startSource(cluster);
    const twoReplicas = newestFirst(runs.filter((run) => run.replica !== third));
    const changed = twoReplicas[30]!;
    let cursor = '';

    const listed = await pageThrough(source, { pageSize: 7 }, async (page) => {
      if (page !== 2) return;
      cursor = twoReplicas[13]!.id;
      await writeRunLog(cluster!.api, PROJECT, third, APP, onReplica(runs, third));
      await untilCached(source!, onReplica(runs, third)[0]!.id, 'the third RunLog in the cache');
      const failedNow = { ...changed, status: 'failure' as const, completedAt: new Date(Date.now() + 1000).toISOString() };
      const changedLog = onReplica(runs, changed.replica).map((run) => (run.id === changed.id ? failedNow : run));
      await writeRunLog(cluster!.api, PROJECT, changed.replica, APP, changedLog);
      await waitFor(async () => (await source!.getRun(PROJECT, APP, changed.id))?.status === 'failure', { timeoutMs: STATE_TIMEOUT_MS, what: 'the changed run' });
    });

    // The third RunLog has runs on both sides of the cursor: those below it are listed, those above belong to a
    // new first page.
    expect(onReplica(runs, third).filter((run) => run.id > cursor).length).toBeGreaterThan(0);
    expect(onReplica(runs, third).filter((run) => run.id < cursor).length).toBeGreaterThan(0);
    const listedIds = ids(listed);
    expect(new Set(listedIds).size).toBe(listedIds.length);
    // Pages 1–2 from two RunLogs, then everything below the cursor from all three: each run once, in order.
    const expected = [...twoReplicas.slice(0, 14), ...newestFirst(runs).filter((run) => run.id < cursor)];
    expect(listedIds).toEqual(ids(expected));
    expect(listed.find((run) => run.id === changed.id)?.status).toBe('failure');
    expect(ids(await pageThrough(source, { pageSize: 7 }))).toEqual(ids(newestFirst(runs)));
  });

  it('filters by async and by status, alone and together', async () => {
    const { source, runs } = await startWithRuns(50);
    const newest = newestFirst(runs);
    expect(await pageThrough(source, { asyncOnly: true })).toEqual(newest.filter((run) => run.async));
    expect(await pageThrough(source, { status: 'failure' })).toEqual(newest.filter((run) => run.status === 'failure'));
    expect(await pageThrough(source, { asyncOnly: true, status: 'success' })).toEqual(newest.filter((run) => run.async && run.status === 'success'));
    expect(await pageThrough(source, { status: 'pending', pageSize: 2 })).toEqual(newest.filter((run) => run.status === 'pending'));
    expect((await source.listRuns(query({ appName: 'nope' }))).items).toEqual([]);
  });

  it('finds a run in whichever RunLog holds it, and shows the latest state of a run two RunLogs hold', async () => {
    const { cluster, source, runs } = await startWithRuns(10);
    for (const run of runs) expect(await source.getRun(PROJECT, APP, run.id)).toEqual(run);
    expect(await source.getRun(PROJECT, APP, '01900000-0000-7000-8000-000000000000')).toBeUndefined();
    expect(await source.getRun(OTHER_PROJECT, APP, runs[0]!.id)).toBeUndefined();

    // A replica's old RunLog still holds a run in flight; the operator marked that run failed in another.
    const inFlight = runRecord({ appName: APP, replica: 'hello-old', status: 'running' });
    const markedLost = { ...inFlight, status: 'failure' as const, reason: 'replica_lost' as const, completedAt: new Date().toISOString() };
    const statusOf = async (): Promise<string | undefined> => (await source.getRun(PROJECT, APP, inFlight.id))?.status;
    await writeRunLog(cluster.api, PROJECT, 'hello-old', APP, [inFlight]);
    await waitFor(async () => (await statusOf()) === 'running', { timeoutMs: STATE_TIMEOUT_MS, what: 'the run in flight' });
    await writeRunLog(cluster.api, PROJECT, 'hello-old-marked', APP, [markedLost]);
    await waitFor(async () => (await statusOf()) === 'failure', { timeoutMs: STATE_TIMEOUT_MS, what: 'the failed copy' });
    // The stale copy written again later does not win back.
    const extra = runRecord({ appName: APP, replica: 'hello-old' });
    await writeRunLog(cluster.api, PROJECT, 'hello-old', APP, [inFlight, extra]);
    await untilCached(source, extra.id, 'the later write of the old RunLog');
    expect(await source.getRun(PROJECT, APP, inFlight.id)).toEqual(markedLost);
    expect(ids((await source.listRuns(query({ status: 'running', pageSize: 100 }))).items)).not.toContain(inFlight.id);
    expect((await source.listRuns(query({ pageSize: 100 }))).items.filter((run) => run.id === inFlight.id)).toEqual([markedLost]);
    // Without the marked copy, the one left is shown again.
    await deleteRunLog(cluster.api, PROJECT, 'hello-old-marked');
    await waitFor(async () => (await statusOf()) === 'running', { timeoutMs: STATE_TIMEOUT_MS, what: 'the copy left' });
  });

  it("drops a deleted RunLog's runs, keeping those another RunLog holds too", async () => {
    const { cluster, source, runs } = await startWithRuns(20);
    const shared = onReplica(runs, REPLICAS[0]!)[0]!;
    await writeRunLog(cluster.api, PROJECT, 'hello-copy', APP, [shared]);
    await deleteRunLog(cluster.api, PROJECT, REPLICAS[0]!);
    const gone = onReplica(runs, REPLICAS[0]!).filter((run) => run.id !== shared.id);
    await untilCached(source, gone[0]!.id, 'the deleted RunLog to leave the cache', true);
    const listed = await pageThrough(source, { pageSize: 7 });
    expect(ids(listed)).toEqual(ids(newestFirst([...onReplica(runs, REPLICAS[1]!), shared])));
    for (const run of gone) expect(await source.getRun(PROJECT, APP, run.id)).toBeUndefined();
  });

  it('knows the Apps of every namespace, or of its one namespace', async () => {
    const { cluster, source } = await startWithRuns(3);
    await createApp(cluster.api, OTHER_PROJECT, 'later');
    await waitFor(() => source.hasApp(OTHER_PROJECT, 'later'), { timeoutMs: STATE_TIMEOUT_MS, what: 'the new App' });
    expect(source.hasApp(PROJECT, APP)).toBe(true);
    expect(source.hasApp(PROJECT, 'later')).toBe(false);

    const scoped = await startSource(cluster, { namespace: OTHER_PROJECT });
    try {
      expect(scoped.hasApp(OTHER_PROJECT, 'later')).toBe(true);
      expect(scoped.hasApp(PROJECT, APP)).toBe(false);
      expect((await scoped.listRuns(query({ pageSize: 100 }))).items).toEqual([]);
    } finally {
      await scoped.stop();
      await scoped.api.close();
    }
  });

  it('keeps its cache through cut watches, and catches up with what changed', async () => {
    const { cluster, source, runs } = await startWithRuns(10);
    await waitFor(() => cluster.server.counters.openWatches === 2, { timeoutMs: STATE_TIMEOUT_MS, what: 'both watches open' });
    expect(cluster.server.cutWatches()).toBe(2);
    expect(await pageThrough(source, {})).toEqual(newestFirst(runs));
    const later = runRecord({ appName: APP, replica: REPLICAS[1]! });
    await writeRunLog(cluster.api, PROJECT, REPLICAS[1]!, APP, [...onReplica(runs, REPLICAS[1]!), later]);
    await untilCached(source, later.id, 'a run written after the cut');
    expect(ids(await pageThrough(source, {}))).toEqual(ids(newestFirst([...runs, later])));
  });

  it('restarts a watch gone silent (the watchdog), and rides out a refusing API server', async () => {
    cluster = await startTestCluster({ bookmarkIntervalMs: 100 });
    await createApp(cluster.api, PROJECT, APP);
    proxy = await startWatchProxy(cluster.server.url, cluster.server.ca);
    const restarts: RestartReason[] = [];
    source = await startSource(cluster, { api: new KubeApi(kubeConfigCredentials(kubeConfigFor(proxy.url))), watchdogMs: 1_000, onRestart: (_resource, reason) => restarts.push(reason) });
    await waitFor(() => cluster!.server.counters.openWatches === 2, { timeoutMs: STATE_TIMEOUT_MS, what: 'both watches open' });

    expect(proxy.silenceOpenWatches()).toBe(2);
    const whileSilent = runRecord({ appName: APP, replica: REPLICAS[0]! });
    await writeRunLog(cluster.api, PROJECT, REPLICAS[0]!, APP, [whileSilent]);
    await untilCached(source, whileSilent.id, 'the run written while the watch was silent');
    expect(restarts).toContain('silent');

    cluster.server.pause('refuse');
    await waitFor(() => restarts.includes('error') || restarts.includes('list-error'), { timeoutMs: STATE_TIMEOUT_MS, what: 'the watches to fail' });
    cluster.server.resume();
    const afterOutage = runRecord({ appName: APP, replica: REPLICAS[0]! });
    await writeRunLog(cluster.api, PROJECT, REPLICAS[0]!, APP, [whileSilent, afterOutage]);
    await untilCached(source, afterOutage.id, 'the run written after the outage');
  });

  it('relists after 410 Gone, dropping and adding what changed while it was not watching', async () => {
    // No bookmarks: the watch's version stays where its last event left it, behind the compaction.
    cluster = await startTestCluster({ bookmarkIntervalMs: 3_600_000 });
    await createApp(cluster.api, PROJECT, APP);
    const runs = appRuns({ appName: APP, count: 12, replicas: REPLICAS });
    for (const replica of REPLICAS) await writeRunLog(cluster.api, PROJECT, replica, APP, onReplica(runs, replica));
    proxy = await startWatchProxy(cluster.server.url, cluster.server.ca);
    const restarts: RestartReason[] = [];
    source = await startSource(cluster, { api: new KubeApi(kubeConfigCredentials(kubeConfigFor(proxy.url))), onRestart: (_resource, reason) => restarts.push(reason) });
    await waitFor(() => cluster!.server.counters.openWatches === 2, { timeoutMs: STATE_TIMEOUT_MS, what: 'both watches open' });

    proxy.holdWatches();
    cluster.server.cutWatches();
    await waitFor(() => proxy!.heldWatches === 2, { timeoutMs: STATE_TIMEOUT_MS, what: 'the watches to come back' });
    // While nobody watches: one replica's RunLog goes, another replica's comes, then history is compacted.
    await deleteRunLog(cluster.api, PROJECT, REPLICAS[0]!);
    const newcomer = runRecord({ appName: APP, replica: 'hello-7d9c-ccccc' });
    await writeRunLog(cluster.api, PROJECT, 'hello-7d9c-ccccc', APP, [newcomer]);
    cluster.server.compact();
    proxy.releaseWatches();

    await untilCached(source, newcomer.id, 'the RunLog created while nobody watched');
    await untilCached(source, onReplica(runs, REPLICAS[0]!)[0]!.id, 'the RunLog deleted while nobody watched to leave', true);
    expect(restarts).toContain('expired');
    expect(ids(await pageThrough(source, {}))).toEqual(ids(newestFirst([...onReplica(runs, REPLICAS[1]!), newcomer])));
  });
});
