// Native or classic sidecars, as the operator decides them from the API server's /version and the Nodes'
// kubelet versions (auto) or its configuration (an override): on the fake API server reporting 1.28, 1.29 and
// 1.30, with Nodes of older and newer kubelets, and as Nodes join later.
import type { V1PodSpec } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import {
  STATE_TIMEOUT_MS,
  createApp,
  createCodeConfigMap,
  createNamespace,
  paths,
  prepareCluster,
  testOperator,
  type TestCluster,
} from '../test/support/fake-cluster.ts';
import { waitFor } from '../test/support/wait.ts';
import type { ConfigLayer } from './config.ts';
import type { Operator } from './main.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

let cluster: TestCluster<KubeApiServer> | undefined;
let operator: Operator | undefined;

afterEach(async () => {
  await operator?.stop();
  await cluster?.close();
  operator = undefined;
  cluster = undefined;
});

/** Registers a Node with this kubelet version, as a kubelet does (its status carries nodeInfo). */
async function addNode(api: KubeApi, name: string, kubeletVersion: string): Promise<void> {
  await api.create(kubePathOf('/api/v1/nodes'), { apiVersion: 'v1', kind: 'Node', metadata: { name } });
  await api.mergePatch(kubePathOf(`/api/v1/nodes/${name}/status`), { status: { nodeInfo: { kubeletVersion } } });
}

