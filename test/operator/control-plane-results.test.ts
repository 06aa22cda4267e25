// With a results store, on a real control plane (kube-apiserver 1.20 and etcd, as control-plane.test.ts; pods
// run by the test kubelet under install.yaml's RBAC): a busy `runlet sidecar --run-store results` writes nothing
// to the API server per run, counted by the API server's own metrics; the runs reach PostgreSQL and
// App.status.runs. Run alone: `npm run test -- test/operator/control-plane-results.test.ts`.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openResults, type OpenResults } from '../../results/open.ts';
import { controlPlaneSkipReason } from '../control-plane/control-plane.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { waitFor } from '../support/wait.ts';
import { startControlPlaneCluster, type ControlPlaneCluster } from './control-plane-cluster.ts';
import { HelloApp } from './hello-app.ts';
import { isReady, STATE_TIMEOUT_MS, SUITE_OPTIONS } from './operator-suite.ts';

const skipReason = controlPlaneSkipReason();
if (skipReason !== undefined) console.log(`the results store on a real control plane: skipped, ${skipReason}`);
const CALLS = 400;
const run = promisify(execFile);

/** The API server's write requests so far (its apiserver_request_total), by resource[/subresource]. */
async function writesByResource(cluster: ControlPlaneCluster): Promise<Map<string, number>> {
  // Several MB of metrics: more than cluster.kubectl's output buffer.
  const { stdout: text } = await run(cluster.controlPlane.kubectl, ['--kubeconfig', cluster.controlPlane.kubeconfigPath, 'get', '--raw', '/metrics'], { maxBuffer: 64 * 1024 * 1024, timeout: 60_000 });
  const writes = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((match) => [match[1], match[2]]));
    if (!['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY', 'CREATE', 'UPDATE'].includes(labels.verb ?? '')) continue;
    const key = `${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`;
    writes.set(key, (writes.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return writes;
}

describe.skipIf(skipReason !== undefined)('the results store on a real control plane', SUITE_OPTIONS, () => {
  let postgres: PostgresServer;
  let results: OpenResults;
  let cluster: ControlPlaneCluster;

  beforeAll(async () => {
    postgres = await startPostgres();
    results = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('control_plane')), logger: testLogger() });
    cluster = await startControlPlaneCluster({ results: { store: results.store }, operatorConfig: { runLogs: { countersIntervalSeconds: 1 } } });
  }, 600_000);
  afterAll(async () => {
    await cluster?.close();
    await results?.close();
    await postgres?.stop();
  }, 120_000);

  it('a busy sidecar writes nothing to the API server per run; its runs reach PostgreSQL and App.status.runs', async (context) => {
    context.onTestFailed(() => console.log(cluster.diagnostics()));
    const app = new HelloApp(cluster.kubeConfig, `runlet-cp-results-${Date.now().toString(36)}`);
    await app.apply();
    const pod = await waitFor(async () => (await app.pods()).find((candidate: V1Pod) => isReady(candidate)), { what: 'the pod Ready', timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 });
    const { runUrl } = await cluster.sidecar(pod);
    const token = await cluster.token(app.namespace);
    const before = await writesByResource(cluster);
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = next++; i < CALLS; i = next++) {
          const response = await fetch(`${runUrl}/v4/${app.namespace}/hello/run${i % 10 === 0 ? '?async=true' : ''}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
            body: JSON.stringify({ name: `call ${i}` }),
          });
          expect(response.status, await response.text()).toBe(i % 10 === 0 ? 202 : 200);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    await waitFor(async () => (await results.store.countRuns(app.namespace, 'hello')).success === CALLS, { what: `the ${CALLS} runs in PostgreSQL`, timeoutMs: STATE_TIMEOUT_MS });
    const after = await writesByResource(cluster);
    const delta = Object.fromEntries([...after].map(([resource, count]) => [resource, count - (before.get(resource) ?? 0)]).filter(([, count]) => (count as number) > 0));
    console.log(`${CALLS} calls in ${seconds.toFixed(1)} s (${(CALLS / seconds).toFixed(0)}/s); the API server's writes meanwhile, by resource: ${JSON.stringify(delta)}`);
    expect(delta['runlogs'] ?? 0, 'RunLogs created').toBe(0);
    expect(delta['runlogs/status'] ?? 0, 'RunLog status writes').toBe(0);
    expect(JSON.parse(await cluster.kubectl('get', 'runlogs', '--all-namespaces', '-o', 'json')).items).toEqual([]);
    const counted = await waitFor(
      async () => {
        const runs = (await app.read()).status?.runs;
        return runs?.total === CALLS && runs.inFlight === 0 && runs;
      },
      { what: `App.status.runs counting the ${CALLS} runs`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 },
    );
    expect(counted).toMatchObject({ success: CALLS, failure: 0 });
  });
});
