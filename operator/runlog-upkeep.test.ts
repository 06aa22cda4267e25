// The operator's care of RunLogs, against the in-memory API server with pods and RunLogs written as the kubelet
// and the sidecars write them: runs of gone pods failed as replica_lost (also those found at start, and through
// write conflicts), RunLogs deleted after retention on a clock the test moves, App.status.runs counters summed
// and rate-limited; and the management API it serves.
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../crds/app-schema.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { RUNS_ACCESS } from '../management/kube-auth.ts';
import { runRecord } from '../test/support/runlog-source-kit.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { waitFor } from '../test/support/wait.ts';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { createOperator, type Operator } from './main.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import { STATE_TIMEOUT_MS, createApp, createNamespace, paths, prepareCluster, testConfig, type TestCluster } from '../test/support/fake-cluster.ts';
import { testLogger } from '../test/support/logger.ts';
import { countsOf, createPod, podPath, readRunLog, runLogPath, setPodPhase, writeRunLog } from '../test/support/runlogs.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const COUNTERS_INTERVAL_SECONDS = 1;
const HOUR_MS = 3_600_000;
/** The orphan found at start: a RunLog whose pod went while no operator ran. */
const ORPHAN = { namespace: 'restart', pod: 'hello-5f6b-orphn' };

let cluster: TestCluster<KubeApiServer>;
let api: KubeApi;
let operator: Operator;
let url: string;
/** The operator's wall clock runs this far ahead of the real one. */
let clockOffsetMs = 0;
let orphanRuns: RunRecord[];

const run = (pod: string, status: RunRecord['status'], overrides: Partial<RunRecord> = {}) => runRecord({ appName: 'hello', replica: pod, status, ...overrides });

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  api = cluster.api;
  await createNamespace(api, ORPHAN.namespace);
  await createApp(api, ORPHAN.namespace, 'hello', pythonSpec());
  orphanRuns = [run(ORPHAN.pod, 'running', { async: true, mode: 'async' }), run(ORPHAN.pod, 'success')];
  await writeRunLog(api, ORPHAN.namespace, ORPHAN.pod, 'hello', orphanRuns);

  const config = testConfig({ runLogs: { sweepSeconds: 0.2, countersIntervalSeconds: COUNTERS_INTERVAL_SECONDS } });
  operator = createOperator({ kubeConfig: cluster.server.kubeConfig(), config, logger: testLogger(), processMetrics: false, clock: () => new Date(Date.now() + clockOffsetMs) });
  operator.start();
  url = await operator.listen();
});

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
});

/** A namespace with App `hello` (of `spec`). */
async function project(namespace: string, spec: Record<string, unknown> = {}): Promise<void> {
  await createNamespace(api, namespace);
  await createApp(api, namespace, 'hello', pythonSpec(spec));
}

function runLogWhere(namespace: string, name: string, predicate: (runs: RunRecord[]) => boolean, what: string): Promise<RunRecord[]> {
  return waitFor(
    async () => {
      const runs = (await readRunLog(api, namespace, name))?.status?.runs;
      return runs !== undefined && predicate(runs) && runs;
    },
    { timeoutMs: STATE_TIMEOUT_MS, what: `RunLog ${namespace}/${name}: ${what}` },
  );
}

/** A metric without labels, as the operator's /metrics shows it. */
async function metric(name: string): Promise<number> {
  const line = (await (await fetch(`${operator.metricsUrl}/metrics`)).text()).split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.slice(name.length + 1));
}

/** The operator counts an action once its write returned, which may be just after the test sees the write. */
function metricReaches(name: string, atLeast: number): Promise<true> {
  return waitFor(async () => (await metric(name)) >= atLeast, { timeoutMs: STATE_TIMEOUT_MS, what: `${name} ≥ ${atLeast}` });
}

const noneInFlight = (runs: RunRecord[]) => runs.every((r) => r.status !== 'pending' && r.status !== 'running');

function expectLost(record: RunRecord | undefined, pod: string, before: RunRecord): void {
  expect(record).toEqual({
    ...before,
    completedAt: expect.any(String),
    status: 'failure',
    reason: 'replica_lost',
    error: { type: 'ReplicaLost', message: `the pod ${pod} went away before the run completed` },
  });
  expect(Date.parse(record!.completedAt!)).toBeGreaterThanOrEqual(Date.parse(before.createdAt));
}

