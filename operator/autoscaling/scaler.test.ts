// The scaler's loop, stepped tick by tick on an injected clock against the in-memory API server: what it
// writes, and that a steady App costs the API server nothing.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { App } from '../../crds/app-schema.ts';
import { KubeApi } from '../../kube/client.ts';
import { startKubeApiServer, type KubeApiServer } from '../../test/kube/index.ts';
import { createApp, createNamespace, paths, prepareCluster, type TestCluster } from '../../test/support/fake-cluster.ts';
import { kubePathOf } from '../../test/support/kube-path.ts';
import { testLogger } from '../../test/support/logger.ts';
import { pythonSpec } from '../../test/support/operator-apps.ts';
import type { AppLoad } from './app-load.ts';
import { AUTOSCALER_FIELD_MANAGER, type ScaledDeployment } from './replicas-owner.ts';
import { Scaler } from './scaler.ts';

let cluster: TestCluster<KubeApiServer>;
let autoscalerApi: KubeApi;

beforeEach(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  autoscalerApi = new KubeApi(await cluster.server.credentials(), { fieldManager: AUTOSCALER_FIELD_MANAGER });
});
afterEach(async () => {
  await autoscalerApi?.close();
  await cluster?.close();
});

const idle: AppLoad = { at: 0, replicasReporting: 1, inFlight: 0, queued: 0, averageConcurrency: 0, peakConcurrency: 0, requestsPerSecond: 0 };

/** An App (min 1, max 3) and its Deployment at `replicas`, one ready; the caches are what the test says. */
async function scalerFor(replicas: number, load: () => AppLoad, options: { minReplicas?: number; scalesToZero?: boolean } = {}) {
  await createNamespace(cluster.api, 'team');
  const scaling = { minReplicas: options.minReplicas ?? 1, maxReplicas: 3, replicaConcurrency: 2, scalingTarget: 100, cooldown: 5 };
  let app = await createApp(cluster.api, 'team', 'hello', pythonSpec({ scaling }));
  const deployment: ScaledDeployment = { metadata: { name: 'hello', namespace: 'team' }, spec: { replicas }, status: { replicas, readyReplicas: 1 } };
  await cluster.api.create(paths.deployment('team'), {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'hello', namespace: 'team' },
    spec: { replicas, selector: { matchLabels: { app: 'hello' } }, template: { metadata: { labels: { app: 'hello' } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
  } as ScaledDeployment);
  let now = 1_800_000_000_000;
  const events: { type: string; reason: string; message: string }[] = [];
  const scaler = new Scaler({
    api: autoscalerApi,
    apps: { list: () => [app] },
    deployments: { get: () => deployment },
    loads: { get: () => ({ ...load(), at: now }) },
    events: { record: (_app, note) => events.push(note) },
    logger: testLogger(),
    clock: () => now,
    stableWindowMs: 6000,
    scalesToZero: options.scalesToZero,
  });
  return {
    deployment,
    /** The Events the scaler recorded on the App. */
    events,
    /** `seconds` of ticks, each once its writes are done; the App and the Deployment's size re-read as watches would deliver them. */
    async run(seconds: number): Promise<void> {
      for (let tick = 0; tick < seconds * 2; tick += 1) {
        now += 500;
        scaler.tick();
        await scaler.settled();
        app = await cluster.api.get<App>(paths.app('team', 'hello'));
        deployment.spec!.replicas = (await cluster.api.get<ScaledDeployment>(paths.deployment('team', 'hello'))).spec?.replicas;
      }
    },
  };
}

const statusWrites = () =>
  cluster.server.requests.filter((r) => r.method === 'PATCH' && r.path === `${paths.app('team', 'hello')}/status` && r.query.fieldManager === AUTOSCALER_FIELD_MANAGER).length;
const scaleWrites = () => cluster.server.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith('/deployments/hello/scale')).length;

describe('the scaler', () => {
  it('writes desiredReplicas once when it takes an App over at the right size, then nothing while the load is steady', async () => {
    const { run } = await scalerFor(1, () => idle);
    await run(10);
    expect((await cluster.api.get<App>(paths.app('team', 'hello'))).status?.desiredReplicas).toBe(1);
    expect(statusWrites()).toBe(1);
    expect(scaleWrites()).toBe(0);
  });

  it('replaces a fixed App’s Fixed scaling once the App autoscales at the same size', async () => {
    const { run } = await scalerFor(1, () => idle);
    const fixed = { time: '2025-01-01T00:00:00Z', from: 0, to: 1, reason: 'Fixed', message: 'minReplicas and maxReplicas are both 1' };
    await cluster.api.mergePatch(kubePathOf(`${paths.app('team', 'hello')}/status`), { status: { desiredReplicas: 1, lastScaling: fixed } });
    await run(10);
    const { status } = await cluster.api.get<App>(paths.app('team', 'hello'));
    expect(status).toMatchObject({ desiredReplicas: 1, lastScaling: { from: 1, to: 1 } });
    expect(status?.lastScaling?.reason).not.toBe('Fixed');
    expect(statusWrites()).toBeLessThanOrEqual(2);
    expect(scaleWrites()).toBe(0);
  });

  it('keeps an App with minReplicas 0 at one replica when no holder would answer its calls at zero, and says why once', async () => {
    const { run, events } = await scalerFor(1, () => idle, { minReplicas: 0, scalesToZero: false });
    await run(20);
    expect((await cluster.api.get<ScaledDeployment>(paths.deployment('team', 'hello'))).spec?.replicas).toBe(1);
    expect(scaleWrites()).toBe(0);
    const warnings = events.filter((event) => event.reason === 'ScaleToZeroUnavailable');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ type: 'Warning', message: expect.stringContaining('without its holder') });
  });

  it('takes an idle App with minReplicas 0 to zero after its cooldown when a holder answers there', async () => {
    const { run, events } = await scalerFor(1, () => idle, { minReplicas: 0 });
    await run(20);
    expect((await cluster.api.get<ScaledDeployment>(paths.deployment('team', 'hello'))).spec?.replicas).toBe(0);
    expect(events.map((event) => event.reason)).not.toContain('ScaleToZeroUnavailable');
  });

  it('scales a burst through the scale subresource and records the decision in the status', async () => {
    let load = idle;
    const { run } = await scalerFor(1, () => load);
    await run(2);
    load = { ...idle, inFlight: 2, queued: 4, averageConcurrency: 6, peakConcurrency: 6 };
    await run(2);
    const scaled = await cluster.api.get<ScaledDeployment>(paths.deployment('team', 'hello'));
    expect(scaled.spec?.replicas).toBe(3);
    const writes = scaleWrites();
    expect(writes).toBeGreaterThanOrEqual(1);
    expect(writes).toBeLessThanOrEqual(2);
    const status = (await cluster.api.get<App>(paths.app('team', 'hello'))).status;
    expect(status).toMatchObject({ desiredReplicas: 3, lastScaling: { to: 3, reason: expect.stringMatching(/^(PanicBurst|AtMaximum)$/) } });
    // Nothing more is written while the burst lasts: one status write per decision, besides the takeover's.
    await run(3);
    expect(scaleWrites()).toBe(writes);
    expect(statusWrites()).toBe(1 + writes);
  });
});
