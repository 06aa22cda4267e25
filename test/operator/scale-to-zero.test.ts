// Scale to zero, end to end on the fake API server with the process kubelet: an App with minReplicas 0 is
// reached through its Service (the test kube-proxy, following the Endpoints the operator writes); at zero the
// holder keeps sync, stream and async calls until a replica is up, and the warm path never passes it.
// The operator is set up as the chart sets it up: it makes the holder key's Secret, copies it into the app
// namespace, and the sidecars read it from there (the run ids and waits of held calls prove they have it).
// The holder's wake raises the replicas; the tests lower them by the scale, which the leader's autoscaler
// overrides (one replica stays for the idle countdown) until the App's cooldown has passed without a call.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { startHolder } from '../../operator/autoscaling/holder.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUNS_ACCESS } from '../../management/kube-auth.ts';
import { ensureHolderKey } from '../../operator/autoscaling/holder-key.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { verifyWebhookSignature } from '../support/signature.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { startKubeProxy, type EndpointsObject, type KubeProxy } from '../kubelet/kube-proxy.ts';
import { HelloApp, type RunLogView } from './hello-app.ts';
import { startLocalCluster, type LocalCluster } from './local-cluster.ts';

/** Pods start real Python processes on a loaded 2-core machine. */
const WAIT = { timeoutMs: 90_000, intervalMs: 50 };
const NEVER_READY = 'never';
/** The operator's configuration defaults, as `startLocalCluster` keeps them: its namespace is `default`. */
const HOLDER_KEY = { namespace: 'default', name: 'runlet-holder-key' };
const HOLDER_SERVICE = { namespace: 'default', name: 'runlet-holder' };
/** A management API caller the cluster authenticates, and allows to list runs. */
const READER = { token: 'zero-reader.eyJydW5zIjoicmVhZGVyIn0.sig', user: 'system:serviceaccount:runlet-e2e:reader' };

let cluster: LocalCluster;
let hello: HelloApp;
let proxy: KubeProxy;
let core: CoreV1Api;
let deployments: AppsV1Api;

beforeAll(async () => {
  cluster = await startLocalCluster({
    holder: true,
    operatorConfig: { webhookAllowCidrs: ['127.0.0.0/8'] },
    // The app that never starts gives up after 2 s; the others have the default limit.
    coldStartTimeoutMs: (app: App) => (app.metadata.name === NEVER_READY ? 2000 : 60_000),
  });
  cluster.server.tokens.set(READER.token, { username: READER.user });
  cluster.server.allow({ user: READER.user, ...RUNS_ACCESS });
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  deployments = cluster.kubeConfig.makeApiClient(AppsV1Api);
  hello = new HelloApp(cluster.kubeConfig, 'zero');
  const [namespace, configMap, app] = await hello.manifests();
  // A short cooldown: a scale to zero by a test is undone by the autoscaler until it has passed.
  app.spec.scaling = { ...app.spec.scaling, minReplicas: 0, maxReplicas: 2, cooldown: 10 };
  await core.createNamespace({ body: namespace });
  await core.createNamespacedConfigMap({ namespace: hello.namespace, body: configMap });
  await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace: hello.namespace, body: app });
  proxy = await startKubeProxy({ kubeConfig: cluster.kubeConfig, pods: cluster.kubelet, namespace: hello.namespace, service: hello.name });
}, 120_000);

afterAll(async () => {
  await proxy?.close();
  await cluster?.close();
}, 60_000);

beforeEach((context) => {
  context.onTestFailed(() => console.log(cluster.diagnostics()));
});

async function endpoints(): Promise<EndpointsObject | undefined> {
  return (await core.readNamespacedEndpoints({ namespace: hello.namespace, name: hello.name }).catch(() => undefined)) as EndpointsObject | undefined;
}

const pointsAtPods = async () => (await endpoints())?.subsets?.[0]?.addresses?.some((address) => address.targetRef?.kind === 'Pod') === true;
const pointsAtHolder = async () => {
  const holderPort = Number(new URL(cluster.operator.holder!.url).port);
  return (await endpoints())?.subsets?.[0]?.ports?.[0]?.port === holderPort;
};