describe('runs of gone pods', () => {
  it('fails the runs a deleted or ended pod left in flight, and leaves the RunLogs of running pods alone', async () => {
    await project('lost');
    const [gone, ended, alive] = ['hello-7d9c-aaaaa', 'hello-7d9c-bbbbb', 'hello-7d9c-ccccc'];
    const goneRuns = [
      run(gone, 'pending', { async: true, mode: 'async', webhook: { endpoint: 'https://hooks.example/r', state: 'pending', attempts: 0, lastStatusCode: null, lastError: null } }),
      run(gone, 'running'),
      run(gone, 'success'),
    ];
    const endedRuns = [run(ended, 'running', { async: true, mode: 'async' })];
    const aliveRuns = [run(alive, 'running'), run(alive, 'pending', { async: true, mode: 'async' })];
    for (const [pod, runs] of [[gone, goneRuns], [ended, endedRuns], [alive, aliveRuns]] as const) {
      await createPod(api, 'lost', pod, 'hello');
      await writeRunLog(api, 'lost', pod, 'hello', [...runs], { ...countsOf([...runs]), total: 40, success: 30 + countsOf([...runs]).success });
    }

    await api.delete(kubePathOf(podPath('lost', gone)));
    await setPodPhase(api, 'lost', ended, 'Failed');

    const closed = await runLogWhere('lost', gone, noneInFlight, 'its runs closed');
    const byId = new Map(closed.map((r) => [r.id, r]));
    expectLost(byId.get(goneRuns[0]!.id), gone, { ...goneRuns[0]!, webhook: { ...goneRuns[0]!.webhook!, state: 'failed', lastError: `not delivered: the pod ${gone} went away before the run completed` } });
    expectLost(byId.get(goneRuns[1]!.id), gone, goneRuns[1]!);
    expect(byId.get(goneRuns[2]!.id)).toEqual(goneRuns[2]);
    expect((await readRunLog(api, 'lost', gone))?.status?.counts).toEqual({ total: 40, success: 31, failure: 2, inFlight: 0 });
    expectLost((await runLogWhere('lost', ended, noneInFlight, 'its runs closed'))[0], ended, endedRuns[0]!);

    expect((await readRunLog(api, 'lost', alive))?.status?.runs.map((r) => r.status).sort()).toEqual(['pending', 'running']);
    await metricReaches('runlet_operator_runs_lost_total', 3);
    // The pending webhook of the run the gone pod had in flight: nothing can deliver it now.
    expect(await metric('runlet_operator_webhooks_undelivered_total')).toBe(1);
  });

  it('fails, when it starts, the runs of RunLogs whose pod went while no operator ran', async () => {
    const closed = await runLogWhere(ORPHAN.namespace, ORPHAN.pod, noneInFlight, 'its runs closed');
    expectLost(closed.find((r) => r.id === orphanRuns[0]!.id), ORPHAN.pod, orphanRuns[0]!);
  });

  it('writes with the version it judged, and judges again when a sidecar wrote first (409 Conflict)', async () => {
    await project('conflict');
    const pod = 'hello-7d9c-ddddd';
    const first = run(pod, 'running');
    await createPod(api, 'conflict', pod, 'hello');
    await writeRunLog(api, 'conflict', pod, 'hello', [first]);
    cluster.server.failNext({ method: 'PUT', pathPattern: `/namespaces/conflict/runlogs/${pod}/status`, status: 409, times: 2 });

    await api.delete(kubePathOf(podPath('conflict', pod)));
    const closed = await runLogWhere('conflict', pod, noneInFlight, 'its run closed despite two conflicts');
    expectLost(closed[0], pod, first);
    const writes = cluster.server.requests.filter((r) => r.method === 'PUT' && r.path.endsWith(`/conflict/runlogs/${pod}/status`));
    expect(writes.filter((r) => r.injected)).toHaveLength(2);
    expect(writes.filter((r) => !r.injected && r.status === 200).length).toBeGreaterThanOrEqual(2); // the test's write, the operator's
  });
});

