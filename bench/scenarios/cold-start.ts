// Scale to zero: what the holder adds to a cold start. The tests' local cluster (in-memory API server, process
// kubelet, operator with its holder, all in this process) runs examples/hello with minReplicas 0; each sample
// scales it to zero, sends a sync call to the holder, and compares the call's answer with the moment the
// replica's containers were all ready in the kubelet (polled every 2 ms). The holding path's added latency is
// from that moment to the holder relaying the call (the holder runs in this process: its own count of the
// wait, from the call's arrival, dates the relay on the same clock): the kubelet's status write, the API
// watch, the holder's wake-up. Apart from it, what the first call on a new replica costs over a warm one
// (answer − relay − the same call warm). Measured once per run, after the rounds, like the operator scenario.
import { CoreV1Api, CustomObjectsApi, AppsV1Api } from '@kubernetes/client-node';
import { HelloApp } from '../../test/operator/hello-app.ts';
import { startLocalCluster, type LocalCluster } from '../../test/operator/local-cluster.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';

const SCENARIO = 'coldstart';
const SAMPLES = 3;
const WAIT = { timeoutMs: 120_000, intervalMs: 50 };

export const COLD_START_FIGURES: FigureSpec[] = [
  { key: 'coldstart.replicaStartSeconds', scenario: SCENARIO, label: `replica start from the wake to ready, process kubelet (median of ${SAMPLES})`, unit: 's', decimals: 1 },
  { key: 'coldstart.holderAddedMs', scenario: SCENARIO, label: 'holding path added to the replica start (containers ready → call relayed)', unit: 'ms', decimals: 0, target: { op: '<=', value: 100 } },
  { key: 'coldstart.firstCallExtraMs', scenario: SCENARIO, label: "first call on the new replica over a warm one (the replica's, not the holder's)", unit: 'ms', decimals: 0 },
];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export async function measureColdStart(): Promise<RoundFigures> {
  const cluster = await startLocalCluster({ holder: true });
  try {
    const hello = new HelloApp(cluster.kubeConfig, 'cold-start');
    const [namespace, configMap, app] = await hello.manifests();
    app.spec.scaling = { ...app.spec.scaling, minReplicas: 0, maxReplicas: 1 };
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    await core.createNamespace({ body: namespace });
    await core.createNamespacedConfigMap({ namespace: hello.namespace, body: configMap });
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace: hello.namespace, body: app });
    const holderUrl = cluster.operator.holder!.url;
    const callHolder = async (): Promise<number> => {
      const response = await fetch(`${holderUrl}/v4/${hello.namespace}/${hello.name}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.issuer.token(hello.namespace)}` },
        body: '{"name":"bench"}',
      });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`the held call answered ${response.status}`);
      return performance.now();
    };

    const starts: number[] = [];
    const added: number[] = [];
    const firstCallExtra: number[] = [];
    const holder = cluster.operator.holder!;
    for (let sample = 0; sample < SAMPLES; sample++) {
      await scaleToZero(cluster, apps, hello);
      const sentAt = performance.now();
      let readyAt: number | undefined;
      const readyWatch = waitFor(() => (readyAt = readyInKubelet(cluster, hello.namespace)), { ...WAIT, intervalMs: 2, what: 'a ready replica in the kubelet' });
      const answeredAt = await callHolder();
      await readyWatch;
      const relayedAt = sentAt + holder.stats.coldStartMs.at(-1)!;
      // The pod is warm now and the holder still knows it: the same call, relayed at once, is the warm latency.
      const warmStart = performance.now();
      const warmMs = (await callHolder()) - warmStart;
      starts.push((readyAt! - sentAt) / 1000);
      added.push(relayedAt - readyAt!);
      firstCallExtra.push(answeredAt - relayedAt - warmMs);
    }
    return { 'coldstart.replicaStartSeconds': median(starts), 'coldstart.holderAddedMs': median(added), 'coldstart.firstCallExtraMs': median(firstCallExtra) };
  } finally {
    await cluster.close();
  }
}

async function scaleToZero(cluster: LocalCluster, apps: AppsV1Api, hello: HelloApp): Promise<void> {
  await waitFor(() => hello.deployment(), { ...WAIT, what: 'the Deployment' });
  const scale = await apps.readNamespacedDeploymentScale({ namespace: hello.namespace, name: hello.name });
  await apps.replaceNamespacedDeploymentScale({ namespace: hello.namespace, name: hello.name, body: { ...scale, spec: { replicas: 0 } } });
  await waitFor(async () => (await hello.pods()).length === 0 && cluster.kubelet.pods({ namespace: hello.namespace }).length === 0, { ...WAIT, what: 'no replica left' });
}

/** performance.now() once some pod of the namespace has every container ready in the kubelet. */
function readyInKubelet(cluster: LocalCluster, namespace: string): number | undefined {
  for (const pod of cluster.kubelet.pods({ namespace })) {
    try {
      if (pod.container('sidecar').ready && pod.container('app').ready) return performance.now();
    } catch {
      // Its containers are not created yet.
    }
  }
  return undefined;
}
