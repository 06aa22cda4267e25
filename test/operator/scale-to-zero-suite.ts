// Scale to zero end to end, whatever the cluster: an App with minReplicas 0 is reached through its Service (the
// test kube-proxy, following the EndpointSlices the operator writes: the app's pods, or the holder at zero). The warm
// path never passes the holder; an idle app goes to zero by itself after its cooldown; at zero a sync or stream
// call is held and answered after the cold start, an async call gets its 202 at once and runs once a replica is
// up, its webhook delivered. scale-to-zero.test.ts runs it on the in-memory API server with the test kubelet,
// control-plane.test.ts on a real control plane (the real Deployment controller acting on the scale, the real
// API server validating the EndpointSlices, v1beta1 there). Pod addresses are labels of the test pod network, never dialled.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Holder } from '../../activator/holder.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { startKubeProxy, type Endpoint, type KubeProxy } from '../kubelet/kube-proxy.ts';
import type { Kubelet } from '../kubelet/index.ts';
import type { E2eCluster } from './e2e-cluster.ts';
import { HelloApp } from './hello-app.ts';

/** Pods start real Python processes on a loaded 2-core machine. */
export const ZERO_WAIT = { timeoutMs: 90_000, intervalMs: 50 };
/**
 * Seconds without a call before an App of the suite goes to zero: long enough for a test to call a replica
 * that has just become ready (its Endpoints switched), short enough to wait for.
 */
const COOLDOWN_SECONDS = 8;
const TEST_TIMEOUT_MS = 180_000;

/** A cluster whose activator holds calls at zero (started with a holder, and `webhookAllowCidrs` taking 127.0.0.0/8). */
export interface ScaleToZeroCluster extends E2eCluster {
  readonly kubelet: Kubelet;
  /** The activator's holder, while it runs. */
  readonly holder: Holder | undefined;
  /** The pod-network address the holder's Endpoints list it at. */
  readonly holderIp: string | undefined;
  /** A token both the holder and the sidecars accept for the namespace (its default service account's, audience runlet). */
  callerToken(namespace: string): Promise<string>;
}

function holderOf(cluster: ScaleToZeroCluster): { server: Holder; ip: string } {
  if (cluster.holder === undefined || cluster.holderIp === undefined) throw new Error(`${cluster.description} runs no holder: start it with one`);
  return { server: cluster.holder, ip: cluster.holderIp };
}

/** An App of examples/hello that scales to zero, reached through its Service by a test kube-proxy. */
export class ZeroApp {
  readonly hello: HelloApp;
  readonly proxy: KubeProxy;
  readonly #cluster: ScaleToZeroCluster;

  private constructor(cluster: ScaleToZeroCluster, hello: HelloApp, proxy: KubeProxy) {
    this.#cluster = cluster;
    this.hello = hello;
    this.proxy = proxy;
  }

  /** Applied (not waited for): minReplicas 0, maxReplicas 2, a short cooldown, and `scaling`. */
  static async apply(cluster: ScaleToZeroCluster, namespace: string, options: { name?: string; scaling?: Record<string, unknown> } = {}): Promise<ZeroApp> {
    const hello = new HelloApp(cluster.kubeConfig, namespace, { name: options.name, minReplicas: 0, scaling: { maxReplicas: 2, cooldown: COOLDOWN_SECONDS, ...options.scaling } });
    await hello.apply();
    const proxy = await startKubeProxy({ kubeConfig: cluster.kubeConfig, network: cluster.kubelet.network, namespace, service: hello.name });
    return new ZeroApp(cluster, hello, proxy);
  }

  /** Where the Service's EndpointSlices send callers now (none while the API server has none). */
  async endpoints(): Promise<Endpoint[]> {
    return this.proxy.endpoints().catch(() => []);
  }

  async pointsAtPods(): Promise<boolean> {
    return (await this.endpoints()).some((endpoint) => endpoint.label.startsWith('pod/'));
  }

