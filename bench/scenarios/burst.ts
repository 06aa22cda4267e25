// Scaling up under a burst: how soon the autoscaler decides, and how soon a new replica answers. The tests'
// local cluster (in-memory API server, process kubelet, the operator with its autoscaler at its shipped
// settings: 60 s stable window, 6 s panic window, 500 ms ticks; all in this process) runs examples/hello with
// min 1 / max 3 replicas taking 2 calls at once at a 100 % target. After its one replica has been ready, and
// idle, for a panic window, 6 callers start at once, each with one stream call (3 items 100 ms apart) in flight
// at a time: 6 calls need 3 replicas. A caller picks the next ready replica for each call, as a Service
// spreads connections; ready is the kubelet's own view (the Endpoints' lag is not counted). Timed from the
// burst: the leader's scrapes showing it, the scaler's decision (its desired-replicas gauge), its first
// scale-up write (the Deployment's spec.replicas, polled every 10 ms), and the
// first call a new replica answers (its response headers). Each sample runs on a fresh App, since panic mode
// holds the replicas for a stable window. Measured once per run, after the rounds, like the operator scenario.
import { sidecarUrls, type PodRunner } from '../../test/kubelet/index.ts';
import { HelloApp } from '../../test/operator/hello-app.ts';
import { startLocalCluster, type LocalCluster } from '../../test/operator/local-cluster.ts';
import { waitFor } from '../../test/support/wait.ts';
import { PANIC_WINDOW_MS } from '../../operator/autoscaling/settings.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { median } from '../stats.ts';
import { readyReplicas } from './kubelet-replicas.ts';

const SCENARIO = 'burst';
const SAMPLES = 3;
const MAX_REPLICAS = 3;
const REPLICA_CONCURRENCY = 2;
/** Each with one call in flight at a time: 6 calls on replicas that take 2 at once need 3 replicas. */
const CALLERS = 6;
/** One call: 3 items 100 ms apart, so a caller's call is in flight (and counted) nearly all the time. */
const CALL = { n: 3, pause: 0.1 };
/** From the burst to a new replica's first answer; past it the sample fails. */
const SAMPLE_TIMEOUT_MS = 90_000;
const WAIT = { timeoutMs: 120_000, intervalMs: 50 };
const POLL_MS = 10;

export const BURST_FIGURES: FigureSpec[] = [
  { key: 'burst.decisionSeconds', scenario: SCENARIO, label: `burst of ${CALLERS} calls on 1 replica → the autoscaler's scale-up write, shipped windows (median of ${SAMPLES})`, unit: 's', decimals: 1, target: { op: '<=', value: 2 } },
  { key: 'burst.loadSeenSeconds', scenario: SCENARIO, label: "of which the load signal's lag (burst → the operator's scrapes show more than one replica's worth)", unit: 's', decimals: 1 },
  { key: 'burst.decidedSeconds', scenario: SCENARIO, label: "burst → the scaler's decision for more than one replica (its desired-replicas gauge, before the write)", unit: 's', decimals: 1 },
  { key: 'burst.firstAnswerSeconds', scenario: SCENARIO, label: 'burst → first call answered by a new replica, process kubelet', unit: 's', decimals: 1 },
  { key: 'burst.replicaStartSeconds', scenario: SCENARIO, label: 'of which the new replica\'s start (scale-up write → its containers ready)', unit: 's', decimals: 1 },
  { key: 'burst.mostReplicas', scenario: SCENARIO, label: `most replicas asked for meanwhile (needed: ${CALLERS / REPLICA_CONCURRENCY}, max ${MAX_REPLICAS})`, unit: '', decimals: 0 },
];

interface BurstSample {
  loadSeenMs: number;
  decidedMs: number;
  decisionMs: number;
  firstAnswerMs: number;
  replicaStartMs: number;
  mostReplicas: number;
}

export async function measureBurst(): Promise<RoundFigures> {
  const cluster = await startLocalCluster();
  try {
    const samples: BurstSample[] = [];
    for (let sample = 0; sample < SAMPLES; sample++) samples.push(await burstOnce(cluster, `burst-${sample}`));
    return {
      'burst.loadSeenSeconds': median(samples.map((sample) => sample.loadSeenMs)) / 1000,
      'burst.decidedSeconds': median(samples.map((sample) => sample.decidedMs)) / 1000,
      'burst.decisionSeconds': median(samples.map((sample) => sample.decisionMs)) / 1000,
      'burst.firstAnswerSeconds': median(samples.map((sample) => sample.firstAnswerMs)) / 1000,
      'burst.replicaStartSeconds': median(samples.map((sample) => sample.replicaStartMs)) / 1000,
      'burst.mostReplicas': Math.max(...samples.map((sample) => sample.mostReplicas)),
    };
  } finally {
    await cluster.close();
  }
}