/** The pod template the operator renders for one App on a server of this version, with Nodes of these kubelets. */
async function podTemplateOn(version: string, layer: ConfigLayer = {}, kubelets: string[] = []): Promise<V1PodSpec> {
  cluster = await prepareCluster(await startKubeApiServer({ version }));
  for (const [i, kubelet] of kubelets.entries()) await addNode(cluster.api, `node-${i}`, kubelet);
  await createNamespace(cluster.api, 'team');
  await createCodeConfigMap(cluster.api, 'team', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
  await createApp(cluster.api, 'team', 'hello', pythonSpec());
  operator = testOperator(cluster, layer);
  operator.start();
  const api = cluster.api;
  const deployment = await waitFor(() => api.find<KubeObject & { spec: { template: { spec: V1PodSpec } } }>(paths.deployment('team', 'hello')), {
    timeoutMs: STATE_TIMEOUT_MS,
    what: 'the Deployment',
  });
  return deployment.spec.template.spec;
}

type DeploymentWithPods = KubeObject & { spec: { replicas?: number; template: { spec: V1PodSpec } } };

const classic = (pod: V1PodSpec) => ({ init: pod.initContainers?.map((c) => c.name), main: pod.containers.map((c) => c.name) });

describe('sidecar mode from the server version, with no Node registered', () => {
  it.each([
    ['1.28: classic sidecar, a second container', 'v1.28.4', { init: undefined, main: ['app', 'sidecar'] }],
    ['1.29: native sidecar, an init container', 'v1.29.0', { init: ['sidecar'], main: ['app'] }],
    ['1.30 with a vendor suffix: native sidecar', 'v1.30.2-eks-1552ad0', { init: ['sidecar'], main: ['app'] }],
  ])('%s', async (_case, version, containers) => {
    const pod = await podTemplateOn(version);
    expect(classic(pod)).toEqual(containers);
    const sidecar = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === 'sidecar');
    expect(sidecar?.restartPolicy).toBe(containers.init === undefined ? undefined : 'Always');
  });

  it.each([
    ['true overrides 1.28', 'v1.28.4', true, { init: ['sidecar'], main: ['app'] }],
    ['false overrides 1.30', 'v1.30.0', false, { init: undefined, main: ['app', 'sidecar'] }],
  ])('the setting %s', async (_case, version, nativeSidecars, containers) => {
    expect(classic(await podTemplateOn(version, { nativeSidecars }))).toEqual(containers);
  });

  it.each([
    ['a 1.29 server with one 1.28 kubelet (mid-upgrade): classic', 'v1.29.0', ['v1.29.1', 'v1.28.9-eks-036c24b'], { init: undefined, main: ['app', 'sidecar'] }],
    ['a 1.30 server with 1.29 and 1.30 kubelets: native', 'v1.30.0', ['v1.29.1', 'v1.30.2'], { init: ['sidecar'], main: ['app'] }],
    ['a kubelet of no readable version counts as old: classic', 'v1.30.0', ['v1.30.2', 'runlet-test-kubelet'], { init: undefined, main: ['app', 'sidecar'] }],
    ['a 1.28 server with 1.29 kubelets: classic (the server drops restartPolicy)', 'v1.28.4', ['v1.29.0'], { init: undefined, main: ['app', 'sidecar'] }],
  ])('the oldest kubelet decides too: %s', async (_case, version, kubelets, containers) => {
    expect(classic(await podTemplateOn(version, {}, kubelets))).toEqual(containers);
  });

  it('true overrides a 1.28 kubelet', async () => {
    expect(classic(await podTemplateOn('v1.29.0', { nativeSidecars: true }, ['v1.28.0']))).toEqual({ init: ['sidecar'], main: ['app'] });
  });

  it('waits for a /version it cannot read before leading, then decides from it', async () => {
    cluster = await prepareCluster(await startKubeApiServer({ version: 'v1.28.0' }));
    cluster.server.failNext({ method: 'GET', pathPattern: /^\/version/, status: 503, times: 2 });
    await createNamespace(cluster.api, 'team');
    await createCodeConfigMap(cluster.api, 'team', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
    await createApp(cluster.api, 'team', 'hello', pythonSpec());
    operator = testOperator(cluster);
    operator.start();
    const api = cluster.api;
    const deployment = await waitFor(() => api.find<KubeObject & { spec: { template: { spec: V1PodSpec } } }>(paths.deployment('team', 'hello')), {
      timeoutMs: STATE_TIMEOUT_MS,
      what: 'the Deployment',
    });
    expect(classic(deployment.spec.template.spec)).toEqual({ init: undefined, main: ['app', 'sidecar'] });
    expect(cluster.server.countRequests({ pathPattern: /^\/version$/ })).toBe(3);
  });
});

describe('a change of mode while the operator runs', () => {
  const APPS = ['one', 'two', 'three'];
  const native = async (api: KubeApi, name: string) => (await api.get<DeploymentWithPods>(paths.deployment('team', name))).spec.template.spec.initContainers !== undefined;
  const modes = async (api: KubeApi) => Promise.all(APPS.map((name) => native(api, name)));
  /** What the Deployment controller would write once the App's pods of the current template are all available. */
  async function finishRollout(api: KubeApi, name: string): Promise<void> {
    const deployment = await api.get<DeploymentWithPods>(paths.deployment('team', name));
    const replicas = deployment.spec.replicas ?? 1;
    await api.mergePatch(paths.deployment('team', name).subresource('status'), {
      status: { observedGeneration: deployment.metadata?.generation, replicas, updatedReplicas: replicas, readyReplicas: replicas, availableReplicas: replicas },
    });
  }

  it('moves the Apps to classic sidecars one at a time when a 1.28 kubelet joins, the next once the previous one has rolled out, one whose pods are replaced anyway at once', async () => {
    cluster = await prepareCluster(await startKubeApiServer({ version: 'v1.29.0' }));
    const { api, server } = cluster;
    await addNode(api, 'node-new', 'v1.29.2');
    await createNamespace(api, 'team');
    await createCodeConfigMap(api, 'team', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
    for (const name of APPS) await createApp(api, 'team', name, pythonSpec());
    operator = testOperator(cluster);
    operator.start();
    await waitFor(async () => (await Promise.all(APPS.map((name) => api.find(paths.deployment('team', name))))).every((found) => found !== undefined), {
      timeoutMs: STATE_TIMEOUT_MS,
      what: 'the three Deployments',
    });
    expect(await modes(api)).toEqual([true, true, true]);
    for (const name of APPS) await finishRollout(api, name);

    // The old node joins: every App is reconciled (three applies of Deployments), and one of them moves.
    const applies = { method: 'PATCH', pathPattern: /\/namespaces\/team\/deployments\/(one|two|three)$/ };
    const before = server.countRequests(applies);
    await addNode(api, 'node-old', 'v1.28.9');
    await waitFor(() => server.countRequests(applies) >= before + APPS.length, { timeoutMs: STATE_TIMEOUT_MS, what: 'every App reconciled after the node joined' });
    const first = await waitFor(() => movedBesides(api, []), {
      timeoutMs: STATE_TIMEOUT_MS,
      what: 'one App moved to classic sidecars',
    });
    expect((await modes(api)).filter((mode) => !mode)).toHaveLength(1);

    // Another App's spec is edited meanwhile: its pods are replaced anyway, so it moves with that rollout,
    // without waiting for its turn; the last one still waits.
    const edited = APPS.find((name) => name !== first)!;
    await api.mergePatch(paths.app('team', edited), { spec: { scaling: { responseGracePeriod: 120 } } });
    await waitFor(async () => !(await native(api, edited)), { timeoutMs: STATE_TIMEOUT_MS, what: 'the edited App moved with its own rollout' });
    const last = APPS.find((name) => name !== first && name !== edited)!;
    expect(await native(api, last)).toBe(true);

    // The first one's rollout ends: the last moves.
    await finishRollout(api, first);
    await waitFor(async () => !(await native(api, last)), { timeoutMs: STATE_TIMEOUT_MS, what: 'the last App moved to classic sidecars' });
  });

  it('moves an App to native sidecars once the last old kubelet is upgraded', async () => {
    cluster = await prepareCluster(await startKubeApiServer({ version: 'v1.29.0' }));
    const { api } = cluster;
    await addNode(api, 'node-a', 'v1.29.2');
    await addNode(api, 'node-b', 'v1.28.9');
    await createNamespace(api, 'team');
    await createCodeConfigMap(api, 'team', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
    await createApp(api, 'team', 'one', pythonSpec());
    operator = testOperator(cluster);
    operator.start();
    await waitFor(() => api.find(paths.deployment('team', 'one')), { timeoutMs: STATE_TIMEOUT_MS, what: 'the Deployment' });
    expect(await native(api, 'one')).toBe(false);
    await api.mergePatch(kubePathOf('/api/v1/nodes/node-b/status'), { status: { nodeInfo: { kubeletVersion: 'v1.29.2' } } });
    await waitFor(() => native(api, 'one'), { timeoutMs: STATE_TIMEOUT_MS, what: 'the App moved to native sidecars' });
  });

  /** An App with classic sidecars other than these, if any. */
  async function movedBesides(api: KubeApi, moved: string[]): Promise<string | undefined> {
    for (const name of APPS) if (!moved.includes(name) && !(await native(api, name))) return name;
    return undefined;
  }
});