describe('App run counters', () => {
  function appWhere(namespace: string, predicate: (app: App) => boolean, what: string): Promise<App> {
    return waitFor(
      async () => {
        const app = await api.get<App & KubeObject>(paths.app(namespace, 'hello'));
        return predicate(app) && app;
      },
      { timeoutMs: STATE_TIMEOUT_MS, what: `App ${namespace}/hello: ${what}` },
    );
  }

  const counterWrites = () => cluster.server.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith('/counted/apps/hello/status') && r.status === 200).length;

  it('sums the replicas’ counts into App.status.runs with the newest run’s time, at most one write per App per interval', async () => {
    // A fixed size: the autoscaler's own status writes (desiredReplicas) would count as writes here.
    await project('counted', { scaling: { minReplicas: 1, maxReplicas: 1 } });
    const pods = ['hello-7d9c-eeeee', 'hello-7d9c-fffff'];
    for (const pod of pods) await createPod(api, 'counted', pod, 'hello');
    const latest = run(pods[1]!, 'running', { createdAt: '2031-05-05T05:05:05.555Z' });
    await writeRunLog(api, 'counted', pods[0]!, 'hello', [run(pods[0]!, 'success')], { total: 120, success: 100, failure: 19, inFlight: 1 });
    await writeRunLog(api, 'counted', pods[1]!, 'hello', [latest], { total: 7, success: 5, failure: 1, inFlight: 1 });
    const expected = { total: 127, success: 105, failure: 20, inFlight: 2, lastRunTime: latest.createdAt };
    await appWhere('counted', (app) => app.status?.runs?.total === 127, 'counters summed');
    expect((await api.get<App & KubeObject>(paths.app('counted', 'hello'))).status?.runs).toEqual(expected);

    // A replica writes every second, counts rising: the App's status follows at most once per interval.
    const before = counterWrites();
    const started = performance.now();
    for (let i = 1; i <= 20; i++) await writeRunLog(api, 'counted', pods[0]!, 'hello', [run(pods[0]!, 'success')], { total: 120 + i, success: 100 + i, failure: 19, inFlight: 1 });
    await appWhere('counted', (app) => app.status?.runs?.total === 147, 'the last count shown');
    const elapsedIntervals = (performance.now() - started) / (COUNTERS_INTERVAL_SECONDS * 1000);
    const writes = counterWrites() - before;
    expect(writes).toBeGreaterThanOrEqual(1);
    expect(writes).toBeLessThanOrEqual(Math.ceil(elapsedIntervals) + 1);

    // A write that changes no count changes nothing: only the following change is written.
    const settled = counterWrites();
    await writeRunLog(api, 'counted', pods[0]!, 'hello', [run(pods[0]!, 'success')], { total: 140, success: 120, failure: 19, inFlight: 1 });
    await writeRunLog(api, 'counted', pods[1]!, 'hello', [latest], { total: 8, success: 6, failure: 1, inFlight: 1 });
    await appWhere('counted', (app) => app.status?.runs?.total === 148, 'the change after the no-op');
    expect(counterWrites() - settled).toBe(1);
  });
});

describe('retention', () => {
  it('deletes the RunLogs of gone pods once their App’s retention has passed since their last write; those of running pods stay', async () => {
    await project('kept', { runs: { retention: 3600 } });
    await project('kept-long');
    const [gone, alive] = ['hello-7d9c-ggggg', 'hello-7d9c-hhhhh'];
    await createPod(api, 'kept', alive, 'hello');
    await writeRunLog(api, 'kept', gone, 'hello', [run(gone, 'success'), run(gone, 'failure')]);
    await writeRunLog(api, 'kept', alive, 'hello', [run(alive, 'success')]);
    await writeRunLog(api, 'kept-long', gone, 'hello', [run(gone, 'success')]);
    clockOffsetMs = HOUR_MS + 60_000;
    await waitFor(async () => (await readRunLog(api, 'kept', gone)) === undefined, { timeoutMs: STATE_TIMEOUT_MS, what: 'RunLog kept/gone deleted after 1 h' });
    expect(await readRunLog(api, 'kept-long', gone), 'the default retention is a day').toBeDefined();

    clockOffsetMs = 24 * HOUR_MS + 60_000;
    await waitFor(async () => (await readRunLog(api, 'kept-long', gone)) === undefined, { timeoutMs: STATE_TIMEOUT_MS, what: 'RunLog kept-long/gone deleted after a day' });
    expect(await readRunLog(api, 'kept', alive), 'the RunLog of a running pod').toBeDefined();
    expect(await api.find(kubePathOf(runLogPath('lost', 'hello-7d9c-ccccc'))), 'the RunLog of a running pod').toBeDefined();
    expect(await api.find(kubePathOf(runLogPath('lost', 'hello-7d9c-aaaaa'))), 'an earlier test’s gone pod').toBeUndefined();
    await metricReaches('runlet_operator_runlogs_deleted_total', 2);
  });
});

