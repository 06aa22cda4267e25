// The operator end to end, whatever the cluster: an App applied to the API server becomes a Deployment whose
// pod runs the sidecar and the Python runtime for real; runs go through the pod's sidecar; spec and code
// changes roll out; deleting the App removes everything. e2e.test.ts runs it against the in-memory API
// server and the cluster of KUBECONFIG, control-plane.test.ts against a real control plane.
import { ApiException, CoreV1Api, RbacAuthorizationV1Api, type V1ObjectMeta, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import type { App, Condition } from '../../crds/app-schema.ts';
import { EventReader } from '../support/sse.ts';
import { expectDrainRefusedToAll } from '../support/admin-drain.ts';
import { waitFor } from '../support/wait.ts';
import { E2E_PULL_SECRET, PRIVATE_PYTHON_IMAGE, type E2eCluster } from './e2e-cluster.ts';
import { HelloApp } from './hello-app.ts';

/** Bound of every wait on cluster state: pods start real processes on a loaded 2-core machine. */
export const STATE_TIMEOUT_MS = 60_000;
/** A test waits on a few such states in a row; its own bound must let theirs report first. */
export const SUITE_OPTIONS = { timeout: 4 * STATE_TIMEOUT_MS };

export function availableAtGeneration(app: App): boolean {
  const available = app.status?.conditions?.find((condition) => condition.type === 'Available');
  return app.status?.observedGeneration === app.metadata.generation && available?.status === 'True';
}

/** Ready (serving, the rollout of this generation done) for the App's current generation. */
export function readyAtGeneration(app: App): boolean {
  return app.status?.observedGeneration === app.metadata.generation && conditionOf(app, 'Ready')?.status === 'True';
}

export function conditionOf(app: App, type: string): Condition | undefined {
  return app.status?.conditions?.find((condition) => condition.type === type);
}

export function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
}