  async pointsAtHolder(): Promise<boolean> {
    const holder = holderOf(this.#cluster);
    const [endpoint] = await this.endpoints();
    return endpoint?.ip === holder.ip && endpoint.port === Number(new URL(holder.server.url).port);
  }

  /** The route the kube-proxy takes to the holder: its address and port. */
  holderRoute(): string {
    const holder = holderOf(this.#cluster);
    return `${holder.ip}:${new URL(holder.server.url).port}`;
  }

  /**
   * At zero, the way an app gets there: the autoscaler scales it to zero once no call came for its cooldown
   * (counted from when a replica was ready); then no pod is left and the Endpoints are on the holder.
   */
  async atZero(): Promise<void> {
    const { namespace, name } = this.hello;
    await waitFor(async () => (await this.hello.read()).status?.desiredReplicas === 0, { ...ZERO_WAIT, what: `the autoscaler taking ${namespace}/${name} to zero` });
    await waitFor(async () => (await this.hello.pods()).length === 0 && (await this.pointsAtHolder()), { ...ZERO_WAIT, what: 'no pod left and the Endpoints on the holder' });
    expect((await this.hello.deployment())?.spec?.replicas).toBe(0);
  }

  /** A call through the Service, with a token the holder and the sidecars accept. */
  async call(path: string, init: { body: unknown; headers?: Record<string, string> }): Promise<Response> {
    return fetch(`${this.proxy.url}/v4/${this.hello.namespace}/${this.hello.name}/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await this.#cluster.callerToken(this.hello.namespace)}`, ...init.headers },
      body: JSON.stringify(init.body),
    });
  }

  /** The finished run record with this id: from the results store, or the RunLogs of the namespace (its pod may be gone by then). */
  runRecord(runId: string): Promise<Record<string, unknown>> {
    const custom = this.#cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    const finished = (record: Record<string, unknown> | undefined) => record !== undefined && record.status !== 'pending' && record.status !== 'running' && record;
    const { resultsRun } = this.#cluster;
    if (resultsRun !== undefined) {
      return waitFor(async () => finished((await resultsRun(this.hello.namespace, this.hello.name, runId)) as Record<string, unknown> | undefined), { ...ZERO_WAIT, what: `the run record ${runId}` });
    }
    return waitFor(
      async () => {
        const runLogs = (await custom.listNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'runlogs', namespace: this.hello.namespace })) as {
          items: { status?: { runs?: Record<string, unknown>[] } }[];
        };
        return finished(runLogs.items.flatMap((runLog) => runLog.status?.runs ?? []).find((run) => run.id === runId));
      },
      { ...ZERO_WAIT, what: `the run record ${runId}` },
    );
  }

  async close(): Promise<void> {
    await this.proxy.close();
  }
}

function isReadyPod(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
}

