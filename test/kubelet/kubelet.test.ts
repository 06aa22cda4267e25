// The kubelet harness against the fake API server, with the fixture HTTP server as both containers of a pod.
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import {
  AppsV1Api,
  AuthenticationV1Api,
  CoreV1Api,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { waitFor } from '../support/wait.ts';
import { HELPER_PORT, MAIN_PORT, PRIVATE_IMAGE, PRIVATE_PULL_SECRET, TEST_IMAGES, serverDeployment } from './fixtures/server-deployment.ts';
import { KUBELET_FINALIZER, startKubelet, type Kubelet } from './index.ts';
import { isAlive } from '../support/process-checks.ts';

let server: KubeApiServer;
let kubelet: Kubelet;
let core: CoreV1Api;
let apps: AppsV1Api;
let authn: AuthenticationV1Api;
let namespaceCount = 0;

const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** Bound of each wait on API state: pods start real processes on a loaded 2-core machine. */
const STATE_TIMEOUT_MS = 30_000;
const WAIT = { timeoutMs: STATE_TIMEOUT_MS, intervalMs: 50 };

beforeAll(async () => {
  server = await startKubeApiServer();
  core = server.kubeConfig().makeApiClient(CoreV1Api);
  apps = server.kubeConfig().makeApiClient(AppsV1Api);
  authn = server.kubeConfig().makeApiClient(AuthenticationV1Api);
  // Projected tokens are written again every second (a kubelet: at 80% of their lifetime, 10 minutes at least).
  kubelet = await startKubelet({ kubeConfig: server.kubeConfig(), images: TEST_IMAGES, timing: { tokenRefreshMs: 1000 } });
});

afterAll(async () => {
  await kubelet?.stop();
  await server?.close();
});

beforeEach((context) => {
  context.onTestFailed(() => console.log(kubelet.diagnostics()));
});

async function freshNamespace(): Promise<string> {
  namespaceCount += 1;
  const name = `kubelet-test-${namespaceCount}`;
  await core.createNamespace({ body: { metadata: { name } } });
  return name;
}

async function createConfig(namespace: string, name: string): Promise<void> {
  await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${name}-config` }, data: { 'greeting.txt': 'hello' } } });
}

async function createApp(namespace: string, deployment: V1Deployment, options: { withConfig?: boolean } = {}): Promise<void> {
  const name = deployment.metadata!.name!;
  await core.createNamespacedSecret({ namespace, body: { metadata: { name: `${name}-secret` }, stringData: { token: 's3cret' } } });
  if (options.withConfig ?? true) await createConfig(namespace, name);
  await apps.createNamespacedDeployment({ namespace, body: deployment });
}

/** The Deployment once it has observed its latest generation and all its replicas are updated and ready. */
function rolledOut(namespace: string, name: string, replicas = 1): Promise<V1Deployment> {
  return waitFor(
    async () => {
      const deployment = await apps.readNamespacedDeployment({ namespace, name });
      const status = deployment.status;
      const done =
        status?.observedGeneration === deployment.metadata?.generation &&
        status?.replicas === replicas &&
        status?.updatedReplicas === replicas &&
        status?.readyReplicas === replicas;
      return done && deployment;
    },
    { what: `deployment ${namespace}/${name} rolled out with ${replicas} ready replicas`, ...WAIT },
  );
}

async function podsOf(namespace: string, app: string): Promise<V1Pod[]> {
  return (await core.listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items;
}

function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
}

async function getJson(url: string): Promise<Record<string, unknown>> {
  const response = await fetch(url);
  expect(response.status, url).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

/** Positions of kubelet log lines, to check the order things happened in. */
function lineIndex(log: string, text: string): number {
  const index = log.split('\n').findIndex((line) => line.includes(text));
  if (index < 0) throw new Error(`the pod log has no line containing "${text}":\n${log}`);
  return index;
}

describe('the test kubelet', { timeout: 4 * STATE_TIMEOUT_MS }, () => {
  it('runs a Deployment pod as local processes: sidecar first, env, volumes and ports mapped; Pod and Deployment status', async () => {
    const namespace = await freshNamespace();
    await createApp(namespace, serverDeployment('web'));
    const deployment = await rolledOut(namespace, 'web');
    expect(deployment.status).toMatchObject({ replicas: 1, readyReplicas: 1, availableReplicas: 1, updatedReplicas: 1, observedGeneration: 1 });
    expect(deployment.status?.conditions?.find((c) => c.type === 'Available')?.status).toBe('True');

    const [pod, ...others] = await podsOf(namespace, 'web');
    expect(others).toEqual([]);
    const hash = pod!.metadata!.labels!['pod-template-hash']!;
    expect(pod!.metadata!.name).toMatch(new RegExp(`^web-${hash}-[a-z0-9]{5}$`));
    expect(pod!.metadata!.ownerReferences).toMatchObject([{ kind: 'Deployment', name: 'web', uid: deployment.metadata!.uid, controller: true }]);
    expect(pod!.metadata!.finalizers).toEqual([KUBELET_FINALIZER]);
    // Reported at an address of the test pod network, which stands for the pod's local ports (pod-network.ts).
    expect(pod!.status).toMatchObject({ phase: 'Running', hostIP: '127.0.0.1', podIPs: [{ ip: pod!.status!.podIP }] });
    expect(pod!.status!.podIP!.startsWith(kubelet.network.prefix)).toBe(true);
    expect(kubelet.network.nameOf(pod!.status!.podIP!)).toBe(`pod ${namespace}/${pod!.metadata!.name}`);
    expect(isReady(pod!)).toBe(true);
    expect(pod!.status!.initContainerStatuses).toMatchObject([{ name: 'helper', ready: true, started: true, restartCount: 0 }]);
    expect(pod!.status!.containerStatuses).toMatchObject([{ name: 'main', ready: true, started: true, restartCount: 0 }]);
    expect(pod!.status!.containerStatuses![0]!.state?.running).toBeDefined();

    const local = kubelet.pod(pod!.metadata!.name!, namespace)!;
    expect(kubelet.network.dialTarget(pod!.status!.podIP!, MAIN_PORT)).toEqual({ host: '127.0.0.1', port: local.localPort(MAIN_PORT) });
    const volumes = join(local.dir, 'volumes');
    const info = await getJson(`${local.url(MAIN_PORT)}/info`);
    expect(info.argv).toEqual([
      '--port',
      String(local.localPort(MAIN_PORT)),
      `--peer-port=${local.localPort(HELPER_PORT)}`,
      '--file',
      join(volumes, 'config', 'greeting.txt'),
      `--file=${join(volumes, 'identity', 'token')}`,
      `--file=${join(volumes, 'identity', 'namespace')}`,
    ]);
    expect(info.files).toEqual({
      [join(volumes, 'config', 'greeting.txt')]: 'hello',
      [join(volumes, 'identity', 'token')]: `test-kubelet-token.${namespace}.web-runner`,
      [join(volumes, 'identity', 'namespace')]: namespace,
    });
    const env = info.env as Record<string, string>;
    expect(env).toMatchObject({
      POD_NAME: pod!.metadata!.name,
      POD_NAMESPACE: namespace,
      HOSTNAME: pod!.metadata!.name,
      GREETING: 'hello',
      TOKEN: 's3cret',
      LOUD_GREETING: 'hello!',
      DATA_DIR: join(volumes, 'scratch', 'data'),
      HELPER_URL: `http://localhost:${local.localPort(HELPER_PORT)}/info`,
    });
    expect(env.VITEST, "the test's own environment does not leak into containers").toBeUndefined();
    // The main container reaches its sidecar through the pod port, rewritten to the sidecar's local port.
    const peer = await getJson(`${local.url(MAIN_PORT)}/peer`);
    expect(peer.argv).toEqual(['--port', String(local.localPort(HELPER_PORT))]);

    const log = await waitFor(() => local.log.read().includes('[main stdout] listening on') && local.log.read(), { what: 'main output in the pod log', ...WAIT });
    expect(lineIndex(log, 'helper: startup probe succeeded')).toBeLessThan(lineIndex(log, 'main: started'));
    expect(local.log.path.startsWith(kubelet.workDir)).toBe(true);
  });

  it('projects a token bound to the pod for a source naming an audience, as a kubelet asks it, and writes a new one as it rotates', async () => {
    const namespace = await freshNamespace();
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'web-runner' } } });
    const deployment = serverDeployment('tokens');
    deployment.spec!.template.spec!.volumes!.push({
      name: 'collector-token',
      projected: { sources: [{ serviceAccountToken: { path: 'token', audience: 'runlet-results', expirationSeconds: 600 } }] },
    });
    await createApp(namespace, deployment);
    await rolledOut(namespace, 'tokens');
    const [pod] = await podsOf(namespace, 'tokens');
    const file = join(kubelet.pod(pod!.metadata!.name!, namespace)!.dir, 'volumes/collector-token/token');
    const review = async (token: string) => (await authn.createTokenReview({ body: { spec: { token, audiences: ['runlet-results'] } } })).status!;
    const first = readFileSync(file, 'utf8');
    expect(await review(first)).toMatchObject({
      authenticated: true,
      user: { username: `system:serviceaccount:${namespace}:web-runner`, extra: { 'authentication.kubernetes.io/pod-name': [pod!.metadata!.name], 'authentication.kubernetes.io/pod-uid': [pod!.metadata!.uid] } },
    });
    const second = await waitFor(() => {
      const now = readFileSync(file, 'utf8');
      return now !== first && now;
    }, { what: 'the token written again', ...WAIT });
    expect(await review(second)).toMatchObject({ authenticated: true });
    await apps.deleteNamespacedDeployment({ namespace, name: 'tokens' });
    await waitFor(async () => (await podsOf(namespace, 'tokens')).length === 0, { what: 'the pod gone', ...WAIT });
    expect(await review(second)).toMatchObject({ authenticated: false });
  });

  it('restarts a container that exits and reports restartCount and lastState', async () => {
    const namespace = await freshNamespace();
    await createApp(namespace, serverDeployment('crashy'));
    await rolledOut(namespace, 'crashy');
    const [pod] = await podsOf(namespace, 'crashy');
    const local = kubelet.pod(pod!.metadata!.name!, namespace)!;
    const main = local.container('main');
    const firstPid = main.pid!;

    main.kill('SIGKILL');
    const restarted = await waitFor(
      async () => {
        const current = await core.readNamespacedPod({ namespace, name: pod!.metadata!.name! });
        const status = current.status?.containerStatuses?.[0];
        return status?.restartCount === 1 && status.ready && isReady(current) && status;
      },
      { what: 'the main container restarted and ready again', ...WAIT },
    );
    expect(restarted.lastState?.terminated).toMatchObject({ exitCode: 137, signal: 9, reason: 'Error' });
    expect(main.pid).not.toBe(firstPid);
    expect(isAlive(firstPid)).toBe(false);
    await rolledOut(namespace, 'crashy');
  });

  it('rolls out a template change: the new pod is ready before the old one is deleted and stopped', async () => {
    const namespace = await freshNamespace();
    await createApp(namespace, serverDeployment('roll'));
    await rolledOut(namespace, 'roll');
    const [old] = await podsOf(namespace, 'roll');
    const oldName = old!.metadata!.name!;
    const oldLocal = kubelet.pod(oldName, namespace)!;
    const oldPids = oldLocal.processes().map((p) => p.pid);
    expect(oldPids).toHaveLength(2);

    const events: { name: string; ready: boolean; deleting: boolean }[] = [];
    const watch = await new Watch(server.kubeConfig()).watch(`/api/v1/namespaces/${namespace}/pods`, {}, (_type, pod: V1Pod) =>
      events.push({ name: pod.metadata!.name!, ready: isReady(pod), deleting: pod.metadata?.deletionTimestamp != null }),
      () => {},
    );
    try {
      await apps.patchNamespacedDeployment(
        { namespace, name: 'roll', body: { spec: { template: { metadata: { annotations: { revision: '2' } } } } } },
        MERGE_PATCH,
      );
      const deployment = await rolledOut(namespace, 'roll');
      expect(deployment.status?.observedGeneration).toBe(2);
      const [current, ...rest] = await waitFor(
        async () => {
          const pods = await podsOf(namespace, 'roll');
          return pods.length === 1 && pods[0]!.metadata!.name !== oldName && pods;
        },
        { what: 'the old pod gone from the API server', ...WAIT },
      );
      expect(rest).toEqual([]);
      expect(current!.metadata!.annotations).toMatchObject({ revision: '2' });
      expect(current!.metadata!.labels!['pod-template-hash']).not.toBe(old!.metadata!.labels!['pod-template-hash']);

      const newReadyAt = events.findIndex((e) => e.name === current!.metadata!.name && e.ready);
      const oldDeletedAt = events.findIndex((e) => e.name === oldName && e.deleting);
      expect(newReadyAt).toBeGreaterThanOrEqual(0);
      expect(oldDeletedAt).toBeGreaterThan(newReadyAt);
    } finally {
      watch.abort();
    }
    for (const pid of oldPids) expect(isAlive(pid), `old pod process ${pid}`).toBe(false);
    expect(kubelet.pod(oldName, namespace)).toBeUndefined();
  });

  it('stops a deleted Deployment gracefully: preStop hook, SIGTERM to the main container, then the sidecar', async () => {
    const namespace = await freshNamespace();
    await createApp(namespace, serverDeployment('doomed'));
    await rolledOut(namespace, 'doomed');
    const [pod] = await podsOf(namespace, 'doomed');
    const local = kubelet.pod(pod!.metadata!.name!, namespace)!;
    const pids = local.processes().map((p) => p.pid);

    await apps.deleteNamespacedDeployment({ namespace, name: 'doomed' });
    await waitFor(async () => (await podsOf(namespace, 'doomed')).length === 0, { what: 'the pod deleted', ...WAIT });
    for (const pid of pids) expect(isAlive(pid), `process ${pid}`).toBe(false);

    const log = local.log.read();
    const order = [
      'main: preStop hook',
      'main: preStop hook succeeded',
      'main: SIGTERM',
      'main: exited with code 0',
      'helper: SIGTERM',
      'helper: exited with code 0',
      'stopped: every container has exited',
    ].map((text) => lineIndex(log, text));
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(log).toContain('[main stdout] drain requested');
    expect(log).toContain('[main stdout] SIGTERM received');
  });

  it('kills a container that ignores SIGTERM once terminationGracePeriodSeconds are over', async () => {
    const namespace = await freshNamespace();
    await createApp(namespace, serverDeployment('stubborn', { graceSeconds: 1, mainArgs: ['--ignore-sigterm'] }));
    await rolledOut(namespace, 'stubborn');
    const [pod] = await podsOf(namespace, 'stubborn');
    const local = kubelet.pod(pod!.metadata!.name!, namespace)!;

    await core.deleteNamespacedPod({ namespace, name: pod!.metadata!.name! });
    await waitFor(async () => !(await podsOf(namespace, 'stubborn')).some((p) => p.metadata!.name === local.name), {
      what: 'the deleted pod gone',
      ...WAIT,
    });
    const log = local.log.read();
    expect(log).toContain('[main stdout] SIGTERM received');
    expect(lineIndex(log, 'main: still running at the end of the grace period: SIGKILL')).toBeLessThan(lineIndex(log, 'main: exited with SIGKILL'));
    // The Deployment replaces the deleted pod.
    await rolledOut(namespace, 'stubborn');
  });

  it('keeps a pod waiting while its ConfigMap is missing, and starts it once it exists', async () => {
    const namespace = await freshNamespace();
    await createApp(namespace, serverDeployment('late'), { withConfig: false });
    const waiting = await waitFor(
      async () => {
        const [pod] = await podsOf(namespace, 'late');
        const state = pod?.status?.containerStatuses?.[0]?.state?.waiting;
        return state?.reason === 'ContainerCreating' && state;
      },
      { what: 'the pod waiting for its ConfigMap', ...WAIT },
    );
    expect(waiting.message).toMatch(/ConfigMap "late-config" .*not found/);

    await createConfig(namespace, 'late');
    await rolledOut(namespace, 'late');
  });

  it('reports an image it cannot run as ErrImageNeverPull', async () => {
    const namespace = await freshNamespace();
    const deployment = serverDeployment('unknown');
    deployment.spec!.template.spec!.containers[0]!.image = 'registry.test/nobody-knows:2';
    await createApp(namespace, deployment);
    const waiting = await waitFor(
      async () => {
        const [pod] = await podsOf(namespace, 'unknown');
        const state = pod?.status?.containerStatuses?.[0]?.state?.waiting;
        return state?.reason === 'ErrImageNeverPull' && state;
      },
      { what: 'the pod reporting its unknown image', ...WAIT },
    );
    expect(waiting.message).toContain('registry.test/nobody-knows:2');
  });

  it('pulls a private image only with its pull secret: ErrImagePull with the registry’s refusal, then ImagePullBackOff, until the pod names an existing secret', async () => {
    const namespace = await freshNamespace();
    const deployment = serverDeployment('private');
    deployment.spec!.template.spec!.containers[0]!.image = PRIVATE_IMAGE;
    await createApp(namespace, deployment);
    const waitingAs = (reason: string) =>
      waitFor(
        async () => {
          const [pod] = await podsOf(namespace, 'private');
          const state = pod?.status?.containerStatuses?.[0]?.state?.waiting;
          return state?.reason === reason && state;
        },
        { what: `the pod waiting with ${reason}`, ...WAIT },
      );
    const pullError = await waitingAs('ErrImagePull');
    expect(pullError.message).toMatch(new RegExp(`failed to pull and unpack image "${PRIVATE_IMAGE}".*pull access denied`));
    expect((await waitingAs('ImagePullBackOff')).message).toBe(`Back-off pulling image "${PRIVATE_IMAGE}"`);
    expect((await waitingAs('ErrImagePull')).message, 'pulled again after the back-off').toBe(pullError.message);

    // Named but missing: still refused. Then the Secret exists: pulled, and the rollout completes.
    await apps.patchNamespacedDeployment({ namespace, name: 'private', body: { spec: { template: { spec: { imagePullSecrets: [{ name: PRIVATE_PULL_SECRET }] } } } } }, MERGE_PATCH);
    await waitFor(
      async () => {
        const pods = await podsOf(namespace, 'private');
        return pods.some((pod) => pod.spec?.imagePullSecrets?.[0]?.name === PRIVATE_PULL_SECRET && pod.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ErrImagePull');
      },
      { what: 'the new pod refused while its secret is missing', ...WAIT },
    );
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: PRIVATE_PULL_SECRET }, type: 'kubernetes.io/dockerconfigjson', stringData: { '.dockerconfigjson': '{"auths":{}}' } } });
    await rolledOut(namespace, 'private');
  });

  it('reports pods the API server refuses as ReplicaFailure on the Deployment, and creates them once it accepts', async () => {
    const namespace = await freshNamespace();
    const refusal = 'pods "refused-abc" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0';
    server.failNext({ method: 'POST', pathPattern: `/api/v1/namespaces/${namespace}/pods`, status: 403, reason: 'Forbidden', message: refusal, times: 3 });
    await createApp(namespace, serverDeployment('refused'));
    const failure = await waitFor(
      async () => (await apps.readNamespacedDeployment({ namespace, name: 'refused' })).status?.conditions?.find((c) => c.type === 'ReplicaFailure'),
      { what: 'a ReplicaFailure condition on the Deployment', ...WAIT },
    );
    expect(failure).toMatchObject({ status: 'True', reason: 'FailedCreate', message: refusal });

    const deployment = await rolledOut(namespace, 'refused');
    expect(deployment.status?.conditions?.map((c) => c.type)).not.toContain('ReplicaFailure');
  });

  it('scales: every replica gets ports of its own; scaling down deletes the surplus', async () => {
    const namespace = await freshNamespace();
    await createApp(namespace, serverDeployment('many', { replicas: 2 }));
    await rolledOut(namespace, 'many', 2);
    const locals = kubelet.pods({ namespace, labels: { app: 'many' } });
    expect(locals).toHaveLength(2);
    expect(new Set(locals.map((l) => l.localPort(MAIN_PORT))).size).toBe(2);
    const names = await Promise.all(locals.map(async (l) => ((await getJson(`${l.url(MAIN_PORT)}/info`)).env as Record<string, string>).POD_NAME));
    expect(names.sort()).toEqual(locals.map((l) => l.name).sort());

    await apps.patchNamespacedDeployment({ namespace, name: 'many', body: { spec: { replicas: 1 } } }, MERGE_PATCH);
    await rolledOut(namespace, 'many', 1);
    await waitFor(async () => (await podsOf(namespace, 'many')).length === 1, { what: 'one pod left', ...WAIT });
  });
});
