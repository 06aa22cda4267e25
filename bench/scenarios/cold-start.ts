// Scale to zero: what the holder adds to a cold start. The tests' local cluster (in-memory API server, process
// kubelet, operator with its holder and autoscaler, all in this process) runs examples/hello with minReplicas 0
// and a short cooldown, so the autoscaler itself takes it to zero between samples, as it would an idle app.
// Each sample, at zero, sends a sync call to the holder and follows it on one clock, polling every 2 ms: the
// replica's containers all ready in the kubelet (the end of the replica's own start), then the holder letting
// go of the call (it relays it in the same turn), then the answer. The holding path's added latency is ready →
// relayed: the kubelet's status write, the API watch, the holder's wake-up. Apart from it, what the first call
// on a new replica costs over a warm one (answer − relay − the same call warm, through the holder to the warm
// pod), and the two together as the caller sees them. Measured once per run, after the rounds.
import { HelloApp } from '../../test/operator/hello-app.ts';
import { startLocalCluster, type LocalCluster } from '../../test/operator/local-cluster.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { median } from '../stats.ts';
import { readyReplicas } from './kubelet-replicas.ts';

const SCENARIO = 'coldstart';
const SAMPLES = 5;
/** Seconds without a call before the autoscaler takes the app to zero: short, so samples follow each other. */
const COOLDOWN_SECONDS = 2;
const WAIT = { timeoutMs: 120_000, intervalMs: 50 };

export const COLD_START_FIGURES: FigureSpec[] = [
  { key: 'coldstart.replicaStartSeconds', scenario: SCENARIO, label: `replica start from the call at zero to its containers ready, process kubelet (median of ${SAMPLES})`, unit: 's', decimals: 1 },
  { key: 'coldstart.holderAddedMs', scenario: SCENARIO, label: 'holding path added to the replica start (containers ready → call relayed)', unit: 'ms', decimals: 0, target: { op: '<=', value: 100 } },
  { key: 'coldstart.callerAddedMs', scenario: SCENARIO, label: 'a call at zero: its answer − its replica ready − a warm call (the holding path and the first call together)', unit: 'ms', decimals: 0 },
  { key: 'coldstart.firstCallExtraMs', scenario: SCENARIO, label: "first call on the new replica over a warm one (the replica's, not the holder's)", unit: 'ms', decimals: 0 },
];

export async function measureColdStart(): Promise<RoundFigures> {
  const cluster = await startLocalCluster({ holder: true });
  try {
    const hello = new HelloApp(cluster.kubeConfig, 'cold-start', { minReplicas: 0, scaling: { maxReplicas: 1, cooldown: COOLDOWN_SECONDS } });
    await hello.apply();
    const holder = cluster.holder!;
    // Signed once, before any clock starts.
    const token = await cluster.issuer.token(hello.namespace);
    const callHolder = async (): Promise<number> => {
      const response = await fetch(`${holder.url}/v4/${hello.namespace}/${hello.name}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: '{"name":"bench"}',
      });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`the held call answered ${response.status}`);
      return performance.now();
    };

    const starts: number[] = [];
    const added: number[] = [];
    const firstCallExtra: number[] = [];
    const callerAdded: number[] = [];
    for (let sample = 0; sample < SAMPLES; sample++) {
      await atZero(cluster, hello);
      const sentAt = performance.now();
      const [answeredAt, { readyAt, relayedAt }] = await Promise.all([callHolder(), followHeldCall(cluster, hello)]);
      // The pod is warm now (its cooldown has not passed) and the holder knows it: the same call, relayed at
      // once, is the warm latency through the holder.
      const warmStart = performance.now();
      const warmMs = (await callHolder()) - warmStart;
      starts.push((readyAt - sentAt) / 1000);
      added.push(relayedAt - readyAt);
      firstCallExtra.push(answeredAt - relayedAt - warmMs);
      callerAdded.push(answeredAt - readyAt - warmMs);
    }
    return {
      'coldstart.replicaStartSeconds': median(starts),
      'coldstart.holderAddedMs': median(added),
      'coldstart.firstCallExtraMs': median(firstCallExtra),
      'coldstart.callerAddedMs': median(callerAdded),
    };
  } finally {
    await cluster.close();
  }
}

/**
 * Follows a call held at zero, polling every 2 ms: when the replica's containers are all ready in the kubelet,
 * and when the holder stops holding the call — it has learnt of a ready pod, and relays the call at once (in
 * the same turn of the event loop: holder.ts).
 */
async function followHeldCall(cluster: LocalCluster, hello: HelloApp): Promise<{ readyAt: number; relayedAt: number }> {
  const holder = cluster.holder!;
  const poll = { ...WAIT, intervalMs: 2 };
  await waitFor(() => holder.held(hello.namespace, hello.name) > 0, { ...poll, what: 'the holder to hold the call' });
  let readyAt: number | undefined;
  const relayedAt = await waitFor(
    () => {
      const now = performance.now();
      if (readyAt === undefined && readyReplicas(cluster, hello.namespace).length > 0) readyAt = now;
      return holder.held(hello.namespace, hello.name) === 0 && now;
    },
    { ...poll, what: 'the holder to relay the call' },
  );
  if (readyAt === undefined) throw new Error('the holder relayed the held call before any replica was ready in the kubelet');
  return { readyAt, relayedAt };
}

/** Waits until the autoscaler has taken the app to zero (after its cooldown) and no replica is left. */
async function atZero(cluster: LocalCluster, hello: HelloApp): Promise<void> {
  await waitFor(
    async () => (await hello.deployment())?.spec?.replicas === 0 && (await hello.pods()).length === 0 && cluster.kubelet.pods({ namespace: hello.namespace }).length === 0,
    { ...WAIT, what: `the autoscaler to take ${hello.namespace}/${hello.name} to zero (cooldown ${COOLDOWN_SECONDS} s) and its last replica to stop` },
  );
}

