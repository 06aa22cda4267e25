// Autoscaling end to end, whatever the cluster: the sidecars' load reaches the leader, which scales the
// Deployment through its scale subresource within [min, max]; idle brings it back to the minimum after the
// cooldown; a replica removed while it runs a call drains it. autoscaling.test.ts runs it on the in-memory API
// server with the test kubelet (which plays the Deployment controller there), control-plane.test.ts on a real
// control plane, where the real Deployment and ReplicaSet controllers act on the scale and choose which pod
// goes. The windows are shortened (AUTOSCALING_TEST_CONFIG), not the rules.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ConfigLayer } from '../../operator/config.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import type { E2eCluster } from './e2e-cluster.ts';
import { HelloApp } from './hello-app.ts';
import { availableAtGeneration, isReady, STATE_TIMEOUT_MS, SUITE_OPTIONS } from './operator-suite.ts';

/** The operator settings the suite needs: a 6 s stable window (0.6 s panic window), decisions every 250 ms. */
export const AUTOSCALING_TEST_CONFIG: ConfigLayer = { autoscaling: { stableWindowSeconds: 6, tickMilliseconds: 250 } };

const wait = <T>(what: string, check: () => Promise<T | false | undefined>) => waitFor(check, { what, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 });

const replicasOf = async (app: HelloApp) => (await app.deployment())?.spec?.replicas;
const readyPods = async (app: HelloApp) => (await app.pods()).filter(isReady);

/** Watches `spec.replicas` of the App's Deployment until stopped: the values seen, in order. */
function recordReplicas(app: HelloApp): { seen: number[]; stop(): void } {
  const seen: number[] = [];
  let stopped = false;
  void (async () => {
    while (!stopped) {
      const replicas = await replicasOf(app);
      if (replicas !== undefined && seen.at(-1) !== replicas) seen.push(replicas);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return { seen, stop: () => (stopped = true) };
}

/** Runs the suite against the cluster `cluster()` returns once its tests run (started by the caller's beforeAll). */
export function autoscalingSuite(cluster: () => E2eCluster): void {
  let namespaces = 0;

  /** Min 1, max 3, two calls at once per replica, a target of 100 %: one replica per two calls. */
  async function autoscaledApp(): Promise<HelloApp> {
    namespaces += 1;
    const app = new HelloApp(cluster().kubeConfig, `runlet-scale-${Date.now().toString(36)}-${namespaces}`, {
      scaling: { minReplicas: 1, maxReplicas: 3, replicaConcurrency: 2, scalingTarget: 100, cooldown: 3 },
    });
    await app.apply();
    await wait('the App Available', async () => availableAtGeneration(await app.read()));
    return app;
  }

  /** A stream call of `seconds` on `pod`'s sidecar, read to its end; resolves to its items' count. */
  async function longCall(app: HelloApp, pod: V1Pod, seconds: number): Promise<number> {
    const { runUrl } = await cluster().sidecar(pod);
    const n = Math.max(2, Math.round(seconds / 0.25));
    const response = await fetch(`${runUrl}/v4/${app.namespace}/${app.name}/count`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${await cluster().token(app.namespace)}` },
      body: JSON.stringify({ n, pause: 0.25 }),
    });
    expect(response.status).toBe(200);
    const items = (await new EventReader(response.body!).rest()).filter((event) => event.event !== 'end' && event.event !== 'error');
    expect(items).toHaveLength(n);
    return items.length;
  }

  describe('autoscaling', SUITE_OPTIONS, () => {
    it('a burst raises the replicas to what it needs, never above max; idle brings them back to min after the cooldown', async () => {
      const app = await autoscaledApp();
      const [pod] = await readyPods(app);
      const record = recordReplicas(app);
      // 8 calls on one replica: 2 run, 6 wait in its queue. Needed: ceil(8 ÷ 2) = 4, capped at max 3.
      const burst = Array.from({ length: 8 }, () => longCall(app, pod!, 6));
      await wait('3 replicas wanted', async () => (await replicasOf(app)) === 3);
      const scaled = await app.read();
      expect(scaled.status?.desiredReplicas).toBe(3);
      expect(scaled.status?.lastScaling).toMatchObject({ to: 3 });
      await wait('3 replicas ready', async () => (await readyPods(app)).length === 3);
      expect(await Promise.all(burst)).toEqual(Array(8).fill(24));

      await wait('back to 1 replica once idle for the cooldown', async () => (await replicasOf(app)) === 1);
      record.stop();
      expect(Math.max(...record.seen)).toBe(3);
      const idle = await app.read();
      expect(idle.status).toMatchObject({ desiredReplicas: 1, lastScaling: { from: expect.any(Number), to: 1 } });
      // Up in panic mode (reason PanicBurst, or AtMaximum when the burst asked for more than max): its Event says so.
      const messages = (await app.events()).map((event) => event.message ?? '');
      expect(messages.some((message) => / → 3 replicas: burst /.test(message)), messages.join('\n')).toBe(true);
    });

    it('a replica removed while it runs a call drains it: the call completes', async () => {
      const app = await autoscaledApp();
      const [first] = await readyPods(app);
      // Load for 2 replicas, then most of it ends while one call keeps running on each newer replica.
      const opening = Array.from({ length: 4 }, () => longCall(app, first!, 6));
      await wait('2 or more replicas ready', async () => (await readyPods(app)).length >= 2);
      const newest = (await readyPods(app)).filter((pod) => pod.metadata?.name !== first!.metadata?.name);
      let finished = 0;
      // Long enough to outlast the scale-down: the burst's panic holds the replicas for a stable window (6 s) after
      // the opening calls end, then the cooldown (3 s) — and the newer replica may be ready only as they end.
      const running = newest.map((pod) => longCall(app, pod, 24).finally(() => (finished += 1)));
      await Promise.all(opening);
      await wait('scaled down to 1 while the newer replicas still ran calls', async () => (await replicasOf(app)) === 1);
      expect(finished, 'no call on a newer replica had ended when the scale-down came').toBe(0);
      // Both Deployment controllers remove the replicas ready for the shortest time first: the newer ones, each
      // with its call running.
      const left = await wait('one replica left', async () => {
        const pods = (await app.pods()).filter((pod) => pod.metadata?.deletionTimestamp === undefined);
        return pods.length === 1 && pods[0]!;
      });
      expect(left.metadata?.name).toBe(first!.metadata?.name);
      expect(await Promise.all(running)).toEqual(newest.map(() => 96));
    });
  });
}
