import { CoreV1Api, makeInformer, type Informer, type ObjectCache, type V1ConfigMap } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from './index.ts';
import { EventLog } from './test-helpers.ts';

const NAMESPACE = 'default';
let server: KubeApiServer;
let informer: (Informer<V1ConfigMap> & ObjectCache<V1ConfigMap>) | undefined;

afterEach(async () => {
  await informer?.stop();
  informer = undefined;
  await server.close();
});

interface InformerEvent {
  verb: 'add' | 'update' | 'delete' | 'error';
  name: string | undefined;
  data?: Record<string, string> | undefined;
}

async function startInformer(core: CoreV1Api): Promise<EventLog<InformerEvent>> {
  const log = new EventLog<InformerEvent>();
  informer = makeInformer(server.kubeConfig(), `/api/v1/namespaces/${NAMESPACE}/configmaps`, () =>
    core.listNamespacedConfigMap({ namespace: NAMESPACE }),
  );
  for (const verb of ['add', 'update', 'delete'] as const) {
    informer.on(verb, (cm) => log.push({ verb, name: cm.metadata?.name, data: cm.data }));
  }
  informer.on('error', (error) => log.push({ verb: 'error', name: String(error) }));
  await informer.start();
  return log;
}

const is = (verb: InformerEvent['verb'], name: string) => (event: InformerEvent) =>
  event.verb === verb && event.name === name;

describe('client-node informer against the fake server', () => {
  it('delivers add, update and delete events', async () => {
    server = await startKubeApiServer();
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: { metadata: { name: 'before' } } });
    const log = await startInformer(core);
    await log.waitFor(is('add', 'before'), 'the listed object');

    const created = await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: { metadata: { name: 'cm' } } });
    await log.waitFor(is('add', 'cm'), 'add of cm');
    await core.replaceNamespacedConfigMap({ name: 'cm', namespace: NAMESPACE, body: { ...created, data: { k: 'v' } } });
    const update = await log.waitFor(is('update', 'cm'), 'update of cm');
    expect(update.data).toEqual({ k: 'v' });
    await core.deleteNamespacedConfigMap({ name: 'cm', namespace: NAMESPACE });
    await log.waitFor(is('delete', 'cm'), 'delete of cm');
    expect(log.items.some((e) => e.verb === 'error')).toBe(false);
  });

  it('reconnects after cutWatches and relists when its version has expired (410)', async () => {
    server = await startKubeApiServer({ historySize: 5 });
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: { metadata: { name: 'kept' } } });
    await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: { metadata: { name: 'removed' } } });
    const log = await startInformer(core);
    await log.waitFor(is('add', 'removed'), 'the initial list');
    const listsBefore = server.countRequests({ method: 'GET', pathPattern: 'configmaps', watch: false });

    // Writes the informer does not watch push its last resourceVersion out of the history window.
    for (let i = 0; i < 10; i += 1) {
      await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: `s${i}` } } });
    }
    expect(server.cutWatches()).toBe(1);
    await core.deleteNamespacedConfigMap({ name: 'removed', namespace: NAMESPACE });
    await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: { metadata: { name: 'added' } } });

    // Whether it sees these through the relist or the new watch, the informer converges.
    await log.waitFor(is('delete', 'removed'), 'delete of "removed"');
    await log.waitFor(is('add', 'added'), 'add of "added"');
    // Its re-watch could only be answered 410, and it relisted before watching again.
    expect(server.counters.watches.expired).toBe(1);
    expect(server.countRequests({ method: 'GET', pathPattern: 'configmaps', watch: false })).toBe(listsBefore + 1);

    await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: { metadata: { name: 'after' } } });
    await log.waitFor(is('add', 'after'), 'an add through the re-established watch');
    expect(informer!.list(NAMESPACE).map((cm) => cm.metadata?.name).sort()).toEqual(['added', 'after', 'kept']);
    expect(log.items.some((e) => e.verb === 'error')).toBe(false);
  });
});
