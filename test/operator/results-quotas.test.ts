// A namespace at its results store quota, end to end: two Apps in two namespaces, their pods run by the test
// kubelet as real processes (`runlet sidecar --run-store results` + the Python runtime), their runs sent to the
// operator's collector and kept in a real PostgreSQL. One namespace may keep 3 runs: its async calls past them
// are answered 507 run-store-quota-exceeded, naming the quota, while the runs it had accepted finish and are
// listed; the other namespace is not affected; the operator logs the refusal and shows it in /metrics. On the
// code before, the fourth call was accepted like any other, and so was the millionth.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { problemTypeUri } from '../../crds/problem.ts';
import { RUNS_ACCESS } from '../../management/kube-auth.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { signLocalToken } from '../../run-request/auth/local-key.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { waitFor } from '../support/wait.ts';
import { HelloApp } from './hello-app.ts';
import { startLocalCluster, type LocalCluster } from './local-cluster.ts';

const STATE_TIMEOUT_MS = 60_000;
const VIEWER = { token: 'quota-viewer.eyJydW5zIjoidmlld2VyIn0.sig', user: 'system:serviceaccount:runlet-e2e:viewer' };
const suffix = Math.random().toString(36).slice(2, 7);
const FULL = `runlet-quota-full-${suffix}`;
const FREE = `runlet-quota-free-${suffix}`;

function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
}

describe('a namespace at its results store quota, through the operator and real sidecars', { timeout: 4 * STATE_TIMEOUT_MS }, () => {
  let postgres: PostgresServer;
  let results: OpenResults;
  let cluster: LocalCluster;
  let full: HelloApp;
  let free: HelloApp;

  beforeAll(async () => {
    postgres = await startPostgres();
    results = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('quotas')), logger: testLogger() });
    cluster = await startLocalCluster({
      results: { store: results.store, usage: results.usage },
      operatorConfig: { results: { namespaceQuotas: { [FULL]: { maxRuns: 3 } }, usageMetricsSeconds: 1 } },
    });
    cluster.server.tokens.set(VIEWER.token, { username: VIEWER.user });
    cluster.server.allow({ user: VIEWER.user, ...RUNS_ACCESS });
    full = new HelloApp(cluster.kubeConfig, FULL);
    free = new HelloApp(cluster.kubeConfig, FREE);
    await Promise.all([full.apply(), free.apply()]);
    await Promise.all([readyPod(full), readyPod(free)]);
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
    await results?.close();
    await postgres?.stop();
  }, 120_000);
  beforeEach((context) => {
    context.onTestFailed(() => console.log(cluster.diagnostics()));
  });

  function readyPod(app: HelloApp): Promise<V1Pod> {
    return waitFor(
      async () => {
        const pods = await app.pods();
        return pods.length === 1 && isReady(pods[0]!) && pods[0]!;
      },
      { what: `${app.namespace}: a pod Ready`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 },
    );
  }

  async function call(app: HelloApp, query = '?async=true'): Promise<Response> {
    const { runUrl } = await cluster.sidecar(await readyPod(app));
    return fetch(`${runUrl}/v4/${app.namespace}/${app.name}/run${query}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await signLocalToken({ projectId: app.namespace, key: cluster.authKey })}` },
      body: JSON.stringify({ name: 'quota' }),
    });
  }

  async function accepted(app: HelloApp): Promise<string> {
    const response = await call(app);
    const text = await response.text();
    expect(response.status, text).toBe(202);
    return (JSON.parse(text) as { run_id: string }).run_id;
  }

  async function listed(app: HelloApp): Promise<RunRecord[]> {
    const response = await fetch(`${cluster.operatorUrl}/v2/projects/${app.namespace}/apps/${app.name}/runs?pageSize=100`, { headers: { authorization: `Bearer ${VIEWER.token}` } });
    expect(response.status).toBe(200);
    return ((await response.json()) as { items: RunRecord[] }).items;
  }

  it('refuses its async calls 507 naming the quota once full, lets the runs it accepted finish, and leaves another namespace alone', async () => {
    // Three async runs fill it; each finishes and is listed: the third's final record lands past the quota.
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await accepted(full));
    await waitFor(async () => {
      const runs = await listed(full);
      return runs.length === 3 && runs.every((run) => run.status === 'success');
    }, { what: `${FULL}: its 3 runs finished and listed`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 });

    // The collector's answer to the batch that filled it told the sidecar: the next async call is refused at once.
    const refused = await waitFor(async () => {
      const response = await call(full);
      return response.status === 507 && response;
    }, { what: `${FULL}: an async call refused 507`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 });
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(refused.headers.get('retry-after')).toBe('10');
    const problem = (await refused.json()) as { type: string; status: number; detail: string };
    expect(problem).toMatchObject({ type: problemTypeUri('run-store-quota-exceeded'), status: 507 });
    expect(problem.detail).toContain(`namespace ${FULL} is at its results store quota of 3 runs (it keeps 3)`);
    expect(problem.detail).toContain('results.maxRunsPerNamespace');
    // Sync calls are still served; their runs are not recorded.
    const sync = await call(full, '');
    expect(sync.status, await sync.clone().text()).toBe(200);

    // Another namespace, under the default quotas, takes and records its runs.
    const elsewhere = await accepted(free);
    await waitFor(async () => (await listed(free)).some((run) => run.id === elsewhere && run.status === 'success'), { what: `${FREE}: its run listed`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 });

    // Nothing of the full namespace past its 3 runs was kept; the refusal is logged and counted, its usage shown.
    expect((await listed(full)).map((run) => run.id).sort()).toEqual([...ids].sort());
    await waitFor(() => cluster.diagnostics().includes(`run records refused by the results store quota: namespace ${FULL} is at its results store quota of 3 runs`), {
      what: 'the operator to log the sync run refused',
      timeoutMs: STATE_TIMEOUT_MS,
      intervalMs: 200,
    });
    const metrics = await waitFor(async () => {
      const text = await (await fetch(`${cluster.operatorMetricsUrl}/metrics`)).text();
      return text.includes(`runlet_results_namespace_runs{namespace="${FREE}"} 1`) && text;
    }, { what: 'the usage of both namespaces in /metrics', timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 });
    expect(metrics).toContain(`runlet_results_namespace_runs{namespace="${FULL}"} 3`);
    expect(metrics).toContain(`runlet_results_namespace_quota{namespace="${FULL}",quota="runs"} 3`);
    expect(metrics).toMatch(new RegExp(`runlet_results_quota_refusals_total\\{namespace="${FULL}",quota="runs"\\} [1-9]`));
    expect(metrics).toMatch(/^runlet_results_database_bytes [1-9]\d+$/m);
  });
});