export function operatorSuite(start: () => Promise<E2eCluster>): void {
  let cluster: E2eCluster;
  const applied: HelloApp[] = [];
  const runId = Math.random().toString(36).slice(2, 7);

  beforeAll(async () => {
    cluster = await start();
  }, 120_000);
  afterAll(async () => {
    // Namespaces go too, so a real cluster is left as it was found.
    await Promise.allSettled(applied.map((app) => app.deleteNamespace()));
    await cluster?.close();
  }, 120_000);
  beforeEach((context) => {
    context.onTestFailed(() => console.log(cluster.diagnostics()));
  });

  /** An App in a namespace of its own, or (`in`) in that of another App. */
  async function applyApp(options: { in?: HelloApp; name?: string } = {}): Promise<HelloApp> {
    const app = new HelloApp(cluster.kubeConfig, options.in?.namespace ?? `runlet-e2e-${runId}-${applied.length + 1}`, { name: options.name });
    applied.push(app);
    await app.apply();
    return app;
  }

  function waitForApp(app: HelloApp, what: string, predicate: (current: App) => boolean): Promise<App> {
    return waitFor(
      async () => {
        const current = await app.read();
        return predicate(current) && current;
      },
      { what: `App ${app.namespace}/${app.name} ${what}`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 },
    );
  }

  /** The App's only pod, once it is Ready and no other pod of the App is left (a rollout is over). */
  function onlyReadyPod(app: HelloApp, what: string, predicate: (pod: V1Pod) => boolean = () => true): Promise<V1Pod> {
    return waitFor(
      async () => {
        const pods = await app.pods();
        return pods.length === 1 && isReady(pods[0]!) && predicate(pods[0]!) && pods[0]!;
      },
      { what: `${app.namespace}: ${what}`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 },
    );
  }

  async function call(app: HelloApp, pod: V1Pod, fn: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
    const { runUrl } = await cluster.sidecar(pod);
    return fetch(`${runUrl}/v4/${app.namespace}/${app.name}/${fn}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.token(app.namespace)}`, ...headers },
      body: JSON.stringify(body),
    });
  }

  async function greeting(app: HelloApp, pod: V1Pod): Promise<unknown> {
    const response = await call(app, pod, 'run', { name: 'Ada' });
    expect(response.status).toBe(200);
    return ((await response.json()) as { result: unknown }).result;
  }

  /** Whether the run is recorded `success` where the cluster keeps runs: the pod's RunLog, or the results store. */
  async function recordedAsSuccess(app: HelloApp, pod: V1Pod, runId: string): Promise<boolean> {
    if (cluster.resultsRun !== undefined) return (await cluster.resultsRun(app.namespace, app.name, runId))?.status === 'success';
    return (await app.runLog(pod.metadata!.name!))?.status?.runs?.some((run) => run.id === runId && run.status === 'success') === true;
  }

  it('applies an App: its pod runs, sync and stream runs succeed through the sidecar, and the App becomes Available', async () => {
    const app = await applyApp();
    const available = await waitForApp(app, 'Available at its generation', availableAtGeneration);
    expect(available.status).toMatchObject({ replicas: 1, readyReplicas: 1 });
    const serving = await waitForApp(app, 'Ready at its generation', readyAtGeneration);
    expect(conditionOf(serving, 'Ready')).toMatchObject({ reason: 'Serving' });
    expect(conditionOf(serving, 'ChildrenApplied')).toMatchObject({ status: 'True', reason: 'Applied' });
    const pod = await onlyReadyPod(app, 'the pod ready');

    const sync = await call(app, pod, 'run', { name: 'Ada' });
    expect(sync.status).toBe(200);
    const syncBody = (await sync.json()) as { run_id: string; result: unknown };
    expect(syncBody.result).toEqual({ greeting: 'Hello, Ada!' });
    expect(sync.headers.get('x-request-id')).toBe(syncBody.run_id);

    const stream = await call(app, pod, 'count', { n: 3, pause: 0 }, { accept: 'text/event-stream' });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await new EventReader(stream.body!).rest();
    expect(events.map((event) => JSON.parse(event.data))).toEqual([1, 2, 3].map((item) => ({ item, of: 3 })));

    const { runUrl } = await cluster.sidecar(pod);
    const anonymous = await fetch(`${runUrl}/v4/${app.namespace}/${app.name}/run`, { method: 'POST', body: '{"name":"Eve"}' });
    expect(anonymous.status, 'a call without a token').toBe(401);

    // The sidecar records the run where the cluster keeps runs: its pod's RunLog, or the results store.
    await waitFor(() => recordedAsSuccess(app, pod, syncBody.run_id), {
      what: `run ${syncBody.run_id} recorded as success (${cluster.resultsRun === undefined ? `RunLog ${pod.metadata!.name}` : 'results store'})`,
      timeoutMs: STATE_TIMEOUT_MS,
      intervalMs: 100,
    });
  });

  it('the admin port drains for no one but the pod: another pod’s GET or POST /drain is refused while the pod is not being deleted, and it serves on; deleting the pod drains it through its preStop, the call in flight completing', async () => {
    const app = await applyApp();
    const pod = await onlyReadyPod(app, 'the pod ready');
    const { adminUrl } = await cluster.sidecar(pod);
    await expectDrainRefusedToAll(adminUrl);
    expect(await greeting(app, pod)).toEqual({ greeting: 'Hello, Ada!' });

    const stream = await call(app, pod, 'count', { n: 12, pause: 0.25 }, { accept: 'text/event-stream' });
    expect(stream.status).toBe(200);
    const reader = new EventReader(stream.body!);
    await reader.next();
    const stopped = cluster.stopCheck(pod);
    await cluster.kubeConfig.makeApiClient(CoreV1Api).deleteNamespacedPod({ namespace: app.namespace, name: pod.metadata!.name! });
    const rest = await reader.rest();
    expect(rest.map((event) => JSON.parse(event.data))).toEqual(Array.from({ length: 11 }, (_, i) => ({ item: i + 2, of: 12 })));
    await waitFor(async () => !(await app.pods()).some((live) => live.metadata!.uid === pod.metadata!.uid), {
      what: `${app.namespace}: the deleted pod gone`,
      timeoutMs: STATE_TIMEOUT_MS,
      intervalMs: 100,
    });
    expect(await stopped(), 'every process of the pod has exited').toBe(true);
  });

  it('rolls a spec change out: a new pod with the new settings takes over and the old one is stopped', async () => {
    const app = await applyApp();
    await waitForApp(app, 'Available', availableAtGeneration);
    const old = await onlyReadyPod(app, 'the first pod ready');
    const oldStopped = cluster.stopCheck(old);

    await app.patchSpec({ scaling: { replicaConcurrency: 2 } });
    const current = await onlyReadyPod(app, 'a new pod ready and the old one gone', (pod) => pod.metadata!.uid !== old.metadata!.uid);
    const sidecar = [...(current.spec!.initContainers ?? []), ...current.spec!.containers].find((c) => c.args?.includes('sidecar'));
    expect(sidecar?.args?.join(' ')).toContain('--concurrency 2');
    expect(await oldStopped(), 'every process of the old pod has exited').toBe(true);
    await waitForApp(app, 'Ready at the new generation', readyAtGeneration);
    expect(await greeting(app, current)).toEqual({ greeting: 'Hello, Ada!' });
  });

  it('rolls a code change out: pods of the new code replace those of the old', async () => {
    const app = await applyApp();
    await waitForApp(app, 'Available', availableAtGeneration);
    const old = await onlyReadyPod(app, 'the first pod ready');
    expect(await greeting(app, old)).toEqual({ greeting: 'Hello, Ada!' });

    await app.replaceCode('main.py', 'def run(name: str) -> dict:\n    return {"greeting": f"Good evening, {name}."}\n');
    const current = await onlyReadyPod(app, 'a pod of the new code', (pod) => pod.metadata!.uid !== old.metadata!.uid);
    expect(await greeting(app, current)).toEqual({ greeting: 'Good evening, Ada.' });
  });

  it('shows pods the namespace refuses in the App’s status, with the API server’s reason, and as a Warning Event', async () => {
    const app = new HelloApp(cluster.kubeConfig, `runlet-e2e-${runId}-${applied.length + 1}`);
    applied.push(app);
    let quota = '';
    await app.apply(async () => {
      quota = await cluster.refusePods(app.namespace);
    });
    const refused = await waitForApp(app, 'PodsRefused', (current) => conditionOf(current, 'Ready')?.reason === 'PodsRefused');
    expect(conditionOf(refused, 'Ready')).toMatchObject({ status: 'False' });
    expect(conditionOf(refused, 'Ready')?.message).toContain(quota);
    expect(conditionOf(refused, 'Available')).toMatchObject({ status: 'False', reason: 'PodsRefused' });
    expect(conditionOf(refused, 'ChildrenApplied')).toMatchObject({ status: 'True' });
    const event = await waitFor(async () => (await app.events()).find((e) => e.reason === 'PodsRefused'), {
      what: `a PodsRefused Event on App ${app.namespace}/${app.name}`,
      timeoutMs: STATE_TIMEOUT_MS,
      intervalMs: 100,
    });
    expect(event).toMatchObject({ type: 'Warning', source: { component: 'runlet-operator' } });
    expect(event.message).toContain(quota);
  });

  it('shows a pod that cannot pull its image in the App’s status (ImagePullBackOff, the kubelet’s message) and as a Warning Event; the pull secret made, it serves', async () => {
    const app = new HelloApp(cluster.kubeConfig, `runlet-e2e-${runId}-${applied.length + 1}`, { image: PRIVATE_PYTHON_IMAGE });
    applied.push(app);
    await app.apply();
    const failing = await waitForApp(app, 'ImagePullBackOff', (current) => conditionOf(current, 'Ready')?.reason === 'ImagePullBackOff');
    const message = conditionOf(failing, 'Ready')?.message ?? '';
    expect(conditionOf(failing, 'Ready')).toMatchObject({ status: 'False' });
    expect(message).toMatch(new RegExp(`^pod ${app.name}-[a-z0-9]+-[a-z0-9]+: container "app" cannot pull image "${PRIVATE_PYTHON_IMAGE}": `));
    expect(conditionOf(failing, 'Available')).toMatchObject({ status: 'False', reason: 'ImagePullBackOff' });
    const event = await waitFor(async () => (await app.events()).find((e) => e.reason === 'ImagePullBackOff'), {
      what: `an ImagePullBackOff Event on App ${app.namespace}/${app.name}`,
      timeoutMs: STATE_TIMEOUT_MS,
      intervalMs: 100,
    });
    expect(event).toMatchObject({ type: 'Warning', source: { component: 'runlet-operator' } });
    expect(event.message).toContain(`cannot pull image "${PRIVATE_PYTHON_IMAGE}"`);
    // The registry's refusal, as the kubelet words it on a pull (between pulls it says only that it backs off).
    await waitForApp(app, 'showing the registry’s refusal', (current) => /pull access denied/.test(conditionOf(current, 'Ready')?.message ?? ''));

    // The pods name the pull secret the operator is configured with: once it exists in the namespace, they pull.
    await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: app.namespace,
      body: { metadata: { name: E2E_PULL_SECRET }, type: 'kubernetes.io/dockerconfigjson', stringData: { '.dockerconfigjson': '{"auths":{"registry.test":{"auth":"ZTJlOmUyZQ=="}}}' } },
    });
    await waitForApp(app, 'Ready once the image is pulled', readyAtGeneration);
  });

  it('keeps the sidecar ServiceAccount and RoleBinding while an App of the namespace is left, repairs them at once, and removes them with the last', async () => {
    const first = await applyApp();
    const second = await applyApp({ in: first, name: 'second' });
    await waitForApp(first, 'Available', availableAtGeneration);
    await waitForApp(second, 'Available', availableAtGeneration);
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const absentAs404 = <T>(read: Promise<T>) =>
      read.catch((error: unknown) => {
        if (error instanceof ApiException && error.code === 404) return undefined;
        throw error;
      });
    const sidecarRbac = async (): Promise<(V1ObjectMeta | undefined)[]> => {
      const ref = { namespace: first.namespace, name: 'runlet-sidecar' };
      const [account, binding] = await Promise.all([absentAs404(core.readNamespacedServiceAccount(ref)), absentAs404(rbac.readNamespacedRoleBinding(ref))]);
      return [account?.metadata, binding?.metadata];
    };
    const ownedBy = (...apps: HelloApp[]) => async () => {
      const metadata = await sidecarRbac();
      const expected = apps.map((app) => app.name).sort().join();
      return metadata.every((meta) => meta?.ownerReferences?.map((ref) => ref.name).sort().join() === expected) && metadata;
    };
    const wait = <T>(what: string, check: () => Promise<T | false | undefined>) => waitFor(check, { what: `${first.namespace}: ${what}`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 });
    const [, binding] = await wait('the sidecar RBAC owned by both Apps', ownedBy(first, second));

    // Deleted by someone else: back at once (the resync is minutes away).
    await rbac.deleteNamespacedRoleBinding({ namespace: first.namespace, name: 'runlet-sidecar' });
    await wait('the RoleBinding applied again', async () => {
      const [, again] = await sidecarRbac();
      return again !== undefined && again.uid !== binding!.uid;
    });

    await first.delete();
    await wait('the first App’s Deployment gone', async () => (await first.deployment()) === undefined);
    await wait('the sidecar RBAC owned by the second App alone', ownedBy(second));
    const pod = await onlyReadyPod(second, 'the second App’s pod ready');
    const response = await call(second, pod, 'run', { name: 'Ada' });
    expect(response.status).toBe(200);
    const { run_id: runId } = (await response.json()) as { run_id: string };
    await wait(`run ${runId} recorded (the sidecar may still write it)`, () => recordedAsSuccess(second, pod, runId));

    await second.delete();
    await wait('the sidecar ServiceAccount and RoleBinding gone with the last App', async () => (await sidecarRbac()).every((meta) => meta === undefined));

    const third = await applyApp({ in: first, name: 'third' });
    await wait('the sidecar RBAC applied again for a new App', ownedBy(third));
    await waitForApp(third, 'Available', availableAtGeneration);
    expect(await greeting(third, await onlyReadyPod(third, 'the new App’s pod ready'))).toEqual({ greeting: 'Hello, Ada!' });
  });

  it('deletes an App: its Deployment, Service and pods go, and the pods’ processes stop', async () => {
    const app = await applyApp();
    await waitForApp(app, 'Available', availableAtGeneration);
    const pod = await onlyReadyPod(app, 'the pod ready');
    const stopped = cluster.stopCheck(pod);
    expect(await app.deployment()).toBeDefined();

    await app.delete();
    await waitFor(async () => (await app.pods()).length === 0 && (await app.deployment()) === undefined && (await app.services()).length === 0, {
      what: `${app.namespace}: the App's Deployment, Service and pods gone`,
      timeoutMs: STATE_TIMEOUT_MS,
      intervalMs: 100,
    });
    expect(await stopped(), 'every process of the pod has exited').toBe(true);
  });
}
