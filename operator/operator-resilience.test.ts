// The operator keeps working through what clusters do to controllers: watches cut, history compacted (410),
// watches dying silently, the API server unreachable, applies failing.
import { afterEach, describe, expect, it } from 'vitest';
import { kubeConfigFor } from '../test/kube/kubeconfig.ts';
import { recordWatch, type RecordedWatch } from '../test/kube/test-helpers.ts';
import { waitFor } from '../test/support/wait.ts';
import { startKubeApiServer, type KubeApiServer, type KubeApiServerOptions } from '../test/kube/index.ts';
import type { KubeObject } from '../kube/objects.ts';
import { createOperator, type Operator } from './main.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import {
  STATE_TIMEOUT_MS,
  condition,
  createApp,
  createCodeConfigMap,
  createNamespace,
  isAppliedAtGeneration,
  prepareCluster,
  testConfig,
  testOperator,
  waitForApp,
  type TestCluster,
} from '../test/support/fake-cluster.ts';
import { testLogger } from '../test/support/logger.ts';
import { startWatchProxy, type WatchProxy } from '../test/support/watch-proxy.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

interface PodTemplateOwner extends KubeObject {
  spec: { template: { spec: { initContainers?: unknown[]; containers: { name: string }[] } } };
}

let cluster: TestCluster<KubeApiServer>;
let operator: Operator | undefined;
let proxy: WatchProxy | undefined;
let appEvents: RecordedWatch | undefined;

afterEach(async () => {
  appEvents?.abort();
  await operator?.stop();
  await proxy?.close();
  await cluster.close();
  operator = proxy = appEvents = undefined;
});

/** A cluster, with the operator talking to it through a proxy the test controls. */
async function start(serverOptions: KubeApiServerOptions = {}, watchdogSeconds = 120): Promise<void> {
  cluster = await prepareCluster(await startKubeApiServer(serverOptions));
  proxy = await startWatchProxy(cluster.server.url, cluster.server.ca);
  operator = createOperator({ kubeConfig: kubeConfigFor(proxy.url), config: testConfig({ watchdogSeconds }), logger: testLogger(), processMetrics: false });
  operator.start();
  await createNamespace(cluster.api, 'team');
  await createCodeConfigMap(cluster.api, 'team', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
  await createApp(cluster.api, 'team', 'before', pythonSpec());
  await waitForApp(cluster.api, 'team', 'before', isAppliedAtGeneration, 'the first App applied');
}

/** The operator's watches: Apps, Deployments, code ConfigMaps, pods, Services, Ingresses, sidecar ServiceAccounts and RoleBindings, enrolment RoleBindings, RunLogs, Nodes (nativeSidecars: auto). */
const WATCHES = 11;

/** All the watches are open. */
async function watching(): Promise<void> {
  await waitFor(() => cluster.server.counters.openWatches === WATCHES, { timeoutMs: STATE_TIMEOUT_MS, what: `the operator’s ${WATCHES} watches` });
}

async function restartsOf(reason: string): Promise<number> {
  const metric = await operator!.metrics.watchRestarts.get();
  return metric.values.filter((value) => value.labels.reason === reason).reduce((sum, value) => sum + value.value, 0);
}

describe('operator resilience', () => {
  it('an App created after the server cut every watch is reconciled', async () => {
    await start();
    await watching();
    expect(cluster.server.cutWatches()).toBe(WATCHES);
    await createApp(cluster.api, 'team', 'after-cut', pythonSpec());
    await waitForApp(cluster.api, 'team', 'after-cut', isAppliedAtGeneration, 'applied after the cut');
  });

  it('an App created after its watch version was compacted away (410 Gone) is reconciled', async () => {
    // No bookmarks: each watch's version stays where its last event left it, behind the compaction.
    await start({ bookmarkIntervalMs: 3_600_000 });
    await watching();
    proxy!.holdWatches();
    cluster.server.cutWatches();
    await waitFor(() => proxy!.heldWatches === WATCHES, { timeoutMs: STATE_TIMEOUT_MS, what: 'the watches to come back' });
    await createApp(cluster.api, 'team', 'in-gap', pythonSpec());
    await cluster.api.create(kubePathOf('/api/v1/namespaces/team/secrets'), { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'moves-history-on' } });
    cluster.server.compact();
    proxy!.releaseWatches();

    await waitForApp(cluster.api, 'team', 'in-gap', isAppliedAtGeneration, 'the App created while nobody watched');
    expect(cluster.server.counters.watches.expired).toBeGreaterThanOrEqual(1);
    expect(await restartsOf('expired')).toBeGreaterThanOrEqual(1);
    await createApp(cluster.api, 'team', 'after-relist', pythonSpec());
    await waitForApp(cluster.api, 'team', 'after-relist', isAppliedAtGeneration, 'an App created after the relist');
  });

  it('restarts watches that went silent, and reconciles what it missed', async () => {
    await start({ bookmarkIntervalMs: 100 }, 1);
    // Counted at the proxy and silenced in the same step: on a busy machine a 1 s watchdog may restart a watch
    // between the server's count and the silence.
    await waitFor(() => proxy!.openWatches === WATCHES, { timeoutMs: STATE_TIMEOUT_MS, what: `the operator’s ${WATCHES} watches through the proxy` });
    expect(proxy!.silenceOpenWatches()).toBe(WATCHES);
    await createApp(cluster.api, 'team', 'while-silent', pythonSpec());
    await waitForApp(cluster.api, 'team', 'while-silent', isAppliedAtGeneration, 'applied after the watchdog');
    expect(await restartsOf('silent')).toBeGreaterThanOrEqual(1);
  });

  it('rides out an unreachable API server', async () => {
    await start();
    await watching();
    cluster.server.pause('refuse');
    await waitFor(async () => (await restartsOf('error')) + (await restartsOf('closed')) >= WATCHES, { timeoutMs: STATE_TIMEOUT_MS, what: 'the watches to notice' });
    cluster.server.resume();
    await createApp(cluster.api, 'team', 'after-outage', pythonSpec());
    await waitForApp(cluster.api, 'team', 'after-outage', isAppliedAtGeneration, 'applied after the outage');
  });

  it('reports a failed apply as ApplyFailed and retries it with backoff until it succeeds', async () => {
    await start();
    appEvents = await recordWatch(cluster.server.kubeConfig(), '/apis/runlet.dev/v1alpha1/namespaces/team/apps', {});
    cluster.server.failNext({ method: 'PATCH', pathPattern: '/namespaces/team/deployments/flaky', status: 500, message: 'etcd is having a day', times: 2 });
    await createApp(cluster.api, 'team', 'flaky', pythonSpec());

    const failed = await appEvents.events.waitFor((event) => {
      const ready = (event.object as { status?: { conditions?: { type: string; reason: string; message: string }[] } }).status?.conditions?.find((c) => c.type === 'Ready');
      return event.object.metadata?.name === 'flaky' && ready?.reason === 'ApplyFailed';
    }, 'ApplyFailed on the App');
    expect(JSON.stringify(failed.object)).toContain('etcd is having a day');
    const app = await waitForApp(cluster.api, 'team', 'flaky', isAppliedAtGeneration, 'applied after the retries');
    expect(condition(app, 'ChildrenApplied')).toMatchObject({ status: 'True', reason: 'Applied' });
    expect((await operator!.metrics.reconcileErrors.get()).values[0]?.value).toBe(2);
  });
});

