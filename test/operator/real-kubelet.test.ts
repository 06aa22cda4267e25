// Runlet on a real Node: the control plane of control-plane.sh with a kubelet, kube-proxy, containerd and runc
// (node.sh), pods in network namespaces on a bridge at 198.18.0.0/24, run from the images `make images` built
// (imported into containerd, never pulled). What the test kubelet (test/kubelet) only reads, this runs: the
// images' users under runAsNonRoot, read-only root filesystems, dropped capabilities, the probes, restarts,
// the kubelet's SIGTERM and grace period, Service routing through kube-proxy, image pulls. Pods resolve
// Services through the Node's cluster DNS (node-services.ts), so the sidecars verify callers' tokens against
// the API server's key set at kubernetes.default.svc (auth on, as by default); `kubectl logs` reaches the
// kubelet through the API server's egress proxy. install.yaml's operator runs as its own pods, from the
// image; nothing of Runlet runs in this process.
import { join } from 'node:path';
import { CoordinationV1Api, CustomObjectsApi, RbacAuthorizationV1Api, type CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { APP_LABEL } from '../../crds/api-group.ts';
import { SIDECAR_CONTAINER, SIDECAR_RUN_PORT } from '../../operator/render/names.ts';
import { POSTGRES_UID } from '../control-plane/postgres-volume.ts';
import { requestToken } from '../control-plane/process-kubelet.ts';
import { BUILT_IMAGES, NODE_ADDRESS, realNodeSkipReason, type RealNode } from '../control-plane/node.ts';
import { podSecurityViolations } from '../kube/pod-security.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { HelloApp } from './hello-app.ts';
import { enrolNamespace } from '../support/enrolment.ts';
import { OPERATOR_NAMESPACE, RUN_AUDIENCE, SERVICE_ADDRESSES, STATE_TIMEOUT_MS, createEchoApp, startRealNodeCluster, type RealNodeCluster } from './real-node-cluster.ts';
import { conditionOf, isReady, readyAtGeneration } from './operator-suite.ts';
import type { App } from '../../crds/app-schema.ts';

const skipReason = realNodeSkipReason();
if (skipReason !== undefined) console.log(`Runlet on a real kubelet: skipped, ${skipReason}`);

/** An image no registry serves: its pull is refused at once (nothing listens there in the Node's namespace). */
const UNPULLABLE_IMAGE = '127.0.0.1:9/runlet/absent:0.1.0';
const wait = <T>(what: string, check: () => Promise<T | false | undefined>, timeoutMs = STATE_TIMEOUT_MS) =>
  waitFor(check, { what, timeoutMs, intervalMs: 250 });

describe.skipIf(skipReason !== undefined)('Runlet on a real kubelet (containerd, runc, kube-proxy)', { timeout: 4 * STATE_TIMEOUT_MS }, () => {
  let cluster: RealNodeCluster | undefined;
  let node: RealNode;
  let admin: KubeConfig;
  let core: CoreV1Api;
  let kubectl: RealNodeCluster['kubectl'];
  let receiver: WebhookReceiver | undefined;
  let webhookUrl: string;

  beforeAll(async () => {
    cluster = await startRealNodeCluster();
    ({ node, admin, core, kubectl } = cluster);
    const socket = join(cluster.controlPlane.dir, 'webhooks.sock');
    receiver = await WebhookReceiver.startOnSocket(socket);
    webhookUrl = `http://${NODE_ADDRESS}:${await node.exposeToPods(socket)}/hooks/in`;
  }, 15 * 60_000);

  afterAll(async () => {
    await receiver?.close();
    await cluster?.stop();
  }, 5 * 60_000);

  afterEach((context) => {
    if (context.task.result?.state === 'fail') console.log(cluster?.diagnostics());
  });

  const namespace = () => `runlet-real-${Date.now().toString(36)}`;

  /** A caller's bearer header: a token of the namespace's default ServiceAccount for the run interface. */
  const callerAuth = async (ns: string) => ({ authorization: `Bearer ${await requestToken(core, ns, 'default', { audiences: [RUN_AUDIENCE] })}` });

  /** The App's pods once `count` are Ready (and no others are left). */
  const readyPods = (app: HelloApp, count: number) =>
    wait(`${count} pods of ${app.namespace}/${app.name} Ready`, async () => {
      const pods = await app.pods();
      return pods.length === count && pods.every(isReady) && pods;
    });

  /** A token of a ServiceAccount of `ns` bound to the chart's runs viewer ClusterRole there. */
  const runsViewerToken = async (ns: string): Promise<string> => {
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'runs-reader' } } });
    await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'runs-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-runs-viewer' },
        subjects: [{ kind: 'ServiceAccount', name: 'runs-reader', namespace: ns }],
      },
    });
    return requestToken(core, ns, 'runs-reader');
  };

  const deliveryOf = (runId: string) =>
    wait(`the webhook of run ${runId}`, async () => receiver!.deliveries.find((delivery) => delivery.body.includes(`"run_id":"${runId}"`)));

  it('runs install.yaml’s operator pods from the built image, as its non-root user with a read-only root, Ready through their probes; one holds the Lease', async () => {
    const pods = (await core.listNamespacedPod({ namespace: OPERATOR_NAMESPACE, labelSelector: 'app.kubernetes.io/component=operator' })).items;
    expect(pods.length).toBeGreaterThan(0);
    for (const pod of pods) {
      expect(isReady(pod), `${pod.metadata!.name} Ready`).toBe(true);
      const [status] = pod.status!.containerStatuses!;
      expect(status!.image).toBe(`docker.io/${BUILT_IMAGES.runlet}`);
      expect(status!.restartCount).toBe(0);
      expect(podSecurityViolations(pod, 'restricted')).toEqual([]);
    }
    const coordination = admin.makeApiClient(CoordinationV1Api);
    const lease = await wait('the operator Lease held', async () => {
      const found = await coordination.readNamespacedLease({ namespace: OPERATOR_NAMESPACE, name: 'runlet-operator' }).catch(() => undefined);
      return found?.spec?.holderIdentity !== undefined && found;
    });
    expect(pods.map((pod) => pod.metadata!.name)).toContain(lease.spec!.holderIdentity);
  });

  it('runs the embedded PostgreSQL from its image as UID 999 on a read-only root, Ready through its pg_isready probes; the operator’s results store is open', async () => {
    const [pod] = (await core.listNamespacedPod({ namespace: OPERATOR_NAMESPACE, labelSelector: 'app.kubernetes.io/component=postgres' })).items;
    expect(pod, 'the embedded PostgreSQL’s pod').toBeDefined();
    expect(isReady(pod!)).toBe(true);
    const [status] = pod!.status!.containerStatuses!;
    expect(status!.image).toBe(`docker.io/library/${BUILT_IMAGES.postgres}`);
    expect(pod!.spec!.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: POSTGRES_UID });
    // The operator is Ready only once its results store has opened (rollout status waited for that).
    const [operatorPod] = (await core.listNamespacedPod({ namespace: OPERATOR_NAMESPACE, labelSelector: 'app.kubernetes.io/component=operator' })).items;
    const ready = (await (await node.fetchInside(`http://${operatorPod!.status!.podIP}:8080/ready`)).json()) as { resultsStore?: { open: boolean } };
    expect(ready.resultsStore).toMatchObject({ open: true });
  });

  it('serves a Python App whose pod passes restricted and becomes Ready through its real probes: sync, stream and async calls through its Service', async () => {
    const app = new HelloApp(admin, namespace());
    await app.apply();
    await wait('the App Ready', async () => readyAtGeneration(await app.read()));
    const [pod] = await readyPods(app, 1);
    expect(podSecurityViolations(pod!, 'restricted')).toEqual([]);
    const [service] = await app.services();
    const base = `http://${service!.spec!.clusterIP}/v4/${app.namespace}/hello`;
    const auth = await callerAuth(app.namespace);
    const post = (path: string, body: unknown, headers: Record<string, string> = auth) =>
      node.fetchInside(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

    const anonymous = await post('/run', { name: 'Ada' }, {});
    expect(anonymous.status, 'auth is on').toBe(401);
    await anonymous.body?.cancel();

    const sync = await post('/run', { name: 'Ada' });
    expect(sync.status).toBe(200);
    expect(((await sync.json()) as { result: unknown }).result).toEqual({ greeting: 'Hello, Ada!' });

    // The token verified against the key set the sidecar fetched from https://kubernetes.default.svc, a name
    // only the cluster DNS knows.
    const stream = await post('/count', { n: 3, pause: 0.05 }, { ...auth, accept: 'text/event-stream' });
    expect(stream.status).toBe(200);
    const events = await new EventReader(stream.body as ReadableStream<Uint8Array>).rest();
    expect(events.map((event) => JSON.parse(event.data))).toEqual([1, 2, 3].map((item) => ({ item, of: 3 })));

    const accepted = await post(`/run?async=true&webhookEndpoint=${encodeURIComponent(webhookUrl)}`, { name: 'Bo' });
    expect(accepted.status).toBe(202);
    const { run_id: runId } = (await accepted.json()) as { run_id: string };
    const delivery = await deliveryOf(runId);
    expect(JSON.parse(delivery.body)).toMatchObject({ run_id: runId, status: 'success', result: { greeting: 'Hello, Bo!' } });

    // The sidecar ships its records to the operator's collector (the results store is on by default), and the
    // management API lists them from PostgreSQL: read through the operator's Service with a runs viewer's token.
    expect(pod!.spec!.containers.find((container) => container.name === SIDECAR_CONTAINER)?.args).toEqual(expect.arrayContaining(['--run-store', 'results']));
    const token = await runsViewerToken(app.namespace);
    const listed = await wait(`run ${runId} listed by the management API`, async () => {
      const page = await node.fetchInside(`http://${SERVICE_ADDRESSES['runlet-operator']}/v2/projects/${app.namespace}/apps/hello/runs`, { headers: { authorization: `Bearer ${token}` } });
      if (!page.ok) return undefined;
      const { items } = (await page.json()) as { items: Array<{ id: string; status: string }> };
      return items.find((item) => item.id === runId && item.status === 'success');
    });
    expect(listed).toMatchObject({ id: runId, status: 'success' });
  });

  it('serves a custom image’s server through its Service', async () => {
    const ns = namespace();
    const custom = admin.makeApiClient(CustomObjectsApi);
    await core.createNamespace({ body: { metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } } });
    await enrolNamespace(admin, ns);
    const createApp = (name: string, port: number) => createEchoApp(admin, ns, name, port);
    // The sidecar's run port: in one network namespace the app server cannot listen there (the test kubelet,
    // which maps every container's ports apart, ran it; a real one crash-looped it for ever). Refused instead.
    await createApp('clash', SIDECAR_RUN_PORT);
    const refused = await wait('the clashing App refused', async () => {
      const app = (await custom.getNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace: ns, name: 'clash' })) as App;
      return conditionOf(app, 'Ready')?.reason === 'InvalidSpec' && conditionOf(app, 'Ready');
    });
    expect(refused.message).toContain("spec.runtime.custom.port (8000) is one of the sidecar's ports in the app's pod");
    await createApp('echo', 9000);
    const pod = await wait('the custom App’s pod Ready', async () => {
      const pods = (await core.listNamespacedPod({ namespace: ns, labelSelector: `${APP_LABEL}=echo` })).items;
      return pods.length === 1 && isReady(pods[0]!) && pods[0];
    });
    expect(podSecurityViolations(pod as V1Pod, 'restricted')).toEqual([]);
    const service = (await core.listNamespacedService({ namespace: ns, labelSelector: `${APP_LABEL}=echo` })).items[0]!;
    const answer = await node.fetchInside(`http://${service.spec!.clusterIP}/v4/${ns}/echo/greet?who=Ada`, { method: 'POST', headers: await callerAuth(ns), body: 'hi' });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ method: 'POST', path: '/greet?who=Ada', body: 'hi' });
    // Ready through the sidecar alone (the app container has no probe on its port), and its port is not open on the
    // pod IP: nothing there can call the app around the sidecar, whatever the network plugin enforces.
    const { spec, status } = pod as V1Pod;
    const appContainer = spec!.containers.find((container) => container.name === 'app')!;
    expect([appContainer.readinessProbe, appContainer.livenessProbe?.httpGet?.port]).toEqual([undefined, 8001]);
    await expect(node.fetchInside(`http://${status!.podIP}:9000/greet`)).rejects.toThrow();
  });

  it('drains a scaled-down pod on the kubelet’s SIGTERM: its async run finishes and its webhook is delivered within the grace period', async () => {
    const app = new HelloApp(admin, namespace(), { minReplicas: 2 });
    await app.apply();
    const pods = await readyPods(app, 2);
    const auth = await callerAuth(app.namespace);
    // One run on each pod (by its address, not the Service), so whichever the ReplicaSet controller removes has one.
    const runIds: string[] = [];
    for (const pod of pods) {
      const accepted = await node.fetchInside(`http://${pod.status!.podIP}:${SIDECAR_RUN_PORT}/v4/${app.namespace}/hello/count?async=true&webhookEndpoint=${encodeURIComponent(webhookUrl)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth },
        body: JSON.stringify({ n: 4, pause: 1 }),
      });
      expect(accepted.status).toBe(202);
      runIds.push(((await accepted.json()) as { run_id: string }).run_id);
    }
    const scaledAt = performance.now();
    await app.patchSpec({ scaling: { minReplicas: 1, maxReplicas: 1 } });
    const [kept] = await readyPods(app, 1);
    const removedWithinSeconds = (performance.now() - scaledAt) / 1000;
    const gracePeriod = pods[0]!.spec!.terminationGracePeriodSeconds!;
    expect(removedWithinSeconds, 'the pod stopped by itself, before the kubelet’s SIGKILL').toBeLessThan(gracePeriod);
    expect(pods.map((pod) => pod.metadata!.uid)).toContain(kept!.metadata!.uid);
    for (const runId of runIds) {
      expect(JSON.parse((await deliveryOf(runId)).body)).toMatchObject({ run_id: runId, status: 'success', result: [1, 2, 3, 4].map((item) => ({ item, of: 4 })) });
    }
  });

  it('restarts a runtime that crashes; the App’s status and Events say which container ended, how, and how often; kubectl logs reads the ended one', async () => {
    const app = new HelloApp(admin, namespace());
    await app.apply();
    const [pod] = await readyPods(app, 1);
    const pids = await node.containerPids(pod!.metadata!.uid!, 'app');
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    const restarted = await wait('the runtime restarted and the pod Ready again', async () => {
      const [again] = await app.pods();
      const status = again?.status?.containerStatuses?.find((container) => container.name === 'app');
      return again !== undefined && isReady(again) && status?.restartCount === 1 && again;
    });
    expect(restarted.metadata!.uid).toBe(pod!.metadata!.uid);
    const lastRestart = await wait('status.lastRestart', async () => (await app.read()).status?.lastRestart);
    expect(lastRestart).toMatchObject({ pod: pod!.metadata!.name, container: 'app', restartCount: 1, exitCode: 137, reason: 'Error' });
    expect(lastRestart.message).toContain('killed by SIGKILL');
    const event = await wait('the ContainerRestarted Event', async () => (await app.events()).find((e) => e.reason === 'ContainerRestarted'));
    expect(event).toMatchObject({ type: 'Warning', message: lastRestart.message });
    const answer = await node.fetchInside(`http://${restarted.status!.podIP}:${SIDECAR_RUN_PORT}/v4/${app.namespace}/hello/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await callerAuth(app.namespace)) },
      body: JSON.stringify({ name: 'again' }),
    });
    expect(answer.status, 'the restarted runtime serves').toBe(200);

    // The kubelet's logs through the API server: the killed runtime's (it had started listening), and the
    // sidecar's, which logged the call just made.
    const podName = pod!.metadata!.name!;
    const previous = await kubectl('logs', '--namespace', app.namespace, podName, '--container', 'app', '--previous');
    expect(previous).toContain('runlet-runtime: listening on 127.0.0.1:');
    const runId = answer.headers.get('x-request-id')!;
    const sidecarLog = await wait('the call in the sidecar’s log', async () => {
      const text = await kubectl('logs', '--namespace', app.namespace, podName, '--container', 'sidecar');
      return text.includes(runId) && text;
    });
    expect(sidecarLog).toContain('"msg":"sidecar listening"');
  });

  it('shows an App whose image cannot be pulled as ImagePullBackOff, with the kubelet’s message of the refused pull', async () => {
    const app = new HelloApp(admin, namespace(), { image: UNPULLABLE_IMAGE });
    await app.apply();
    const failing = await wait('the App ImagePullBackOff', async () => {
      const current = await app.read();
      return conditionOf(current, 'Ready')?.reason === 'ImagePullBackOff' && current;
    });
    expect(conditionOf(failing, 'Ready')!.message).toMatch(new RegExp(`^pod ${app.name}-[a-z0-9]+-[a-z0-9]+: container "app" cannot pull image "${UNPULLABLE_IMAGE}": `));
    expect(conditionOf(failing, 'Available')).toMatchObject({ status: 'False', reason: 'ImagePullBackOff' });
    // Between pulls the kubelet says only that it backs off; at a pull, why the pull failed: containerd's words.
    const refused = await wait('the pull’s failure in the App’s status', async () => {
      const message = conditionOf(await app.read(), 'Ready')?.message ?? '';
      return /connection refused/.test(message) && message;
    });
    expect(refused).toContain(`failed to pull and unpack image "${UNPULLABLE_IMAGE}"`);
    const event = await wait('the ImagePullBackOff Event', async () => (await app.events()).find((e) => e.reason === 'ImagePullBackOff'));
    expect(event).toMatchObject({ type: 'Warning' });
    expect(event.message).toContain(`cannot pull image "${UNPULLABLE_IMAGE}"`);
  });
});
