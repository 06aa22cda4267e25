import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer, type KubeApiServerOptions } from './index.ts';
import { recordWatch, withinBound, type WatchEvent } from './test-helpers.ts';

const PATH = '/api/v1/namespaces/default/configmaps';
let server: KubeApiServer;
let core: CoreV1Api;

async function start(options: KubeApiServerOptions = {}): Promise<void> {
  server = await startKubeApiServer(options);
  core = server.kubeConfig().makeApiClient(CoreV1Api);
}

afterEach(async () => {
  await server.close();
});

const named = (type: string, name: string) => (event: WatchEvent) =>
  event.type === type && event.object.metadata?.name === name;

describe('watch', () => {
  it('replays changes after a resourceVersion, then streams live ones', async () => {
    await start();
    const created = await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'w' } } });
    await core.replaceNamespacedConfigMap({ name: 'w', namespace: 'default', body: { ...created, data: { v: '1' } } });
    await core.deleteNamespacedConfigMap({ name: 'w', namespace: 'default' });

    const watch = await recordWatch(server.kubeConfig(), PATH, { resourceVersion: created.metadata!.resourceVersion! });
    await watch.events.waitFor(named('DELETED', 'w'), 'the replayed DELETED event');
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'live' } } });
    await watch.events.waitFor(named('ADDED', 'live'), 'the live ADDED event');
    watch.abort();

    expect(watch.events.items.map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual([
      'MODIFIED w',
      'DELETED w',
      'ADDED live',
    ]);
    const versions = watch.events.items.map((e) => Number(e.object.metadata?.resourceVersion));
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
  });

  it('starts with synthetic ADDED events when no resourceVersion is given', async () => {
    await start();
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'existing' } } });
    const watch = await recordWatch(server.kubeConfig(), PATH, {});
    await watch.events.waitFor(named('ADDED', 'existing'), 'the initial ADDED event');
    watch.abort();
  });

  it('sends bookmarks carrying the current resourceVersion when allowed', async () => {
    await start({ bookmarkIntervalMs: 20 });
    const list = await core.listNamespacedConfigMap({ namespace: 'default' });
    const watch = await recordWatch(server.kubeConfig(), PATH, {
      resourceVersion: list.metadata!.resourceVersion!,
      allowWatchBookmarks: true,
    });
    await core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'elsewhere' } } });
    const bookmark = await watch.events.waitFor(
      (e) => e.type === 'BOOKMARK' && e.object.metadata?.resourceVersion === server.resourceVersion,
      'a bookmark at the secret write’s resourceVersion',
    );
    expect(bookmark.object.kind).toBe('ConfigMap');
    watch.abort();
  });

  it('answers an ERROR event with a 410 Status for a version older than the history window', async () => {
    await start({ historySize: 3 });
    const first = await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'old' } } });
    for (let i = 0; i < 5; i += 1) {
      await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: `n${i}` } } });
    }
    const watch = await recordWatch(server.kubeConfig(), PATH, { resourceVersion: first.metadata!.resourceVersion! });
    const error = await watch.events.waitFor((e) => e.type === 'ERROR', 'the 410 ERROR event');
    expect(error.object).toMatchObject({ kind: 'Status', code: 410, reason: 'Expired' });
    expect(await withinBound(watch.ended, 'the end of the expired watch')).toBeNull();
    expect(server.counters.watches.expired).toBe(1);
  });

  it('answers 410 for versions before a compaction', async () => {
    await start();
    const created = await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'c' } } });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'd' } } });
    server.compact();
    const watch = await recordWatch(server.kubeConfig(), PATH, { resourceVersion: created.metadata!.resourceVersion! });
    const error = await watch.events.waitFor((e) => e.type === 'ERROR', 'the 410 ERROR event');
    expect(error.object.code).toBe(410);
    const current = await recordWatch(server.kubeConfig(), PATH, { resourceVersion: server.resourceVersion });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'e' } } });
    await current.events.waitFor(named('ADDED', 'e'), 'an event after the compaction');
    current.abort();
  });

  it('ends the stream after timeoutSeconds, or the server’s maxWatchSeconds', async () => {
    await start({ maxWatchSeconds: 1 });
    const requested = await recordWatch(server.kubeConfig(), PATH, { timeoutSeconds: 1 });
    const capped = await recordWatch(server.kubeConfig(), PATH, { timeoutSeconds: 3600 });
    expect(await withinBound(requested.ended, 'the watch timeout')).toBeNull();
    expect(await withinBound(capped.ended, 'the server’s watch cap')).toBeNull();
  });

  it('serves the legacy /watch/ path prefix', async () => {
    await start();
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'legacy' } } });
    const controller = new AbortController();
    const response = await server.fetch(`/api/v1/watch/namespaces/default/configmaps`, { signal: controller.signal });
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    const { value } = await withinBound(reader.read(), 'the first event line');
    expect(JSON.parse(value!.split('\n')[0]!)).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'legacy' } } });
    controller.abort();
  });

  it('shows objects entering and leaving a label selector as ADDED and DELETED', async () => {
    await start();
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'f' } } });
    const watch = await recordWatch(server.kubeConfig(), PATH, { labelSelector: 'watched=yes' });
    await core.patchNamespacedConfigMap({ name: 'f', namespace: 'default', body: { metadata: { labels: { watched: 'yes' } } } }, merge);
    await watch.events.waitFor(named('ADDED', 'f'), 'f entering the selector');
    await core.patchNamespacedConfigMap({ name: 'f', namespace: 'default', body: { metadata: { labels: null } } }, merge);
    await watch.events.waitFor(named('DELETED', 'f'), 'f leaving the selector');
    watch.abort();
  });

  it('ends open watches cleanly on cutWatches', async () => {
    await start();
    const watch = await recordWatch(server.kubeConfig(), PATH, {});
    expect(server.cutWatches()).toBe(1);
    expect(await withinBound(watch.ended, 'the cut watch to end')).toBeNull();
  });
});
