// The operator against the in-memory API server follows an App's load by scraping its ready replicas' sidecars
// (here real HTTP servers on loopback standing for them, at the pods' IPs): the sum in `loads`, the listener
// and the metrics; a pod that stops being Ready leaves it; a replica answering nonsense does not count, and
// says so in the scrape metrics. The load a RunLog carries in its status is not the autoscaler's signal.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import type { KubeApi } from '../../kube/client.ts';
import { startKubeApiServer, type KubeApiServer } from '../../test/kube/index.ts';
import { createApp, createNamespace, prepareCluster, testConfig, type TestCluster } from '../../test/support/fake-cluster.ts';
import { testLogger } from '../../test/support/logger.ts';
import { pythonSpec } from '../../test/support/operator-apps.ts';
import { createPod, setPodReady, writeRunLog } from '../../test/support/runlogs.ts';
import { waitFor } from '../../test/support/wait.ts';
import { createOperator, type Operator } from '../main.ts';
import type { AppLoad } from './app-load.ts';
import { kubePathOf } from '../../test/support/kube-path.ts';

const NAMESPACE = 'load';

/** A sidecar's admin port as far as the scraper sees it: `/load` answers `body`. */
interface FakeAdmin {
  server: Server;
  body: string;
  scrapes: number;
}

let cluster: TestCluster<KubeApiServer>;
let api: KubeApi;
let operator: Operator;
const told: [string, AppLoad][] = [];
/** Pod IP → the admin server standing for that pod. */
const admins = new Map<string, FakeAdmin>();

async function startAdmin(podIp: string): Promise<FakeAdmin> {
  const admin: FakeAdmin = { server: createServer(), body: '{}', scrapes: 0 };
  admin.server.on('request', (request, response) => {
    admin.scrapes += 1;
    if (request.url !== '/load') {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' }).end(admin.body);
  });
  await new Promise<void>((resolve) => admin.server.listen(0, '127.0.0.1', resolve));
  admins.set(podIp, admin);
  return admin;
}

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  api = cluster.api;
  await createNamespace(api, NAMESPACE);
  await createApp(api, NAMESPACE, 'hello', pythonSpec());
  operator = createOperator({
    kubeConfig: cluster.server.kubeConfig(),
    config: testConfig({ autoscaling: { stableWindowSeconds: 60, tickMilliseconds: 100 } }),
    logger: testLogger(),
    processMetrics: false,
    onAppLoad: (appKey, load) => told.push([appKey, load]),
    // The pods' IPs are documentation addresses (RFC 5737), never dialled: each stands for a loopback server.
    loadAddress: (pod) => ({ host: '127.0.0.1', port: (admins.get(pod.status!.podIP!)!.server.address() as AddressInfo).port }),
  });
  operator.start();
  await operator.listen();
});

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
  for (const admin of admins.values()) admin.server.close();
});

function load(overrides: Partial<RunLogLoad>): RunLogLoad {
  return { inFlight: 0, queued: 0, averageConcurrency: 0, peakConcurrency: 0, requestsPerSecond: 0, concurrency: 4, sampledAt: new Date().toISOString(), ...overrides };
}

async function metricsText(): Promise<string> {
  return (await fetch(`${operator.metricsUrl}/metrics`)).text();
}