describe('operator configuration', () => {
  it('without ingress and native sidecars: no Ingress, a cluster-local URL, the sidecar as a second container — and an old Ingress removed', async () => {
    cluster = await prepareCluster(await startKubeApiServer());
    await createNamespace(cluster.api, 'plain');
    await createCodeConfigMap(cluster.api, 'plain', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
    await createApp(cluster.api, 'plain', 'hello', pythonSpec());

    const withIngress = testOperator(cluster, { ingress: { host: 'apps.example' } });
    withIngress.start();
    await waitForApp(cluster.api, 'plain', 'hello', (a) => isAppliedAtGeneration(a) && a.status?.url === 'http://apps.example/v4/plain/hello', 'applied behind the ingress');
    expect(await cluster.api.find(kubePathOf('/apis/networking.k8s.io/v1/namespaces/plain/ingresses/hello'))).toBeDefined();
    await withIngress.stop();

    operator = testOperator(cluster, { ingress: null, nativeSidecars: false });
    operator.start();
    await waitForApp(cluster.api, 'plain', 'hello', (a) => a.status?.url === 'http://hello.plain.svc.cluster.local/v4/plain/hello', 'the cluster-local URL');
    await waitFor(async () => (await cluster.api.find(kubePathOf('/apis/networking.k8s.io/v1/namespaces/plain/ingresses/hello'))) === undefined, {
      timeoutMs: STATE_TIMEOUT_MS,
      what: 'the Ingress to be removed',
    });
    const podSpec = async () => (await cluster.api.get<PodTemplateOwner>(kubePathOf('/apis/apps/v1/namespaces/plain/deployments/hello'))).spec.template.spec;
    await waitFor(async () => (await podSpec()).containers.length === 2, { timeoutMs: STATE_TIMEOUT_MS, what: 'the sidecar as a second container' });
    const pod = await podSpec();
    expect(pod.containers.map((c) => c.name)).toEqual(['app', 'sidecar']);
    expect(pod.initContainers).toBeUndefined();
  });
});