/** As `kubectl scale` does: a merge patch, so a concurrent write of the autoscaler is no conflict. */
async function scaleTo(replicas: number): Promise<void> {
  await deployments.patchNamespacedDeploymentScale(
    { namespace: hello.namespace, name: hello.name, body: { spec: { replicas } }, fieldManager: 'kubectl' },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** At zero: no pod left, the Endpoints on the holder. */
async function atZero(): Promise<void> {
  await waitFor(() => hello.deployment(), { ...WAIT, what: 'the Deployment' });
  await scaleTo(0);
  await waitFor(async () => (await hello.pods()).length === 0 && (await pointsAtHolder()), { ...WAIT, what: 'no pod left and the Endpoints on the holder' });
}

async function call(path: string, init: { body: unknown; headers?: Record<string, string> }): Promise<Response> {
  return fetch(`${proxy.url}/v4/${hello.namespace}/${hello.name}/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.issuer.token(hello.namespace)}`, ...init.headers },
    body: JSON.stringify(init.body),
  });
}

/** The run record with this id, from the RunLogs of the App's pods. */
async function runRecord(runId: string): Promise<Record<string, unknown>> {
  return waitFor(
    async () => {
      for (const pod of await hello.pods()) {
        const runLog = (await hello.runLog(pod.metadata!.name!)) as (RunLogView & { status?: { runs?: Record<string, unknown>[] } }) | undefined;
        const record = runLog?.status?.runs?.find((run) => run.id === runId);
        if (record !== undefined && record.status !== 'pending' && record.status !== 'running') return record;
      }
      return undefined;
    },
    { ...WAIT, what: `the run record ${runId}` },
  );
}

/** The operator's metric samples of this test's App (a counter or a histogram's `_count`), by their labels. */
async function heldMetric(name: 'runlet_holder_calls_total' | 'runlet_holder_cold_start_seconds_count', labels: Record<string, string>): Promise<number> {
  const metric = await cluster.operator.metrics.registry.getSingleMetric(name.replace(/_count$/, ''))!.get();
  const matches = (sample: { labels: Record<string, unknown>; metricName?: string }) =>
    (sample.metricName ?? metric.name) === name && sample.labels.namespace === hello.namespace && Object.entries(labels).every(([key, value]) => sample.labels[key] === value);
  return metric.values.filter(matches).reduce((sum, sample) => sum + sample.value, 0);
}

describe('scale to zero: the cold-start limit', () => {
  it('a sync call whose app starts no replica within its limit gets 503 cold-start-timeout with Retry-After', async () => {
    // An app whose code ConfigMap does not exist: its pod never starts.
    const [, , manifest] = await hello.manifests();
    const never = { ...manifest, metadata: { name: NEVER_READY, namespace: hello.namespace } } as App;
    never.spec = { ...never.spec, runtime: { python: { module: 'main', code: { configMap: { name: 'no-such-code' } } } }, scaling: { ...never.spec.scaling, minReplicas: 0, maxReplicas: 1 } };
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace: hello.namespace, body: never });
    await waitFor(() => cluster.operator.apps.get(hello.namespace, NEVER_READY), { ...WAIT, what: 'the App in the operator cache' });

    const holder = cluster.operator.holder!;
    const answer = await fetch(`${holder.url}/v4/${hello.namespace}/${NEVER_READY}/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.issuer.token(hello.namespace)}` },
      body: JSON.stringify({ name: 'Nobody' }),
    });
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
    expect(await answer.json()).toMatchObject({ type: 'https://runlet.dev/problems#cold-start-timeout', status: 503 });
    expect(await heldMetric('runlet_holder_calls_total', { app: NEVER_READY, mode: 'sync', outcome: 'timed_out' })).toBe(1);
  }, 120_000);
});

