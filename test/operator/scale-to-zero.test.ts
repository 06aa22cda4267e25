// Scale to zero, end to end on the fake API server with the process kubelet: the shared suite
// (scale-to-zero-suite.ts: warm path, sync, stream and async calls at zero, idle to zero), then what is tested
// here only — the cold-start limit, a held async call the replica refuses, the holder key and addresses as the
// chart sets them up, the metrics, and a held async call surviving a holder restart.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUNS_ACCESS, RUNS_CANCEL_ACCESS } from '../../management/kube-auth.ts';
import { startHolder } from '../../activator/holder.ts';
import { namespaceHolderKeys } from '../../operator/autoscaling/holder-key.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { verifyWebhookSignature } from '../support/signature.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { startLocalCluster, type LocalCluster } from './local-cluster.ts';
import { HELD_CALLS_NAMESPACE } from './e2e-cluster.ts';
import { scaleToZeroSuite, ZERO_WAIT, ZeroApp } from './scale-to-zero-suite.ts';

const NEVER_READY = 'never';
/** An app whose pod never starts either, with the default cold-start limit: its calls wait at the holder. */
const STUCK = 'stuck';
const STUCK_BURST = 'stuck-burst';
/** Sync calls of the burst held at once. */
const BURST = 40;
/** The operator's configuration defaults, as `startLocalCluster` keeps them: its namespace is `default`. */
const CONTROL_KEY = { namespace: 'default', name: 'runlet-holder-control' };
const HOLDER_SERVICE = { namespace: 'default', name: 'runlet-holder' };
/** Where the held async calls' records are: a namespace of their own, apart from the key's. */
const HELD_CALLS = HELD_CALLS_NAMESPACE;
/** A management API caller the cluster authenticates, and allows to list runs. */
const READER = { token: 'zero-reader.eyJydW5zIjoicmVhZGVyIn0.sig', user: 'system:serviceaccount:runlet-e2e:reader' };
/** Allowed to list runs and to cancel them. */
const CANCELLER = { token: 'zero-canceller.eyJydW5zIjoiY2FuY2VsbGVyIn0.sig', user: 'system:serviceaccount:runlet-e2e:canceller' };

let cluster: LocalCluster;
let core: CoreV1Api;

/** The activator's metric samples for `namespace` (a counter, or a histogram's `_count`), summed over the labels given. */
async function heldMetric(name: 'runlet_holder_calls_total' | 'runlet_holder_cold_start_seconds_count', namespace: string, labels: Record<string, string>): Promise<number> {
  const metric = await cluster.activator!.registry.getSingleMetric(name.replace(/_count$/, ''))!.get();
  const matches = (sample: { labels: Record<string, unknown>; metricName?: string }) =>
    (sample.metricName ?? metric.name) === name && sample.labels.namespace === namespace && Object.entries(labels).every(([key, value]) => sample.labels[key] === value);
  return metric.values.filter(matches).reduce((sum, sample) => sum + sample.value, 0);
}