async function burstOnce(cluster: LocalCluster, namespace: string): Promise<BurstSample> {
  const hello = new HelloApp(cluster.kubeConfig, namespace, {
    minReplicas: 1,
    scaling: { maxReplicas: MAX_REPLICAS, replicaConcurrency: REPLICA_CONCURRENCY, scalingTarget: 100 },
  });
  await hello.apply();
  const [first] = await waitFor(() => nonEmpty(readyReplicas(cluster, namespace)), { ...WAIT, what: `the first replica of ${namespace}/${hello.name} ready` });
  // Not a synchronisation: the experiment's set-up. A burst meets an app that has been quiet for a while, so
  // the panic window holds idle samples, as it would in production.
  await pause(PANIC_WINDOW_MS);
  const token = await cluster.issuer.token(namespace);

  const startedAt = performance.now();
  const deadline = startedAt + SAMPLE_TIMEOUT_MS;
  let loadSeenAt: number | undefined;
  let scalerDecidedAt: number | undefined;
  let decidedAt: number | undefined;
  let newReplicaReadyAt: number | undefined;
  let newReplicaAnsweredAt: number | undefined;
  let mostReplicas = 1;
  let turn = 0;
  const over = () => newReplicaAnsweredAt !== undefined || performance.now() > deadline;
  const isNew = (pod: PodRunner) => pod.uid !== first!.uid;

  const caller = async (): Promise<void> => {
    while (!over()) {
      const replicas = readyReplicas(cluster, namespace);
      if (replicas.length === 0) {
        // None ready for a moment (a readiness probe failed under the burst): as a Service would, none to send to.
        await pause(POLL_MS);
        continue;
      }
      const pod = replicas[turn++ % replicas.length]!;
      const response = await fetch(`${sidecarUrls(pod).runUrl}/v4/${namespace}/${hello.name}/count`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${token}` },
        body: JSON.stringify(CALL),
      });
      const answeredAt = performance.now();
      const body = await response.text();
      if (response.status !== 200) throw new Error(`a burst call to ${pod.name} answered ${response.status}: ${body.slice(0, 300)}`);
      if (isNew(pod)) newReplicaAnsweredAt ??= answeredAt;
    }
  };
  const observer = async (): Promise<void> => {
    while (!over()) {
      const replicas = (await hello.deployment())?.spec?.replicas ?? 0;
      const now = performance.now();
      if (cluster.operator.loads.get(namespace, hello.name).averageConcurrency > REPLICA_CONCURRENCY) loadSeenAt ??= now;
      if ((await desiredReplicas(cluster, namespace, hello.name)) > 1) scalerDecidedAt ??= now;
      mostReplicas = Math.max(mostReplicas, replicas);
      if (replicas > 1) decidedAt ??= now;
      if (readyReplicas(cluster, namespace).some(isNew)) newReplicaReadyAt ??= now;
      await pause(POLL_MS);
    }
  };
  await Promise.all([observer(), ...Array.from({ length: CALLERS }, caller)]);
  if (loadSeenAt === undefined || scalerDecidedAt === undefined || decidedAt === undefined || newReplicaReadyAt === undefined || newReplicaAnsweredAt === undefined) {
    throw new Error(
      `burst on ${namespace}/${hello.name}: within ${SAMPLE_TIMEOUT_MS / 1000} s, ${decidedAt === undefined ? 'no scale-up was written' : 'no new replica answered a call'} (most replicas asked for: ${mostReplicas})`,
    );
  }
  await hello.delete();
  await waitFor(() => cluster.kubelet.pods({ namespace }).length === 0, { ...WAIT, what: `the replicas of ${namespace}/${hello.name} gone` });
  return { loadSeenMs: loadSeenAt - startedAt, decidedMs: scalerDecidedAt - startedAt, decisionMs: decidedAt - startedAt, firstAnswerMs: newReplicaAnsweredAt - startedAt, replicaStartMs: newReplicaReadyAt - decidedAt, mostReplicas };
}

/** What the leader's scaler last decided for the App (0 before its first decision). */
async function desiredReplicas(cluster: LocalCluster, namespace: string, app: string): Promise<number> {
  const samples = (await cluster.operator.metrics.desiredReplicas.get()).values;
  return samples.find((sample) => sample.labels.namespace === namespace && sample.labels.app === app)?.value ?? 0;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function nonEmpty<T>(items: T[]): T[] | undefined {
  return items.length > 0 ? items : undefined;
}