describe('scale to zero', () => {
  it('the warm path goes from the Service to the pod, not through the holder', async () => {
    await waitFor(pointsAtPods, { ...WAIT, what: 'the Endpoints on the first pod' });
    const relayed = cluster.operator.holder!.stats.relayed;
    const answer = await call('run', { body: { name: 'Ada' } });
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { result: unknown }).result).toEqual({ greeting: 'Hello, Ada!' });
    expect(proxy.routes.at(-1)).toMatch(/^pod\//);
    expect(cluster.operator.holder!.stats.relayed).toBe(relayed);
  }, 120_000);

  it('a sync call at zero is held, wakes the app and is answered after the cold start; the run record shows the wait', async () => {
    await atZero();
    const waitsBefore = await heldMetric('runlet_holder_cold_start_seconds_count', { app: hello.name, mode: 'sync' });
    const answer = await call('run', { body: { name: 'Zero' } });
    expect(answer.status, await answer.clone().text()).toBe(200);
    expect(((await answer.json()) as { result: unknown }).result).toEqual({ greeting: 'Hello, Zero!' });
    expect(proxy.routes.at(-1)).toBe(`127.0.0.1:${new URL(cluster.operator.holder!.url).port}`);
    const runId = answer.headers.get('x-request-id')!;
    const record = await runRecord(runId);
    expect(record).toMatchObject({ id: runId, status: 'success', mode: 'sync' });
    expect(record.coldStartMs).toBeGreaterThan(0);
    // The wait is a metric too, beside the run record.
    expect(await heldMetric('runlet_holder_cold_start_seconds_count', { app: hello.name, mode: 'sync' })).toBe(waitsBefore + 1);
    expect(await heldMetric('runlet_holder_calls_total', { app: hello.name, mode: 'sync', outcome: 'handed_over' })).toBeGreaterThanOrEqual(1);
    // Once the replica is ready the Endpoints leave the holder: the next call is warm.
    await waitFor(pointsAtPods, { ...WAIT, what: 'the Endpoints back on the pod' });
  }, 180_000);

  it('a stream call at zero is held, then streams its events as they are yielded', async () => {
    await atZero();
    const answer = await call('count', { body: { n: 3, pause: 0.05 }, headers: { accept: 'text/event-stream' } });
    expect(answer.status, await answer.clone().text()).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await new EventReader(answer.body!).rest();
    expect(events.map((event) => JSON.parse(event.data))).toEqual([1, 2, 3].map((item) => ({ item, of: 3 })));
    const record = await runRecord(answer.headers.get('x-request-id')!);
    expect(record).toMatchObject({ mode: 'stream', status: 'success' });
    expect(record.coldStartMs).toBeGreaterThan(0);
  }, 180_000);

  it('an async call at zero gets its 202 at once; it runs once a replica is up, its webhook delivered with that run id', async () => {
    await atZero();
    const receiver = await WebhookReceiver.start();
    try {
      const webhook = encodeURIComponent(receiver.at().toString());
      const answer = await fetch(`${proxy.url}/v4/${hello.namespace}/${hello.name}/run?async=true&webhookEndpoint=${webhook}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.issuer.token(hello.namespace)}` },
        body: JSON.stringify({ name: 'Later' }),
      });
      expect(answer.status).toBe(202);
      const { run_id: runId } = (await answer.json()) as { run_id: string };
      expect(answer.headers.get('x-request-id')).toBe(runId);
      // Answered by the holder, before any replica was ready.
      expect((await hello.pods()).some((pod) => pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))).toBe(false);

      await receiver.received(1, WAIT.timeoutMs);
      const delivered = JSON.parse(receiver.deliveries[0]!.body) as { run_id: string; response: unknown };
      expect(delivered.run_id).toBe(runId);
      const record = await runRecord(runId);
      expect(record).toMatchObject({ id: runId, async: true, status: 'success' });
      expect(record.coldStartMs).toBeGreaterThan(0);
    } finally {
      await receiver.close();
    }
  }, 180_000);

  it('an async call at zero to a function the app lacks gets its 202; its run is listed as a failure with its cold start, its webhook signed with that failure', async () => {
    await atZero();
    const holder = cluster.operator.holder!;
    const handedOverBefore = holder.stats.handedOver;
    const receiver = await WebhookReceiver.start();
    try {
      const webhook = encodeURIComponent(receiver.at().toString());
      const answer = await call(`nope?async=true&webhookEndpoint=${webhook}`, { body: {}, headers: { 'x-webhook-secret': 'zero-secret' } });
      expect(answer.status).toBe(202);
      const { run_id: runId } = (await answer.json()) as { run_id: string };
      // The replica refuses it (no function `nope`) once it is up: it becomes the run's failure, not a lost call.
      const listed = await waitFor(
        async () => {
          const response = await fetch(`${cluster.operatorUrl}/v2/projects/${hello.namespace}/apps/${hello.name}/runs?pageSize=500`, { headers: { authorization: `Bearer ${READER.token}` } });
          return response.status === 200 && ((await response.json()) as { items: RunRecord[] }).items.find((run) => run.id === runId);
        },
        { ...WAIT, what: `run ${runId} in the list API` },
      );
      expect(listed).toMatchObject({ async: true, mode: 'async', status: 'failure', statusCode: 404, error: { type: 'Function not found' } });
      expect(listed.coldStartMs).toBeGreaterThan(0);

      await receiver.received(1, WAIT.timeoutMs);
      const delivery = receiver.deliveries[0]!;
      expect(verifyWebhookSignature('zero-secret', delivery.headers, delivery.body)).toBe(true);
      expect(JSON.parse(delivery.body)).toMatchObject({ run_id: runId, status: 'failure', status_code: 404, error: listed.error });
      // The replica's 202 for it let the holder delete its record.
      await waitFor(() => holder.stats.handedOver === handedOverBefore + 1, { ...WAIT, what: 'the hand-over counted' });
      expect((await core.listSecretForAllNamespaces({ labelSelector: 'runlet.dev/held-call-for' })).items).toEqual([]);
    } finally {
      await receiver.close();
    }
  }, 180_000);

  it('the holder key: the operator made its Secret, copied it into the app namespace, owned by the App, and the sidecar reads that copy', async () => {
    const source = await core.readNamespacedSecret(HOLDER_KEY);
    expect(Buffer.from(source.data!.key!, 'base64').toString('utf8')).toMatch(/^[0-9a-f]{64}$/);
    const copy = await core.readNamespacedSecret({ namespace: hello.namespace, name: 'runlet-holder-key' });
    expect(copy.data).toEqual(source.data);
    const app = cluster.operator.apps.get(hello.namespace, hello.name)!;
    expect(copy.metadata!.ownerReferences!.map((owner) => owner.uid)).toContain(app.metadata.uid);
    const deployment = await hello.deployment();
    const sidecar = [...(deployment!.spec!.template.spec!.initContainers ?? []), ...deployment!.spec!.template.spec!.containers].find((container) => container.name === 'sidecar')!;
    expect(sidecar.env).toContainEqual({ name: 'RUNLET_HOLDER_KEY', valueFrom: { secretKeyRef: { name: 'runlet-holder-key', key: 'key', optional: true } } });
    // Nothing else gives the sidecars the key here (the test image's environment has none): the async test's
    // run id, which the sidecar takes from the signed hand-over only with the key, proves they read it.
  });

  it('an App at zero follows the holder’s Endpoints when they change, without waiting for its own reconcile', async () => {
    await atZero();
    const holderPort = Number(new URL(cluster.operator.holder!.url).port);
    const setHolderAddresses = (ips: string[]) =>
      core.replaceNamespacedEndpoints({ ...HOLDER_SERVICE, body: { metadata: HOLDER_SERVICE, subsets: [{ addresses: ips.map((ip) => ({ ip })), ports: [{ name: 'http', port: holderPort }] }] } });
    const appAddresses = async () => ((await endpoints())?.subsets ?? []).flatMap((subset) => (subset.addresses ?? []).map((address) => address.ip)).sort();
    try {
      // A second operator pod's holder joins: the App's Endpoints list it within seconds (the resync is 10 minutes).
      await setHolderAddresses(['127.0.0.1', '127.0.0.2']);
      await waitFor(async () => (await appAddresses()).join() === '127.0.0.1,127.0.0.2', { ...WAIT, what: 'the App’s Endpoints listing both holders' });
    } finally {
      await setHolderAddresses(['127.0.0.1']);
      await waitFor(async () => (await appAddresses()).join() === '127.0.0.1', { ...WAIT, what: 'the App’s Endpoints back on the one holder' });
    }
  }, 180_000);

  // Last: it closes the operator's holder.
  it('a held async call survives a holder restart: the new holder finds its record and hands it over', async () => {
    await atZero();
    const first = cluster.operator.holder!;
    const handedOverBefore = first.stats.handedOver;
    const answer = await fetch(`${first.url}/v4/${hello.namespace}/${hello.name}/run?async=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.issuer.token(hello.namespace)}` },
      body: JSON.stringify({ name: 'Survivor' }),
    });
    expect(answer.status).toBe(202);
    const { run_id: runId } = (await answer.json()) as { run_id: string };
    // The holder goes away before any replica is ready: the call exists only in its durable record.
    await first.close();
    expect(first.stats.handedOver).toBe(handedOverBefore);

    const api = new KubeApi(kubeConfigCredentials(cluster.kubeConfig));
    const second = await startHolder({
      ...cluster.holderOptions!,
      // Another operator replica's holder: the same key, from the same Secret.
      holderKey: await ensureHolderKey(api, HOLDER_KEY),
      api,
      apps: cluster.operator.apps,
      appsSynced: async () => {},
      logger: (await import('pino')).default({ level: 'silent' }),
      identity: 'holder-after-restart',
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      // The first holder's claim is not renewed any more: it is taken over at once.
      staleClaimMs: 0,
    });
    try {
      expect(await second.recover()).toBe(1);
      const record = await runRecord(runId);
      expect(record).toMatchObject({ id: runId, async: true, status: 'success' });
      await waitFor(() => second.stats.handedOver === 1, { ...WAIT, what: 'the hand-over counted' });
      const left = await core.listSecretForAllNamespaces({ labelSelector: 'runlet.dev/held-call-for' });
      expect(left.items).toEqual([]);
    } finally {
      await second.close();
      await api.close();
    }
  }, 180_000);
});