/** Runs the suite against the cluster `cluster()` returns once its tests run (started by the caller's beforeAll). */
export function scaleToZeroSuite(cluster: () => ScaleToZeroCluster): void {
  describe('scale to zero', () => {
    let zero: ZeroApp;

    beforeAll(async () => {
      zero = await ZeroApp.apply(cluster(), `runlet-zero-${Date.now().toString(36)}`);
    }, 120_000);
    afterAll(async () => {
      await zero?.close();
    });

    it('the warm path goes from the Service to the pod, not through the holder', async () => {
      await waitFor(() => zero.pointsAtPods(), { ...ZERO_WAIT, what: 'the Endpoints on the first pod' });
      const holder = holderOf(cluster()).server;
      const relayed = holder.stats.relayed;
      const answer = await zero.call('run', { body: { name: 'Ada' } });
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as { result: unknown }).result).toEqual({ greeting: 'Hello, Ada!' });
      expect(zero.proxy.routes.at(-1)).toMatch(/^pod\//);
      expect(holder.stats.relayed).toBe(relayed);
    }, TEST_TIMEOUT_MS);

    it('an idle app goes to zero by itself once no call came for its cooldown; a sync call then is held, wakes it and is answered after the cold start', async () => {
      await zero.atZero();
      const idle = await zero.hello.read();
      expect(idle.status?.lastScaling).toMatchObject({ from: 1, to: 0, reason: 'IdleToZero' });

      const answer = await zero.call('run', { body: { name: 'Zero' } });
      expect(answer.status, await answer.clone().text()).toBe(200);
      expect(((await answer.json()) as { result: unknown }).result).toEqual({ greeting: 'Hello, Zero!' });
      expect(zero.proxy.routes.at(-1)).toBe(zero.holderRoute());
      const runId = answer.headers.get('x-request-id')!;
      const record = await zero.runRecord(runId);
      expect(record).toMatchObject({ id: runId, status: 'success', mode: 'sync' });
      expect(record.coldStartMs).toBeGreaterThan(0);
      // Once the replica is ready the Endpoints leave the holder: the next call is warm.
      await waitFor(() => zero.pointsAtPods(), { ...ZERO_WAIT, what: 'the Endpoints back on the pod' });
    }, TEST_TIMEOUT_MS);

    it('a burst of 50 sync calls at zero (replica_concurrency 4, at most 5 replicas) is answered 200 for every call; the wake asks for the 5 replicas they need at once', async () => {
      const burst = await ZeroApp.apply(cluster(), zero.hello.namespace, { name: 'burst', scaling: { maxReplicas: 5, replicaConcurrency: 4, coldStartTimeout: 150 } });
      const gateDir = await mkdtemp(join(tmpdir(), 'runlet-burst-gate-'));
      const gate = join(gateDir, 'open');
      try {
        await burst.atZero();
        // Its replicas cannot be ready before the gate opens (their import waits for it): every call of the burst is
        // held when the wake asks, however slowly a loaded machine sends them, as a burst faster than a cold start is.
        await burst.hello.replaceCode('main.py', gatedHello(gate));
        // The most replicas the Deployment was asked for, followed while the calls are held.
        let mostAsked = 0;
        let burstOver = false;
        const following = (async () => {
          while (!burstOver) {
            mostAsked = Math.max(mostAsked, (await burst.hello.deployment())?.spec?.replicas ?? 0);
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        })();
        const answering = Promise.all(
          Array.from({ length: 50 }, async (_, index) => {
            const answer = await burst.call('run', { body: { name: `caller ${index}` } });
            return { status: answer.status, body: await answer.text() };
          }),
        ).finally(() => (burstOver = true));
        const { server: holder } = holderOf(cluster());
        await waitFor(() => holder.held(burst.hello.namespace, burst.hello.name) === 50, { ...ZERO_WAIT, what: 'the 50 calls held' });
        await waitFor(async () => (await burst.hello.deployment())?.spec?.replicas === 5, { ...ZERO_WAIT, what: 'the wake asking for 5 replicas' });
        await writeFile(gate, '');
        const answers = await answering;
        await following;
        // Within the holder's bounds (250 calls per App by default): none refused, none timed out.
        expect(answers.filter((answer) => answer.status !== 200)).toEqual([]);
        expect(answers.map((answer) => (JSON.parse(answer.body) as { result: { greeting: string } }).result.greeting).sort()).toEqual(
          Array.from({ length: 50 }, (_, index) => `Hello, caller ${index}!`).sort(),
        );
        // ceil(50 ÷ 2.8 calls per replica) within maxReplicas: asked before any replica was ready, not one by one.
        expect(mostAsked).toBe(5);
      } finally {
        await writeFile(gate, '');
        await burst.close();
        await rm(gateDir, { recursive: true, force: true });
      }
    }, 2 * TEST_TIMEOUT_MS);

    it('a stream call at zero is held, then streams its events as they are yielded', async () => {
      await zero.atZero();
      const answer = await zero.call('count', { body: { n: 3, pause: 0.05 }, headers: { accept: 'text/event-stream' } });
      expect(answer.status, await answer.clone().text()).toBe(200);
      expect(answer.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const events = await new EventReader(answer.body!).rest();
      expect(events.map((event) => JSON.parse(event.data))).toEqual([1, 2, 3].map((item) => ({ item, of: 3 })));
      const record = await zero.runRecord(answer.headers.get('x-request-id')!);
      expect(record).toMatchObject({ mode: 'stream', status: 'success' });
      expect(record.coldStartMs).toBeGreaterThan(0);
    }, TEST_TIMEOUT_MS);

    it('an async call at zero gets its 202 at once; it runs once a replica is up, its webhook delivered with that run id', async () => {
      await zero.atZero();
      const receiver = await WebhookReceiver.start();
      try {
        const webhook = encodeURIComponent(receiver.at().toString());
        const answer = await zero.call(`run?async=true&webhookEndpoint=${webhook}`, { body: { name: 'Later' } });
        expect(answer.status).toBe(202);
        const { run_id: runId } = (await answer.json()) as { run_id: string };
        expect(answer.headers.get('x-request-id')).toBe(runId);
        // Answered by the holder, before any replica was ready.
        expect((await zero.hello.pods()).some(isReadyPod)).toBe(false);

        await receiver.received(1, ZERO_WAIT.timeoutMs);
        const delivered = JSON.parse(receiver.deliveries[0]!.body) as { run_id: string };
        expect(delivered.run_id).toBe(runId);
        const record = await zero.runRecord(runId);
        expect(record).toMatchObject({ id: runId, async: true, status: 'success' });
        expect(record.coldStartMs).toBeGreaterThan(0);
      } finally {
        await receiver.close();
      }
    }, TEST_TIMEOUT_MS);
  });
}

/** examples/hello whose import waits until `gate` exists: its replicas are not ready before the test opens it. */
function gatedHello(gate: string): string {
  return [
    'import os',
    'import time',
    '',
    `while not os.path.exists(${JSON.stringify(gate)}):`,
    '    time.sleep(0.05)',
    '',
    '',
    'def run(name: str) -> dict:',
    '    return {"greeting": f"Hello, {name}!"}',
    '',
  ].join('\n');
}
