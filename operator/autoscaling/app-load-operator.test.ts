// The operator against the in-memory API server follows an App's load from two replicas' RunLogs, as their
// sidecars write them: the sum in `loads`, the listener, and the metrics; a pod that stops being Ready leaves it.
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

const NAMESPACE = 'load';

let cluster: TestCluster<KubeApiServer>;
let api: KubeApi;
let operator: Operator;
let url: string;
const told: [string, AppLoad][] = [];

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  api = cluster.api;
  await createNamespace(api, NAMESPACE);
  await createApp(api, NAMESPACE, 'hello', pythonSpec());
  operator = createOperator({
    kubeConfig: cluster.server.kubeConfig(),
    config: testConfig(),
    logger: testLogger(),
    processMetrics: false,
    onAppLoad: (appKey, load) => told.push([appKey, load]),
  });
  operator.start();
  url = await operator.listen();
});

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
});

function load(overrides: Partial<RunLogLoad>): RunLogLoad {
  return { inFlight: 0, queued: 0, averageConcurrency: 0, peakConcurrency: 0, requestsPerSecond: 0, concurrency: 4, sampledAt: new Date().toISOString(), ...overrides };
}

async function metricsText(): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

describe('the operator’s App loads', () => {
  it('follow two replicas’ RunLogs: the sum, the listener and the metrics; a pod no longer Ready leaves the sum', async () => {
    for (const pod of ['hello-a', 'hello-b']) {
      await createPod(api, NAMESPACE, pod, 'hello');
      await setPodReady(api, NAMESPACE, pod, true);
    }
    await writeRunLog(api, NAMESPACE, 'hello-a', 'hello', [], undefined, load({ inFlight: 3, queued: 1, averageConcurrency: 3.5, peakConcurrency: 4, requestsPerSecond: 12 }));
    await writeRunLog(api, NAMESPACE, 'hello-b', 'hello', [], undefined, load({ inFlight: 1, averageConcurrency: 0.75, peakConcurrency: 2, requestsPerSecond: 3.5 }));

    const both = await waitFor(() => {
      const sum = operator.loads.get(NAMESPACE, 'hello');
      return sum.replicasReporting === 2 && sum.inFlight === 4 ? sum : undefined;
    }, { what: 'both replicas’ loads in the sum' });
    expect(both).toMatchObject({ queued: 1, averageConcurrency: 4.25, peakConcurrency: 6, requestsPerSecond: 15.5 });
    expect(told.at(-1)).toEqual([`${NAMESPACE}/hello`, { ...both, at: told.at(-1)![1].at }]);
    const metrics = await metricsText();
    expect(metrics).toContain(`runlet_app_load_concurrency{namespace="${NAMESPACE}",app="hello"} 4.25`);
    expect(metrics).toContain(`runlet_app_requests_per_second{namespace="${NAMESPACE}",app="hello"} 15.5`);

    // A replica's new load replaces its old one.
    await writeRunLog(api, NAMESPACE, 'hello-b', 'hello', [], undefined, load({ inFlight: 2, averageConcurrency: 2, peakConcurrency: 2, requestsPerSecond: 1 }));
    await waitFor(() => operator.loads.get(NAMESPACE, 'hello').inFlight === 5, { what: 'the new load of hello-b in the sum' });

    await setPodReady(api, NAMESPACE, 'hello-a', false);
    const one = await waitFor(() => {
      const sum = operator.loads.get(NAMESPACE, 'hello');
      return sum.replicasReporting === 1 ? sum : undefined;
    }, { what: 'hello-a to leave the sum' });
    expect(one).toMatchObject({ inFlight: 2, queued: 0, averageConcurrency: 2, requestsPerSecond: 1 });
    expect(told.at(-1)?.[1]).toMatchObject({ replicasReporting: 1, inFlight: 2 });
  });
});
