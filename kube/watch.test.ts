import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer, type KubeApiServerOptions } from '../test/kube/index.ts';
import { kubeConfigCredentials } from './kubeconfig.ts';
import { kubeConfigFor } from '../test/kube/kubeconfig.ts';
import { EventLog } from '../test/kube/test-helpers.ts';
import { waitFor } from '../test/support/wait.ts';
import { KubeApi } from './client.ts';
import type { KubeObject } from './objects.ts';
import { testLogger } from '../test/support/logger.ts';
import { startWatchProxy, type WatchProxy } from '../test/support/watch-proxy.ts';
import { ResourceWatch, type RestartReason } from './watch.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const NAMESPACE = 'default';
let server: KubeApiServer;
let proxy: WatchProxy;
let watch: ResourceWatch<KubeObject> | undefined;
let api: KubeApi | undefined;

afterEach(async () => {
  await watch?.stop();
  await api?.close();
  await proxy.close();
  await server.close();
  watch = api = undefined;
});

interface Seen {
  event: 'upsert' | 'delete' | RestartReason;
  name?: string;
}

/** The watch reaches the server through a proxy the test controls; the test writes to the server directly. */
async function startWatch(serverOptions: KubeApiServerOptions, options: { watchdogMs?: number } = {}) {
  server = await startKubeApiServer(serverOptions);
  proxy = await startWatchProxy(server.url, server.ca);
  api = new KubeApi(kubeConfigCredentials(kubeConfigFor(proxy.url)));
  const seen = new EventLog<Seen>();
  watch = new ResourceWatch<KubeObject>({
    name: 'configmaps',
    api,
    path: kubePathOf('/api/v1/configmaps'),
    labelSelector: 'watched=yes',
    watchdogMs: options.watchdogMs ?? 60_000,
    logger: testLogger(),
    backoff: { initialMs: 20, maxMs: 200 },
    handlers: {
      onUpsert: (object) => seen.push({ event: 'upsert', name: object.metadata?.name }),
      onDelete: (object) => seen.push({ event: 'delete', name: object.metadata?.name }),
    },
    onRestart: (reason) => seen.push({ event: reason }),
  });
  const core = server.kubeConfig().makeApiClient(CoreV1Api);
  const create = (name: string, labels = { watched: 'yes' }) =>
    core.createNamespacedConfigMap({ namespace: NAMESPACE, body: { metadata: { name, labels } } });
  const remove = (name: string) => core.deleteNamespacedConfigMap({ namespace: NAMESPACE, name });
  return { seen, core, create, remove, watch };
}

async function watching(): Promise<void> {
  await waitFor(() => server.counters.openWatches === 1, { what: 'the watch to be open' });
}

const is = (event: Seen['event'], name?: string) => (seen: Seen) => seen.event === event && (name === undefined || seen.name === name);

describe('ResourceWatch', () => {
  it('lists, then follows additions, changes and deletions of the selected objects', async () => {
    const { seen, core, create, remove, watch } = await startWatch({});
    await create('before');
    await create('unselected', { watched: 'no' });
    watch.start();
    await watch.whenSynced();
    expect(watch.list().map((object) => object.metadata?.name)).toEqual(['before']);

    await create('later');
    await seen.waitFor(is('upsert', 'later'), 'the added object');
    await core.replaceNamespacedConfigMap({ namespace: NAMESPACE, name: 'later', body: { metadata: { name: 'later', labels: { watched: 'yes' } }, data: { k: 'v' } } });
    await seen.waitFor((s) => s.event === 'upsert' && s.name === 'later' && (watch.get(NAMESPACE, 'later') as { data?: object }).data !== undefined, 'the change');
    await remove('before');
    await seen.waitFor(is('delete', 'before'), 'the deletion');
    expect(watch.get(NAMESPACE, 'before')).toBeUndefined();
    expect(watch.get(NAMESPACE, 'later')?.metadata?.managedFields).toBeUndefined();
  });

  it('resumes after the server cuts its watches', async () => {
    const { seen, create, watch } = await startWatch({});
    watch.start();
    await watching();
    expect(server.cutWatches()).toBe(1);
    await seen.waitFor(is('closed'), 'the watch to end');
    await create('after-cut');
    await seen.waitFor(is('upsert', 'after-cut'), 'an object created after the cut');
  });

  it('relists after 410 Gone and reports what changed meanwhile', async () => {
    // No bookmarks: the watch's version stays where its last event left it.
    const { seen, core, create, remove, watch } = await startWatch({ bookmarkIntervalMs: 3_600_000 });
    await create('kept');
    await create('doomed');
    watch.start();
    await watching();
    proxy.holdWatches();
    server.cutWatches();
    await waitFor(() => proxy.heldWatches === 1, { what: 'the watch to come back' });
    // While nobody watches: changes, then a compaction past the watch's version.
    await remove('doomed');
    await create('born-in-gap');
    await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'unrelated' } } });
    server.compact();
    proxy.releaseWatches();

    await seen.waitFor(is('expired'), 'the 410');
    await seen.waitFor(is('delete', 'doomed'), 'the deletion found by the relist');
    await seen.waitFor(is('upsert', 'born-in-gap'), 'the addition found by the relist');
    expect(server.counters.watches.expired).toBe(1);
    await create('after-relist');
    await seen.waitFor(is('upsert', 'after-relist'), 'an object created after the relist');
  });

  it('restarts a watch that went silent (no event, no bookmark) — the watchdog', async () => {
    const { seen, create, watch } = await startWatch({ bookmarkIntervalMs: 100 }, { watchdogMs: 1_000 });
    watch.start();
    await watching();
    // Bookmarks alone keep a quiet watch alive: 25 of them span more than two watchdog periods.
    await waitFor(() => server.counters.watches.bookmarks >= 25, { what: '25 bookmarks' });
    expect(seen.items.filter(is('silent'))).toEqual([]);

    expect(proxy.silenceOpenWatches()).toBe(1);
    await create('while-silent');
    await seen.waitFor(is('silent'), 'the watchdog to fire');
    await seen.waitFor(is('upsert', 'while-silent'), 'the object created while the old watch was silent');
  });

  it('keeps trying while the server refuses connections, then catches up', async () => {
    const { seen, create, watch } = await startWatch({});
    watch.start();
    await watching();
    server.pause('refuse');
    await seen.waitFor((s) => s.event === 'error' || s.event === 'closed', 'the watch to fail');
    server.resume();
    await create('after-outage');
    await seen.waitFor(is('upsert', 'after-outage'), 'an object created after the outage');
  });
});