async function readyPodAt(name: string, ip: string): Promise<FakeAdmin> {
  const admin = await startAdmin(ip);
  await createPod(api, NAMESPACE, name, 'hello');
  await api.mergePatch(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/pods/${name}/status`), { status: { podIP: ip } });
  await setPodReady(api, NAMESPACE, name, true);
  return admin;
}

describe('the operator’s App loads', () => {
  it('are scraped from the ready replicas’ sidecars: the sum, the listener and the metrics; a pod no longer Ready leaves the sum', async () => {
    await waitFor(() => operator.isLeader, { what: 'the operator to lead' });
    const a = await readyPodAt('hello-a', '192.0.2.11');
    const b = await readyPodAt('hello-b', '192.0.2.12');
    a.body = JSON.stringify(load({ inFlight: 3, queued: 1, averageConcurrency: 3.5, peakConcurrency: 4, requestsPerSecond: 12 }));
    b.body = JSON.stringify(load({ inFlight: 1, averageConcurrency: 0.75, peakConcurrency: 2, requestsPerSecond: 3.5 }));
    // A RunLog's status.load is no longer the signal: this one, far larger, must not be counted.
    await writeRunLog(api, NAMESPACE, 'hello-a', 'hello', [], undefined, load({ inFlight: 90, averageConcurrency: 90 }));

    const both = await waitFor(() => {
      const sum = operator.loads.get(NAMESPACE, 'hello');
      return sum.replicasReporting === 2 && sum.inFlight === 4 ? sum : undefined;
    }, { what: 'both replicas’ loads in the sum' });
    expect(both).toMatchObject({ queued: 1, averageConcurrency: 4.25, peakConcurrency: 6, requestsPerSecond: 15.5 });
    expect(told.at(-1)).toEqual([`${NAMESPACE}/hello`, { ...both, at: told.at(-1)![1].at }]);
    const metrics = await metricsText();
    expect(metrics).toContain(`runlet_app_load_concurrency{namespace="${NAMESPACE}",app="hello"} 4.25`);
    expect(metrics).toContain(`runlet_app_requests_per_second{namespace="${NAMESPACE}",app="hello"} 15.5`);
    expect(metrics).toMatch(/runlet_operator_load_scrapes_total\{outcome="ok"\} [1-9]/);

    // A replica's new load replaces its old one at the next scrape.
    b.body = JSON.stringify(load({ inFlight: 2, averageConcurrency: 2, peakConcurrency: 2, requestsPerSecond: 1 }));
    await waitFor(() => operator.loads.get(NAMESPACE, 'hello').inFlight === 5, { what: 'the new load of hello-b in the sum' });

    await setPodReady(api, NAMESPACE, 'hello-a', false);
    const one = await waitFor(() => {
      const sum = operator.loads.get(NAMESPACE, 'hello');
      return sum.replicasReporting === 1 ? sum : undefined;
    }, { what: 'hello-a to leave the sum' });
    expect(one).toMatchObject({ inFlight: 2, queued: 0, averageConcurrency: 2, requestsPerSecond: 1 });
    expect(told.at(-1)?.[1]).toMatchObject({ replicasReporting: 1, inFlight: 2 });
    // No longer ready: no longer asked.
    const asked = a.scrapes;
    const bAsked = b.scrapes;
    await waitFor(() => b.scrapes >= bAsked + 3, { what: 'three more scrapes of hello-b' });
    expect(a.scrapes).toBe(asked);
  });

  it('a replica that answers nonsense, or a negative or absurd load, is not counted and the failure is counted', async () => {
    const c = await readyPodAt('hello-c', '192.0.2.13');
    const before = operator.loads.get(NAMESPACE, 'hello').replicasReporting;
    for (const body of ['not json', '[1,2]', JSON.stringify(load({ inFlight: -5 })), JSON.stringify({ ...load({}), averageConcurrency: 'a lot' }), 'x'.repeat(10_000)]) {
      c.body = body;
      const seen = c.scrapes;
      await waitFor(() => c.scrapes >= seen + 2, { what: `two scrapes of hello-c answering ${body.slice(0, 20)}` });
      expect(operator.loads.get(NAMESPACE, 'hello').replicasReporting).toBe(before);
    }
    expect(await metricsText()).toMatch(/runlet_operator_load_scrapes_total\{outcome="failed"\} [1-9]/);
    c.body = JSON.stringify(load({ inFlight: 1, averageConcurrency: 1, peakConcurrency: 1 }));
    await waitFor(() => operator.loads.get(NAMESPACE, 'hello').replicasReporting === before + 1, { what: 'hello-c counted once it answers a load' });
  });

  it('a ready replica whose admin address cannot be found is a failed scrape, counted, and the others still count', async () => {
    const failed = async () => Number(/runlet_operator_load_scrapes_total\{outcome="failed"\} (\d+)/.exec(await metricsText())?.[1] ?? 0);
    const before = { failed: await failed(), reporting: operator.loads.get(NAMESPACE, 'hello').replicasReporting };
    // No admin server stands for this IP: finding its address throws (loadAddress above).
    await createPod(api, NAMESPACE, 'hello-d', 'hello');
    await api.mergePatch(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/pods/hello-d/status`), { status: { podIP: '192.0.2.14' } });
    await setPodReady(api, NAMESPACE, 'hello-d', true);
    await waitFor(async () => (await failed()) >= before.failed + 2, { what: 'failed scrapes of hello-d counted' });
    expect(operator.loads.get(NAMESPACE, 'hello').replicasReporting).toBe(before.reporting);
  });
});