describe('the management API of the operator', () => {
  const READER = 'reader.eyJ0b2tlbiI6InJlYWRlciJ9.sig';
  const OUTSIDER = 'outsider.eyJ0b2tlbiI6Im91dHNpZGVyIn0.sig';

  it('serves its OpenAPI document without a token: the one in docs/, cancel operation included', async () => {
    const response = await fetch(`${url}/v2/openapi.json`);
    expect(response.status).toBe(200);
    const committed = JSON.parse(await readFile(new URL('../docs/openapi-management.json', import.meta.url), 'utf8')) as { paths: Record<string, unknown> };
    expect(committed.paths).toHaveProperty(['/v2/projects/{project_id}/apps/{app_id}/runs/{run_id}/cancel']);
    expect(await response.json()).toEqual(committed);
  });

  it('lists runs to a token the cluster allows (200), refuses one it does not (403) and a request without one (401)', async () => {
    cluster.server.tokens.set(READER, { username: 'system:serviceaccount:counted:reader' });
    cluster.server.tokens.set(OUTSIDER, { username: 'system:serviceaccount:elsewhere:ci' });
    cluster.server.allow({ user: 'system:serviceaccount:counted:reader', namespace: 'counted', ...RUNS_ACCESS });
    const runs = `${url}/v2/projects/counted/apps/hello/runs`;

    const allowed = await fetch(runs, { headers: { authorization: `Bearer ${READER}` } });
    expect(allowed.status).toBe(200);
    const page = (await allowed.json()) as { items: RunRecord[]; nextToken: string | null };
    expect(page.items.map((r) => r.replica).sort()).toEqual(['hello-7d9c-eeeee', 'hello-7d9c-fffff']);
    expect((await fetch(runs, { headers: { authorization: `Bearer ${OUTSIDER}` } })).status).toBe(403);
    expect((await fetch(runs)).status).toBe(401);
    expect((await fetch(`${url}/v2/projects/counted/apps/nope/runs`, { headers: { authorization: `Bearer ${READER}` } })).status).toBe(404);
  });
});

describe('a namespace being deleted', () => {
  it('is no error: an apply refused with 403 "being terminated" ends the reconcile quietly, without retries', async () => {
    await createNamespace(api, 'doomed');
    const outcome = async (name: string) => (await operator.metrics.reconciles.get()).values.find((v) => v.labels.outcome === name)?.value ?? 0;
    const [goneBefore, errorsBefore] = [await outcome('gone'), await outcome('error')];
    cluster.server.failNext({
      method: 'PATCH',
      pathPattern: '/namespaces/doomed/deployments/hello',
      status: 403,
      reason: 'Forbidden',
      message: 'deployments.apps "hello" is forbidden: unable to create new content in namespace doomed because it is being terminated',
    });
    await createApp(api, 'doomed', 'hello', pythonSpec());
    await waitFor(async () => (await outcome('gone')) > goneBefore, { timeoutMs: STATE_TIMEOUT_MS, what: 'the reconcile to end as gone' });
    expect(await outcome('error')).toBe(errorsBefore);
    expect((await api.get<App & KubeObject>(paths.app('doomed', 'hello'))).status?.conditions ?? []).not.toContainEqual(expect.objectContaining({ reason: 'ApplyFailed' }));
  });
});
