// Scale to zero, end to end on the fake API server with the process kubelet: the shared suite
// (scale-to-zero-suite.ts: warm path, sync, stream and async calls at zero, idle to zero), then what is tested
// here only — the cold-start limit, and a held async call surviving a holder restart.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { startHolder } from '../../operator/autoscaling/holder.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { waitFor } from '../support/wait.ts';
import { startLocalCluster, type LocalCluster } from './local-cluster.ts';
import { scaleToZeroSuite, ZERO_WAIT, ZeroApp } from './scale-to-zero-suite.ts';

const NEVER_READY = 'never';

let cluster: LocalCluster;

beforeAll(async () => {
  cluster = await startLocalCluster({
    holder: true,
    operatorConfig: { webhookAllowCidrs: ['127.0.0.0/8'] },
    // The app that never starts gives up after 2 s; the others have the default limit.
    coldStartTimeoutMs: (app: App) => (app.metadata.name === NEVER_READY ? 2000 : 60_000),
  });
}, 120_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

beforeEach((context) => {
  context.onTestFailed(() => console.log(cluster.diagnostics()));
});

scaleToZeroSuite(() => cluster);

describe('scale to zero: the holder itself', () => {
  let zero: ZeroApp;

  beforeAll(async () => {
    zero = await ZeroApp.apply(cluster, 'zero-holder');
  }, 120_000);
  afterAll(async () => {
    await zero?.close();
  });

  it('a sync call whose app starts no replica within its limit gets 503 cold-start-timeout with Retry-After', async () => {
    // An app whose code ConfigMap does not exist: its pod never starts.
    const { namespace } = zero.hello;
    const [, , manifest] = await zero.hello.manifests();
    const never = { ...manifest, metadata: { name: NEVER_READY, namespace } } as App;
    never.spec = { ...never.spec, runtime: { python: { module: 'main', code: { configMap: { name: 'no-such-code' } } } }, scaling: { ...never.spec.scaling, minReplicas: 0, maxReplicas: 1 } };
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, body: never });
    await waitFor(() => cluster.operator.apps.get(namespace, NEVER_READY), { ...ZERO_WAIT, what: 'the App in the operator cache' });

    const holder = cluster.operator.holder!;
    const answer = await fetch(`${holder.url}/v4/${namespace}/${NEVER_READY}/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.callerToken(namespace)}` },
      body: JSON.stringify({ name: 'Nobody' }),
    });
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
    expect(await answer.json()).toMatchObject({ type: 'https://runlet.dev/problems#cold-start-timeout', status: 503 });
  }, 120_000);

  // Last: it closes the operator's holder.
  it('a held async call survives a holder restart: the new holder finds its record and hands it over', async () => {
    await zero.atZero();
    const { namespace, name } = zero.hello;
    const first = cluster.operator.holder!;
    const handedOverBefore = first.stats.handedOver;
    const answer = await fetch(`${first.url}/v4/${namespace}/${name}/run?async=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.callerToken(namespace)}` },
      body: JSON.stringify({ name: 'Survivor' }),
    });
    expect(answer.status).toBe(202);
    const { run_id: runId } = (await answer.json()) as { run_id: string };
    // The holder goes away before any replica is ready: the call exists only in its durable record.
    await first.close();
    expect(first.stats.handedOver).toBe(handedOverBefore);

    const api = new KubeApi(kubeConfigCredentials(cluster.kubeConfig));
    const second = await startHolder({
      ...cluster.holderOptions!,
      api,
      apps: cluster.operator.apps,
      appsSynced: async () => {},
      logger: (await import('pino')).default({ level: 'silent' }),
      identity: 'holder-after-restart',
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      // The first holder's claim is not renewed any more: it is taken over at once.
      staleClaimMs: 0,
    });
    try {
      expect(await second.recover()).toBe(1);
      const record = await zero.runRecord(runId);
      expect(record).toMatchObject({ id: runId, async: true, status: 'success' });
      await waitFor(() => second.stats.handedOver === 1, { ...ZERO_WAIT, what: 'the hand-over counted' });
      const left = await cluster.kubeConfig.makeApiClient(CoreV1Api).listSecretForAllNamespaces({ labelSelector: 'runlet.dev/held-call-for' });
      expect(left.items).toEqual([]);
    } finally {
      await second.close();
      await api.close();
    }
  }, 180_000);
});
