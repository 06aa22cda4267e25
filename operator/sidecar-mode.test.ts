// Native or classic sidecars, as the operator decides them from the API server's /version (auto) or its
// configuration (an override): on the fake API server reporting 1.28, 1.29 and 1.30.
import type { V1PodSpec } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
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

let cluster: TestCluster<KubeApiServer> | undefined;
let operator: Operator | undefined;

afterEach(async () => {
  await operator?.stop();
  await cluster?.close();
  operator = undefined;
  cluster = undefined;
});

/** The pod template the operator renders for one App on a server of this version. */
async function podTemplateOn(version: string, layer: ConfigLayer = {}): Promise<V1PodSpec> {
  cluster = await prepareCluster(await startKubeApiServer({ version }));
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

const classic = (pod: V1PodSpec) => ({ init: pod.initContainers?.map((c) => c.name), main: pod.containers.map((c) => c.name) });

describe('sidecar mode from the server version', () => {
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
