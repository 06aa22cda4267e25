// Runs in cluster mode with a results store, end to end: Apps applied to the in-memory API server, their pods
// run by the test kubelet as real processes (`runlet sidecar --run-store results` + the Python runtime), their
// runs sent to the operator's collector and kept in a real PostgreSQL. The API server is off the per-run path:
// a busy sidecar writes nothing to it, the operator watches no RunLog, and list, get, cancel and App.status.runs
// all answer from PostgreSQL. Local only: it needs the fake API server's request log.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUNS_ACCESS, RUNS_CANCEL_ACCESS } from '../../management/kube-auth.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { signLocalToken } from '../../run-request/auth/local-key.ts';
import { v7 as uuidv7 } from 'uuid';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { waitFor } from '../support/wait.ts';
import { HelloApp } from './hello-app.ts';
import { SIDECAR_TOKEN, startLocalCluster, type LocalCluster } from './local-cluster.ts';

const STATE_TIMEOUT_MS = 60_000;
const SUITE_OPTIONS = { timeout: 4 * STATE_TIMEOUT_MS };
/** Allowed to list runs and cancel them, in every namespace. */
const CANCELLER = { token: 'e2e-canceller.eyJydW5zIjoiY2FuY2VsbGVyIn0.sig', user: 'system:serviceaccount:runlet-e2e:canceller' };
const CALLS = 300;

function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
}

describe('runs through the operator with a results store, on the in-memory API server with the test kubelet', SUITE_OPTIONS, () => {
  let postgres: PostgresServer;
  let results: OpenResults;
  let cluster: LocalCluster;
  let app: HelloApp;

  beforeAll(async () => {
    postgres = await startPostgres();
    results = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('e2e')), logger: testLogger() });
    cluster = await startLocalCluster({ results: { store: results.store }, operatorConfig: { runLogs: { sweepSeconds: 1, countersIntervalSeconds: 1 } } });
    cluster.server.tokens.set(CANCELLER.token, { username: CANCELLER.user });
    cluster.server.allow({ user: CANCELLER.user, ...RUNS_ACCESS });
    cluster.server.allow({ user: CANCELLER.user, ...RUNS_CANCEL_ACCESS });
    app = new HelloApp(cluster.kubeConfig, `runlet-results-${Math.random().toString(36).slice(2, 7)}`);
    await app.apply();
    await readyPod();
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
    await results?.close();
    await postgres?.stop();
  }, 120_000);
  beforeEach((context) => {
    context.onTestFailed(() => console.log(cluster.diagnostics()));
  });

  function readyPod(): Promise<V1Pod> {
    return waitFor(
      async () => {
        const pods = await app.pods();
        return pods.length === 1 && isReady(pods[0]!) && pods[0]!;
      },
      { what: `${app.namespace}: a pod Ready`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 },
    );
  }

  async function call(fn: string, body: unknown, query = ''): Promise<Response> {
    const { runUrl } = await cluster.sidecar(await readyPod());
    return fetch(`${runUrl}/v4/${app.namespace}/${app.name}/${fn}${query}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await signLocalToken({ projectId: app.namespace, key: cluster.authKey })}` },
      body: JSON.stringify(body),
    });
  }

  async function runIdOf(response: Response, status: number): Promise<string> {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    return (JSON.parse(text) as { run_id: string }).run_id;
  }

  function management(path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`${cluster.operatorUrl}/v2/projects/${app.namespace}/apps/${app.name}${path}`, { ...init, headers: { authorization: `Bearer ${CANCELLER.token}` } });
  }

  it('a busy sidecar writes nothing to the API server per run; the operator watches no RunLog; the runs are listed and counted from PostgreSQL', async () => {
    const pod = await readyPod();
    cluster.server.clearRequests();
    const made: string[] = [];
    // Eight callers at once, one call in ten async.
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = next++; i < CALLS; i = next++) {
          made.push(i % 10 === 0 ? await runIdOf(await call('run', { name: `async ${i}` }, '?async=true'), 202) : await runIdOf(await call('run', { name: `sync ${i}` }), 200));
        }
      }),
    );
    const counted = await waitFor(
      async () => {
        const runs = (await app.read()).status?.runs;
        return runs?.total === CALLS && runs.success === CALLS && runs.inFlight === 0 && runs;
      },
      { what: `App.status.runs counting the ${CALLS} runs`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 },
    );
    expect(counted.failure).toBe(0);

    const sidecar = cluster.server.requests.filter((request) => request.token === SIDECAR_TOKEN);
    const writes = sidecar.filter((request) => request.method !== 'GET');
    expect(writes.map((request) => `${request.method} ${request.path}`), 'the sidecar’s writes to the API server').toEqual([]);
    // Its reads (API keys re-checked each minute) do not follow the runs.
    expect(sidecar.length, sidecar.map((request) => `${request.method} ${request.path}`).join('\n')).toBeLessThan(CALLS / 30);
    expect(cluster.server.countRequests({ pathPattern: /\/runlogs/, watch: true }), 'a RunLog watch').toBe(0);
    expect((await cluster.server.fetch('/apis/runlet.dev/v1alpha1/runlogs').then((response) => response.json()) as { items: unknown[] }).items).toEqual([]);

    const listed: string[] = [];
    let nextToken: string | null = null;
    do {
      const page = (await (await management(`/runs?pageSize=100${nextToken === null ? '' : `&nextToken=${nextToken}`}`)).json()) as { items: RunRecord[]; nextToken: string | null };
      listed.push(...page.items.map((run) => run.id));
      nextToken = page.nextToken;
    } while (nextToken !== null);
    expect(listed.sort()).toEqual([...made].sort());
    const got = (await (await management(`/runs/${made[0]}`)).json()) as { item: RunRecord };
    expect(got.item).toMatchObject({ id: made[0], status: 'success', replica: pod.metadata!.name });
  });

  it('cancels a run on the replica its record in PostgreSQL names; a finished run is 409, an unknown one 404', async () => {
    const id = await runIdOf(await call('count', { n: 300, pause: 0.1 }, '?async=true'), 202);
    await waitFor(async () => (await results.store.getRun(app.namespace, app.name, id))?.status === 'running', { what: 'the run running in PostgreSQL', timeoutMs: STATE_TIMEOUT_MS });
    const accepted = await management(`/runs/${id}/cancel`, { method: 'POST' });
    expect(accepted.status, await accepted.clone().text()).toBe(202);
    const cancelled = await waitFor(async () => {
      const record = await results.store.getRun(app.namespace, app.name, id);
      return record?.status === 'cancelled' && record;
    }, { what: 'the run cancelled in PostgreSQL', timeoutMs: STATE_TIMEOUT_MS });
    expect(cancelled).toMatchObject({ reason: 'cancel_requested', error: { type: 'Cancelled' } });

    const done = await runIdOf(await call('run', { name: 'done' }), 200);
    await waitFor(async () => (await results.store.getRun(app.namespace, app.name, done))?.status === 'success', { what: 'the finished run in PostgreSQL', timeoutMs: STATE_TIMEOUT_MS });
    expect((await management(`/runs/${done}/cancel`, { method: 'POST' })).status).toBe(409);
    const unknown = uuidv7({ msecs: Date.now() - 10 * 60_000 });
    expect((await management(`/runs/${unknown}/cancel`, { method: 'POST' })).status).toBe(404);
  });
});