beforeAll(async () => {
  cluster = await startLocalCluster({
    holder: true,
    operatorConfig: { webhookAllowCidrs: ['127.0.0.0/8'] },
    // The app that never starts gives up after 2 s; the others have the default limit.
    // The App's own limit otherwise (60 s by default): the burst's five pods start at once on a loaded machine.
    coldStartTimeoutMs: (app: App) => (app.metadata.name === NEVER_READY ? 2000 : (app.spec.scaling?.coldStartTimeout ?? 60) * 1000),
  });
  cluster.server.tokens.set(READER.token, { username: READER.user });
  cluster.server.allow({ user: READER.user, ...RUNS_ACCESS });
  cluster.server.tokens.set(CANCELLER.token, { username: CANCELLER.user });
  cluster.server.allow({ user: CANCELLER.user, ...RUNS_ACCESS });
  cluster.server.allow({ user: CANCELLER.user, ...RUNS_CANCEL_ACCESS });
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
}, 120_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

beforeEach((context) => {
  context.onTestFailed(() => console.log(cluster.diagnostics()));
});

scaleToZeroSuite(() => cluster);

describe('scale to zero: the holder itself', () => {
  let zero: ZeroApp;

  beforeAll(async () => {
    zero = await ZeroApp.apply(cluster, 'zero-holder');
  }, 120_000);
  afterAll(async () => {
    await zero?.close();
  });

  it('a sync call whose app starts no replica within its limit gets 503 cold-start-timeout with Retry-After', async () => {
    // An app whose code ConfigMap does not exist: its pod never starts.
    const { namespace } = zero.hello;
    const [, , manifest] = await zero.hello.manifests();
    const never = { ...manifest, metadata: { name: NEVER_READY, namespace } } as App;
    never.spec = { ...never.spec, runtime: { python: { module: 'main', code: { configMap: { name: 'no-such-code' } } } }, scaling: { ...never.spec.scaling, minReplicas: 0, maxReplicas: 1 } };
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, body: never });
    await waitFor(() => cluster.operator.apps.get(namespace, NEVER_READY) && cluster.activator!.apps.get(namespace, NEVER_READY), { ...ZERO_WAIT, what: 'the App in the operator’s and the activator’s caches' });

    const holder = cluster.holder!;
    const answer = await fetch(`${holder.url}/v4/${namespace}/${NEVER_READY}/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.callerToken(namespace)}` },
      body: JSON.stringify({ name: 'Nobody' }),
    });
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
    expect(await answer.json()).toMatchObject({ type: 'https://runlet.dev/problems#cold-start-timeout', status: 503 });
    expect(await heldMetric('runlet_holder_calls_total', namespace, { app: NEVER_READY, mode: 'sync', outcome: 'timed_out' })).toBe(1);
  }, 120_000);

  it('an async call at zero to a function the app lacks gets its 202; its run is listed as a failure with its cold start, its webhook signed with that failure', async () => {
    await zero.atZero();
    const { namespace, name } = zero.hello;
    const holder = cluster.holder!;
    const handedOverBefore = holder.stats.handedOver;
    const waitsBefore = await heldMetric('runlet_holder_cold_start_seconds_count', namespace, { app: name, mode: 'async' });
    const receiver = await WebhookReceiver.start();
    try {
      const webhook = encodeURIComponent(receiver.at().toString());
      const answer = await zero.call(`nope?async=true&webhookEndpoint=${webhook}`, { body: {}, headers: { 'x-webhook-secret': 'zero-secret' } });
      expect(answer.status).toBe(202);
      const { run_id: runId } = (await answer.json()) as { run_id: string };
      // The replica refuses it (no function `nope`) once it is up: it becomes the run's failure, not a lost call.
      const listed = await waitFor(
        async () => {
          const response = await fetch(`${cluster.operatorUrl}/v2/projects/${namespace}/apps/${name}/runs?pageSize=500`, { headers: { authorization: `Bearer ${READER.token}` } });
          // Listed `pending` from its 202 on (held, then queued): what is waited for is its outcome.
          return response.status === 200 && ((await response.json()) as { items: RunRecord[] }).items.find((run) => run.id === runId && run.status !== 'pending');
        },
        { ...ZERO_WAIT, what: `run ${runId} in the list API, finished` },
      );
      expect(listed).toMatchObject({ async: true, mode: 'async', status: 'failure', statusCode: 404, error: { type: 'Function not found' } });
      expect(listed.coldStartMs).toBeGreaterThan(0);

      await receiver.received(1, ZERO_WAIT.timeoutMs);
      const delivery = receiver.deliveries[0]!;
      expect(verifyWebhookSignature('zero-secret', delivery.headers, delivery.body)).toBe(true);
      expect(JSON.parse(delivery.body)).toMatchObject({ run_id: runId, status: 'failure', status_code: 404, error: listed.error });
      // The replica's 202 for it let the holder delete its record; the wait is a metric too.
      await waitFor(() => holder.stats.handedOver === handedOverBefore + 1, { ...ZERO_WAIT, what: 'the hand-over counted' });
      expect((await core.listSecretForAllNamespaces({ labelSelector: 'runlet.dev/held-call-for' })).items).toEqual([]);
      expect(await heldMetric('runlet_holder_cold_start_seconds_count', namespace, { app: name, mode: 'async' })).toBe(waitsBefore + 1);
      expect(await heldMetric('runlet_holder_calls_total', namespace, { app: name, mode: 'async', outcome: 'accepted' })).toBeGreaterThanOrEqual(1);
    } finally {
      await receiver.close();
    }
  }, 180_000);

  it("the hand-over key: the operator made the app namespace's own random key in its Secret, owned by the App, the sidecar reads it, and no root key is left in the operator's namespace", async () => {
    const { namespace, name } = zero.hello;
    const control = await core.readNamespacedSecret(CONTROL_KEY);
    expect(Buffer.from(control.data!.key!, 'base64').toString('utf8')).toMatch(/^[0-9a-f]{64}$/);
    const copy = await waitFor(() => core.readNamespacedSecret({ namespace, name: 'runlet-holder-key' }).catch(() => undefined), { ...ZERO_WAIT, what: 'the namespace’s key' });
    expect(Buffer.from(copy.data!.key!, 'base64').toString('utf8')).toMatch(/^[0-9a-f]{64}$/);
    expect(copy.data!.key).not.toBe(control.data!.key);
    // Nothing in the operator's namespace from which a namespace's key derives.
    expect(await core.readNamespacedSecret({ namespace: CONTROL_KEY.namespace, name: 'runlet-holder-key' }).catch(() => undefined)).toBeUndefined();
    const app = cluster.operator.apps.get(namespace, name)!;
    expect(copy.metadata!.ownerReferences!.map((owner) => owner.uid)).toContain(app.metadata.uid);
    const deployment = await waitFor(() => zero.hello.deployment(), { ...ZERO_WAIT, what: 'the Deployment' });
    const sidecar = [...(deployment.spec!.template.spec!.initContainers ?? []), ...deployment.spec!.template.spec!.containers].find((container) => container.name === 'sidecar')!;
    expect(sidecar.env).toContainEqual({ name: 'RUNLET_HOLDER_KEY', valueFrom: { secretKeyRef: { name: 'runlet-holder-key', key: 'key', optional: true } } });
    // Nothing else gives the sidecars the key here (the test image's environment has none): the held async
    // calls' run ids, which a sidecar takes from the signed hand-over only with the key, prove they read it.
  });

  it('an App at zero follows the holder’s Endpoints when they change, without waiting for its own reconcile', async () => {
    await zero.atZero();
    const holderPort = Number(new URL(cluster.holder!.url).port);
    const second = cluster.kubelet.network.assignLoopbackServer('a second activator pod');
    const setHolderAddresses = (ips: string[]) =>
      core.replaceNamespacedEndpoints({ ...HOLDER_SERVICE, body: { metadata: HOLDER_SERVICE, subsets: [{ addresses: ips.map((ip) => ({ ip })), ports: [{ name: 'http', port: holderPort }] }] } });
    const appAddresses = async () => (await zero.endpoints()).map((endpoint) => endpoint.ip).sort();
    const both = [cluster.holderIp!, second].sort().join();
    try {
      // A second activator pod joins: the App's Endpoints list it within seconds (the resync is 10 minutes).
      await setHolderAddresses([cluster.holderIp!, second]);
      await waitFor(async () => (await appAddresses()).join() === both, { ...ZERO_WAIT, what: 'the App’s Endpoints listing both holders' });
    } finally {
      await setHolderAddresses([cluster.holderIp!]);
      await waitFor(async () => (await appAddresses()).join() === cluster.holderIp, { ...ZERO_WAIT, what: 'the App’s Endpoints back on the one holder' });
      cluster.kubelet.network.release(second);
    }
  }, 180_000);

  it('an async call held at zero, cancelled through the management API, never starts: it is recorded cancelled, listed, and its webhook is sent that outcome, signed', async () => {
    await zero.atZero();
    const { namespace, name } = zero.hello;
    const holder = cluster.holder!;
    const handedOverBefore = holder.stats.handedOver;
    const receiver = await WebhookReceiver.start();
    try {
      const webhook = encodeURIComponent(receiver.at().toString());
      const accepted = await zero.call(`run?async=true&webhookEndpoint=${webhook}`, { body: { name: 'Never' }, headers: { 'x-webhook-secret': 'held-secret' } });
      expect(accepted.status).toBe(202);
      const { run_id: runId } = (await accepted.json()) as { run_id: string };
      const cancel = () => fetch(`${cluster.operatorUrl}/v2/projects/${namespace}/apps/${name}/runs/${runId}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${CANCELLER.token}` } });

      const cancelled = await cancel();
      const text = await cancelled.text();
      expect(cancelled.status, text).toBe(202);
      const { item } = JSON.parse(text) as { item: RunRecord };
      expect(item).toMatchObject({ id: runId, async: true, functionName: 'run', status: 'cancelled', reason: 'cancel_requested', startedAt: null, error: { type: 'Cancelled' } });
      expect(item.webhook).toMatchObject({ endpoint: receiver.at().toString().split('?')[0], state: 'pending' });
      expect((await core.listNamespacedSecret({ namespace: HELD_CALLS, labelSelector: `runlet.dev/held-call-for=${name}` })).items).toEqual([]);
      // Its holder, still waking the app for it, lists it pending no more.
      const stillPending = await fetch(`${cluster.operatorUrl}/v2/projects/${namespace}/apps/${name}/runs?status=pending`, { headers: { authorization: `Bearer ${READER.token}` } });
      expect(((await stillPending.json()) as { items: RunRecord[] }).items.map((run) => run.id)).not.toContain(runId);

      // Its webhook is sent the cancelled outcome, signed with the secret the call gave.
      await receiver.received(1, ZERO_WAIT.timeoutMs);
      const delivery = receiver.deliveries[0]!;
      expect(verifyWebhookSignature('held-secret', delivery.headers, delivery.body)).toBe(true);
      expect(JSON.parse(delivery.body)).toMatchObject({ run_id: runId, status: 'failure', status_code: 409, error: { type: 'Cancelled' } });

      // Listed, and got, as cancelled, its webhook delivered (a wait on that state: the pending one is listed first).
      const listedRun = async (): Promise<RunRecord | undefined> => {
        const listed = await fetch(`${cluster.operatorUrl}/v2/projects/${namespace}/apps/${name}/runs?pageSize=500`, { headers: { authorization: `Bearer ${READER.token}` } });
        return ((await listed.json()) as { items: RunRecord[] }).items.find((run) => run.id === runId);
      };
      await waitFor(async () => (await listedRun())?.webhook?.state === 'delivered', { ...ZERO_WAIT, what: 'the cancelled held run listed with its webhook delivered' });
      expect(await listedRun()).toMatchObject({ id: runId, status: 'cancelled', reason: 'cancel_requested', startedAt: null, webhook: { state: 'delivered', attempts: 1, lastStatusCode: 200 } });
      const again = await cancel();
      expect(again.status, 'idempotent: cancelled already').toBe(202);
      expect(((await again.json()) as { item: RunRecord }).item).toMatchObject({ id: runId, status: 'cancelled', reason: 'cancel_requested' });

      // The app woke for the call: once its replica serves, a later call runs there and is recorded; the
      // cancelled one is never handed over, and its webhook sent only once.
      const later = await zero.call('run', { body: { name: 'Later' } });
      expect(later.status).toBe(200);
      await zero.runRecord(((await later.json()) as { run_id: string }).run_id);
      await waitFor(() => holder.held(namespace, name) === 0, { ...ZERO_WAIT, what: 'the held call let go' });
      expect(holder.stats.handedOver).toBe(handedOverBefore);
      expect(await listedRun()).toMatchObject({ status: 'cancelled', startedAt: null });
      expect(receiver.deliveries).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  }, 180_000);

  it('sync and stream calls held at zero are listed pending and found by id; cancelled, each caller gets 409 run-cancelled, the runs are recorded cancelled, and the sync one\u2019s webhook is sent, signed', async () => {
    // An app whose pod never starts (no code ConfigMap), with the default cold-start limit: its calls wait at the holder.
    const { namespace } = zero.hello;
    const [, , manifest] = await zero.hello.manifests();
    const stuck = { ...manifest, metadata: { name: STUCK, namespace } } as App;
    stuck.spec = { ...stuck.spec, runtime: { python: { module: 'main', code: { configMap: { name: 'no-such-code' } } } }, scaling: { ...stuck.spec.scaling, minReplicas: 0, maxReplicas: 1 } };
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, body: stuck });
    await waitFor(() => cluster.operator.apps.get(namespace, STUCK) && cluster.activator!.apps.get(namespace, STUCK), { ...ZERO_WAIT, what: 'the App in the operator’s and the activator’s caches' });
    const receiver = await WebhookReceiver.start();
    const runs = `${cluster.operatorUrl}/v2/projects/${namespace}/apps/${STUCK}/runs`;
    const read = { headers: { authorization: `Bearer ${READER.token}` } };
    try {
      const token = await cluster.callerToken(namespace);
      const call = (query: string, headers: Record<string, string>) =>
        fetch(`${cluster.holder!.url}/v4/${namespace}/${STUCK}/run${query}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers },
          body: JSON.stringify({ name: 'Waiting' }),
        });
      const sync = call(`?webhookEndpoint=${encodeURIComponent(receiver.at().toString())}`, { 'x-webhook-secret': 'sync-secret' });
      const stream = call('', { accept: 'text/event-stream' });
      // Awaited below; a failure before then leaves them to end with the holder, not as unhandled rejections.
      for (const answer of [sync, stream]) answer.catch(() => undefined);

      // Listed while they wait: pending, never started, on the holder.
      const pending = await waitFor(
        async () => {
          const listed = ((await (await fetch(`${runs}?status=pending`, read)).json()) as { items: RunRecord[] }).items;
          return listed.length === 2 && listed;
        },
        { ...ZERO_WAIT, what: 'the two held calls listed pending' },
      );
      const byMode = Object.fromEntries(pending.map((run) => [run.mode, run]));
      expect(byMode.sync).toMatchObject({ status: 'pending', async: false, functionName: 'run', startedAt: null, replica: 'activator-0', webhook: { state: 'pending' } });
      expect(byMode.stream).toMatchObject({ status: 'pending', async: false, functionName: 'run', startedAt: null, webhook: null });
      const got = await fetch(`${runs}/${byMode.sync!.id}`, read);
      expect(((await got.json()) as { item: RunRecord }).item).toMatchObject({ id: byMode.sync!.id, status: 'pending' });

      for (const run of [byMode.sync!, byMode.stream!]) {
        const cancelled = await fetch(`${runs}/${run.id}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${CANCELLER.token}` } });
        const text = await cancelled.text();
        expect(cancelled.status, text).toBe(202);
        expect((JSON.parse(text) as { item: RunRecord }).item).toMatchObject({ id: run.id, mode: run.mode, status: 'cancelled', reason: 'cancel_requested', startedAt: null });
      }
      for (const [answer, run] of [[await sync, byMode.sync!], [await stream, byMode.stream!]] as const) {
        expect(answer.status).toBe(409);
        expect(answer.headers.get('x-request-id')).toBe(run.id);
        expect(await answer.json()).toMatchObject({ type: 'https://runlet.dev/problems#run-cancelled', status: 409 });
      }

      // Recorded cancelled (a wait on that state: the pending one was listed before), the sync call's webhook signed.
      await receiver.received(1, ZERO_WAIT.timeoutMs);
      const delivery = receiver.deliveries[0]!;
      expect(verifyWebhookSignature('sync-secret', delivery.headers, delivery.body)).toBe(true);
      expect(JSON.parse(delivery.body)).toMatchObject({ run_id: byMode.sync!.id, status: 'failure', status_code: 409, error: { type: 'Cancelled' } });
      const recorded = await waitFor(
        async () => {
          const listed = ((await (await fetch(`${runs}?pageSize=500`, read)).json()) as { items: RunRecord[] }).items;
          return listed.length === 2 && listed.every((run) => run.status === 'cancelled') && listed.find((run) => run.mode === 'sync')?.webhook?.state === 'delivered' && listed;
        },
        { ...ZERO_WAIT, what: 'both runs listed cancelled, the sync one’s webhook delivered' },
      );
      expect(recorded.map((run) => run.reason)).toEqual(['cancel_requested', 'cancel_requested']);
      expect(cluster.holder!.held(namespace, STUCK)).toBe(0);
      expect(await heldMetric('runlet_holder_calls_total', namespace, { app: STUCK, outcome: 'cancelled' })).toBe(2);
    } finally {
      await receiver.close();
      await cluster.kubeConfig.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, name: STUCK });
    }
  }, 180_000);

  it('a burst of 40 sync calls held at zero writes no record to the API server while they wait (no Secret, RunLog or ConfigMap), each listed; cancelled all at once, each is recorded cancelled in the one RunLog of held runs', async () => {
    const { namespace } = zero.hello;
    const [, , manifest] = await zero.hello.manifests();
    const app = { ...manifest, metadata: { name: STUCK_BURST, namespace } } as App;
    app.spec = { ...app.spec, runtime: { python: { module: 'main', code: { configMap: { name: 'no-such-code' } } } }, scaling: { ...app.spec.scaling, minReplicas: 0, maxReplicas: 1 } };
    const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, body: app });
    await waitFor(() => cluster.operator.apps.get(namespace, STUCK_BURST) && cluster.activator!.apps.get(namespace, STUCK_BURST), { ...ZERO_WAIT, what: 'the App in the operator’s and the activator’s caches' });
    const runs = `${cluster.operatorUrl}/v2/projects/${namespace}/apps/${STUCK_BURST}/runs`;
    const read = { headers: { authorization: `Bearer ${READER.token}` } };
    try {
      const token = await cluster.callerToken(namespace);
      const before = cluster.server.requests.length;
      const answers = Array.from({ length: BURST }, (_, index) =>
        fetch(`${cluster.holder!.url}/v4/${namespace}/${STUCK_BURST}/run`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ name: `caller ${index}` }),
        }),
      );
      for (const answer of answers) answer.catch(() => undefined);
      const pending = await waitFor(
        async () => {
          const listed = ((await (await fetch(`${runs}?status=pending&pageSize=500`, read)).json()) as { items: RunRecord[] }).items;
          return listed.length === BURST && listed;
        },
        { ...ZERO_WAIT, what: `the ${BURST} held calls listed pending` },
      );
      // What would record a held call: a Secret made (POST on the collection) or a held record, this App's RunLog
      // (its held runs', or one of its pods', of which it has none), a ConfigMap. Other Apps' pods write their own
      // RunLogs meanwhile.
      const appRunLogs = new RegExp(`/runlogs(/${STUCK_BURST}[-.][^/]*(/.*)?)?$`);
      const recordWrites = cluster.server.requests
        .slice(before)
        .filter((request) => request.method !== 'GET' && !request.watch && (/\/secrets$|\/secrets\/runlet-held-|\/configmaps(\/|$)/.test(request.path) || appRunLogs.test(request.path)));
      expect(recordWrites.map((request) => `${request.method} ${request.path}`), 'held sync calls are listed from the holder’s memory').toEqual([]);

      const cancelled = await Promise.all(pending.map((run) => fetch(`${runs}/${run.id}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${CANCELLER.token}` } })));
      expect(cancelled.map((answer) => answer.status)).toEqual(pending.map(() => 202));
      expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual(pending.map(() => 409));
      const recorded = await waitFor(
        async () => {
          const listed = ((await (await fetch(`${runs}?pageSize=500`, read)).json()) as { items: RunRecord[] }).items;
          return listed.length === BURST && listed.every((run) => run.status === 'cancelled') && listed;
        },
        { ...ZERO_WAIT, what: `the ${BURST} runs listed cancelled` },
      );
      expect(new Set(recorded.map((run) => run.id))).toEqual(new Set(pending.map((run) => run.id)));
      const runLogs = (await custom.listNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'runlogs', namespace, labelSelector: 'runlet.dev/held-runs=true' })) as { items: { metadata: { name: string }; status?: { runs?: RunRecord[] } }[] };
      const held = runLogs.items.find((runLog) => runLog.metadata.name === `${STUCK_BURST}.held-runs`);
      expect(held?.status?.runs?.length).toBe(BURST);
    } finally {
      await custom.deleteNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, name: STUCK_BURST });
    }
  }, 180_000);

  it('calls waiting at the activator for a free slot on a ready replica ask for replicas: the leader scrapes them and counts them with the replicas’ load', async () => {
    // One call at a time per replica (replica_concurrency 1, the activator's per-replica breaker), 100 % target.
    const queued = await ZeroApp.apply(cluster, zero.hello.namespace, { name: 'queued', scaling: { maxReplicas: 4, replicaConcurrency: 1, scalingTarget: 100, coldStartTimeout: 150 } });
    try {
      const { namespace, name } = queued.hello;
      await waitFor(() => cluster.activator!.apps.get(namespace, name), { ...ZERO_WAIT, what: 'the App in the activator’s cache' });
      const token = await cluster.callerToken(namespace);
      /** A call to the activator, as the App's Service sends it there while it points at the activator. */
      const atActivator = (path: string, body: unknown, accept = 'application/json') =>
        fetch(`${cluster.holder!.url}/v4/${namespace}/${name}/${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept, authorization: `Bearer ${token}` },
          body: JSON.stringify(body),
        });
      // Above zero: a first call wakes one replica, which answers it.
      const first = await atActivator('run', { name: 'First' });
      expect(first.status, await first.clone().text()).toBe(200);
      expect((await queued.hello.deployment())?.spec?.replicas).toBe(1);
      // Four calls of 10 s reach the activator, as calls do while the App's Service still points there (its
      // first replica just ready). The replica takes one; three wait at the activator for a slot, and its
      // sidecar reports one call: all the replicas' load shows is one replica fully used.
      const calls = Array.from({ length: 4 }, async () => {
        const answer = await atActivator('count', { n: 40, pause: 0.25 }, 'text/event-stream');
        expect(answer.status).toBe(200);
        return (await new EventReader(answer.body!).rest()).filter((event) => event.event !== 'end' && event.event !== 'error').length;
      });
      // What the activator answers the leader at its admin port.
      await waitFor(
        async () => {
          const report = (await (await fetch(`${cluster.activatorAdminUrl}/load`)).json()) as { apps: { namespace: string; app: string; held: number }[] };
          return report.apps.some((app) => app.namespace === namespace && app.app === name && app.held === 3);
        },
        { ...ZERO_WAIT, what: 'the activator reporting 3 calls waiting' },
      );
      // 1 call on the replica and 3 waiting: 4 replicas of 1 call, a burst of four times the one ready.
      await waitFor(async () => (await queued.hello.deployment())?.spec?.replicas === 4, { ...ZERO_WAIT, what: 'the 4 replicas the waiting calls need asked for' });
      expect((await queued.hello.read()).status?.lastScaling).toMatchObject({ reason: 'PanicBurst' });
      const scrapes = (await cluster.operator.metrics.activatorScrapes.get()).values;
      expect(scrapes.find((sample) => sample.labels.outcome === 'ok')?.value).toBeGreaterThan(0);
      expect(await Promise.all(calls)).toEqual([40, 40, 40, 40]);
    } finally {
      await queued.close();
    }
  }, 180_000);

  // Last: it closes the activator's holder.
  it('a held async call survives a holder restart: the new holder finds its record and hands it over', async () => {
    await zero.atZero();
    const { namespace, name } = zero.hello;
    const first = cluster.holder!;
    const handedOverBefore = first.stats.handedOver;
    const token = await cluster.callerToken(namespace);
    const answer = await fetch(`${first.url}/v4/${namespace}/${name}/run?async=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: 'Survivor' }),
    });
    expect(answer.status).toBe(202);
    const { run_id: runId } = (await answer.json()) as { run_id: string };
    // The holder goes away before any replica is ready: the call exists only in its durable record.
    await first.close();
    expect(first.stats.handedOver).toBe(handedOverBefore);
    // That record is in the held calls' own namespace, neither the App's nor the key's, and holds no token: what is
    // at rest, decoded.
    const records = await core.listSecretForAllNamespaces({ labelSelector: 'runlet.dev/held-call-for' });
    expect(records.items.map((record) => record.metadata?.namespace)).toEqual([HELD_CALLS]);
    const atRest = JSON.stringify(records.items[0]) + Object.values(records.items[0]!.data ?? {}).map((value) => Buffer.from(value, 'base64').toString('utf8')).join('\n');
    expect(atRest).not.toContain(token);
    expect(atRest.toLowerCase()).not.toContain('bearer');

    const api = new KubeApi(kubeConfigCredentials(cluster.kubeConfig));
    const second = await startHolder({
      ...cluster.holderOptions!,
      // Another activator replica's holder: the same key, from the same Secret.
      holderKeys: namespaceHolderKeys(api),
      api,
      apps: cluster.operator.apps,
      appsSynced: async () => {},
      logger: (await import('pino')).default({ level: 'silent' }),
      identity: 'holder-after-restart',
      recordsNamespace: HELD_CALLS,
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      // The first holder's claim is not renewed any more: it is taken over at once.
      staleClaimMs: 0,
    });
    try {
      expect(await second.recover()).toBe(1);
      const record = await zero.runRecord(runId);
      expect(record).toMatchObject({ id: runId, async: true, status: 'success' });
      await waitFor(() => second.stats.handedOver === 1, { ...ZERO_WAIT, what: 'the hand-over counted' });
      const left = await core.listSecretForAllNamespaces({ labelSelector: 'runlet.dev/held-call-for' });
      expect(left.items).toEqual([]);
    } finally {
      await second.close();
      await api.close();
    }
  }, 180_000);
});
