// Held-call bounds per namespace (issue #31), against a real activator (`runlet activator` as composed by
// main.ts) on the loopback, its App watch on the in-memory API server: one tenant filling its share of the held
// calls, or of their bodies' bytes, cannot get another tenant's first call refused; the refusal names the bound
// and is counted by namespace and bound in /metrics.
import { afterEach, describe, expect, it } from 'vitest';
import { APP_LABEL } from '../crds/api-group.ts';
import { problemTypeUri } from '../crds/problem.ts';
import type { KubeObject } from '../kube/objects.ts';
import { ensureHolderKey } from '../operator/autoscaling/holder-key.ts';
import { startKubeApiServer } from '../test/kube/index.ts';
import { paths, prepareCluster, type TestCluster } from '../test/support/fake-cluster.ts';
import { testLogger } from '../test/support/logger.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';
import { waitFor } from '../test/support/wait.ts';
import type { HoldLimits } from './hold-bounds.ts';
import { createActivator, type Activator } from './main.ts';

const TENANTS = ['team-a', 'team-b'];
const KEY_SECRET = { namespace: 'runlet-system', name: 'runlet-holder-control' };

describe('the activator’s bounds per namespace', () => {
  let cluster: TestCluster | undefined;
  let activator: Activator | undefined;
  const calls: Promise<unknown>[] = [];
  afterEach(async () => {
    await activator?.stop();
    await Promise.allSettled(calls.splice(0));
    await cluster?.close();
    activator = cluster = undefined;
  });

  /** Apps `a1`, `a2` in each tenant namespace, at zero, and an activator with these bounds; its holder's URL. */
  async function start(limits: Partial<HoldLimits>): Promise<string> {
    cluster = await prepareCluster(await startKubeApiServer({ namespaces: ['default', KEY_SECRET.namespace, 'runlet-system-held', ...TENANTS] }));
    const { api } = cluster;
    await ensureHolderKey(api, KEY_SECRET);
    for (const namespace of TENANTS) {
      for (const name of ['a1', 'a2']) {
        const app = storedApp(pythonSpec({ scaling: { minReplicas: 0, maxReplicas: 2, coldStartTimeout: 600 } }), { name, namespace });
        await api.create(paths.app(namespace), { ...app, metadata: { name, namespace } } as KubeObject);
        const labels = { [APP_LABEL]: name };
        await api.create(paths.deployment(namespace), {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name, namespace },
          spec: { replicas: 0, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
        } as KubeObject);
      }
    }
    activator = createActivator({
      kubeConfig: cluster.server.kubeConfig(),
      config: { host: '127.0.0.1', port: 0, adminHost: '127.0.0.1', adminPort: 0, identity: 'activator-0', keySecret: KEY_SECRET, heldNamespace: 'runlet-system-held', watchdogMs: 60_000, drainMs: 0, limits },
      auth: null,
      logger: testLogger(),
      processMetrics: false,
    });
    const { url } = await activator.listen();
    await waitFor(() => activator!.ready, { what: 'the activator ready' });
    return url;
  }

  /** A sync call to `namespace/app`, left waiting for a replica (kept to be settled after the test). */
  function hold(url: string, namespace: string, app: string, body = '{}'): void {
    calls.push(fetch(`${url}/v4/${namespace}/${app}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).catch(() => undefined));
  }

  const held = (namespace: string) => activator!.holder!.held(namespace, 'a1') + activator!.holder!.held(namespace, 'a2');

  async function refusals(): Promise<Record<string, number>> {
    const metric = await activator!.registry.getSingleMetric('runlet_holder_refusals_total')!.get();
    return Object.fromEntries(metric.values.map((sample) => [`${sample.labels.namespace} ${sample.labels.bound}`, sample.value]));
  }

  it('refuses a namespace’s call past its share of the calls, and holds another namespace’s first call', async () => {
    // Two Apps of team-a could hold all four calls of the activator; its share is two.
    const url = await start({ callsPerApp: 2, calls: 4 });
    hold(url, 'team-a', 'a1');
    hold(url, 'team-a', 'a2');
    await waitFor(() => held('team-a') === 2, { what: 'two calls of team-a held' });

    const refused = await fetch(`${url}/v4/team-a/a2/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    const problem = (await refused.json()) as { type: string; detail: string };
    expect(problem.type).toBe(problemTypeUri('over-capacity'));
    expect(problem.detail).toContain('namespace "team-a"');
    expect(problem.detail).toContain('its limit per namespace');

    hold(url, 'team-b', 'a1');
    await waitFor(() => held('team-b') === 1, { what: 'the first call of team-b held, not refused' });
    expect(await refusals()).toEqual({ 'team-a calls_per_namespace': 1 });
  });

  it('refuses a namespace’s body past its share of the bytes, and holds another namespace’s', async () => {
    // 2,000 bytes in all, 1,000 a namespace: team-a's second body would fit the activator's bytes, not its share.
    const url = await start({ bodyBytes: 2000 });
    const body = (bytes: number) => JSON.stringify({ text: 'x'.repeat(bytes - 11) });
    hold(url, 'team-a', 'a1', body(900));
    await waitFor(() => activator!.holder!.bodyBytes === 900, { what: 'the first body of team-a held' });

    const refused = await fetch(`${url}/v4/team-a/a2/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(900) });
    expect(refused.status).toBe(503);
    const problem = (await refused.json()) as { type: string; detail: string };
    expect(problem.type).toBe(problemTypeUri('request-buffer-full'));
    expect(problem.detail).toContain('namespace "team-a"');
    expect(problem.detail).toContain('its limit per namespace');

    hold(url, 'team-b', 'a1', body(900));
    await waitFor(() => activator!.holder!.bodyBytes === 1800, { what: 'the body of team-b held, not refused' });
    expect(await refusals()).toEqual({ 'team-a body_bytes_per_namespace': 1 });
  });
});
