// Runs in cluster mode, end to end: Apps applied to the in-memory API server, their pods run by the test
// kubelet as real processes (sidecar + Python runtime), their runs recorded in RunLogs by the sidecars and
// listed through the operator's management API. Tokens on the run interface and on the management API; a pod
// lost in the middle of an async run; the API server unreachable for a while. Local only: it needs the fake
// API server's and the kubelet's controls.
import { randomBytes } from 'node:crypto';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RUNS_ACCESS, RUNS_CANCEL_ACCESS } from '../../management/kube-auth.ts';
import { signLocalToken, type LocalTokenRequest } from '../../run-request/auth/local-key.ts';
import { problemTypeUri } from '../../crds/problem.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { newRunId } from '../../run-request/run-id.ts';
import { verifyWebhookSignature } from '../support/signature.ts';
import { EventReader } from '../support/sse.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { waitFor } from '../support/wait.ts';
import { MERGE_PATCH, HelloApp } from './hello-app.ts';
import { startLocalCluster, type LocalCluster } from './local-cluster.ts';

/** Bound of every wait on cluster state: pods start real processes on a loaded 2-core machine. */
const STATE_TIMEOUT_MS = 60_000;
const SUITE_OPTIONS = { timeout: 4 * STATE_TIMEOUT_MS };
/** A management API caller the cluster authenticates, and allows to list runs in every namespace. */
const READER = { token: 'e2e-reader.eyJydW5zIjoicmVhZGVyIn0.sig', user: 'system:serviceaccount:runlet-e2e:reader' };
/** Allowed to list runs and to cancel them (runlet-runs-operator's verb), in every namespace. */
const CANCELLER = { token: 'e2e-canceller.eyJydW5zIjoiY2FuY2VsbGVyIn0.sig', user: 'system:serviceaccount:runlet-e2e:canceller' };
/** Authenticated, allowed nothing. */
const OUTSIDER = { token: 'e2e-outsider.eyJydW5zIjoib3V0c2lkZXIifQ.sig', user: 'system:serviceaccount:runlet-e2e:outsider' };

interface RunPage {
  items: RunRecord[];
  nextToken: string | null;
}

function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
}

describe('runs through the operator, on the in-memory API server with the test kubelet', SUITE_OPTIONS, () => {
  let cluster: LocalCluster;
  const runId = Math.random().toString(36).slice(2, 7);
  let pair: HelloApp;
  let lost: HelloApp;
  let solo: HelloApp;
  let stop: HelloApp;

  beforeAll(async () => {
    // Webhook receivers of the cancel test listen on the loopback.
    cluster = await startLocalCluster({ operatorConfig: { runLogs: { sweepSeconds: 1, countersIntervalSeconds: 1 }, webhookAllowCidrs: ['127.0.0.0/8'] } });
    cluster.server.tokens.set(READER.token, { username: READER.user });
    cluster.server.tokens.set(OUTSIDER.token, { username: OUTSIDER.user });
    cluster.server.allow({ user: READER.user, ...RUNS_ACCESS });
    cluster.server.tokens.set(CANCELLER.token, { username: CANCELLER.user });
    cluster.server.allow({ user: CANCELLER.user, ...RUNS_ACCESS });
    cluster.server.allow({ user: CANCELLER.user, ...RUNS_CANCEL_ACCESS });
    pair = new HelloApp(cluster.kubeConfig, `runlet-runs-${runId}-pair`, { minReplicas: 2 });
    lost = new HelloApp(cluster.kubeConfig, `runlet-runs-${runId}-lost`);
    solo = new HelloApp(cluster.kubeConfig, `runlet-runs-${runId}-solo`);
    stop = new HelloApp(cluster.kubeConfig, `runlet-runs-${runId}-stop`, { minReplicas: 2 });
    // Started together: their pods come up side by side; the cancel tests' two after them, which a loaded
    // 2-core machine starts within the bound where seven at once may not.
    await Promise.all([pair, lost, solo].map((app) => app.apply()));
    await Promise.all([pair, lost, solo].map((app) => readyPods(app)));
    await stop.apply();
    await readyPods(stop);
  }, 240_000);
  afterAll(async () => {
    await cluster?.close();
  }, 120_000);
  beforeEach((context) => {
    context.onTestFailed(() => console.log(cluster.diagnostics()));
  });

  /** The App's pods, once exactly `minReplicas` of them are Ready. */
  function readyPods(app: HelloApp): Promise<V1Pod[]> {
    return waitFor(
      async () => {
        const pods = await app.pods();
        return pods.length === app.minReplicas && pods.every(isReady) && pods;
      },
      { what: `${app.namespace}: ${app.minReplicas} pod(s) Ready`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 },
    );
  }

  function token(app: HelloApp, request: Partial<LocalTokenRequest> = {}): Promise<string> {
    return signLocalToken({ projectId: app.namespace, key: cluster.authKey, ...request });
  }

  async function call(app: HelloApp, pod: V1Pod, fn: string, body: unknown, options: { query?: string; authorization?: string | null; headers?: Record<string, string> } = {}): Promise<Response> {
    const { runUrl } = await cluster.sidecar(pod);
    const authorization = options.authorization === undefined ? `Bearer ${await token(app)}` : options.authorization;
    return fetch(`${runUrl}/v4/${app.namespace}/${app.name}/${fn}${options.query ?? ''}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(authorization === null ? {} : { authorization }), ...options.headers },
      body: JSON.stringify(body),
    });
  }

  async function runIdOf(response: Response, status: number): Promise<string> {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    return (JSON.parse(text) as { run_id: string }).run_id;
  }

  /** A GET of the operator's management API as `caller` (null: no Authorization header). */
  function management(path: string, caller: { token: string } | null = READER): Promise<Response> {
    return fetch(`${cluster.operatorUrl}/v2${path}`, { headers: caller === null ? {} : { authorization: `Bearer ${caller.token}` } });
  }

  /** A cancel through the operator's management API, as `caller`. */
  function cancelRun(app: HelloApp, id: string, caller: { token: string } = CANCELLER): Promise<Response> {
    return fetch(`${cluster.operatorUrl}/v2/projects/${app.namespace}/apps/${app.name}/runs/${id}/cancel`, {
      method: 'POST',
      headers: { authorization: `Bearer ${caller.token}` },
    });
  }

  async function expectProblem(response: Response, status: number, code: string): Promise<void> {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    expect((JSON.parse(text) as { type: string }).type).toBe(problemTypeUri(code));
  }

  /** Every page of the app's runs with `query`, following nextToken. */
  async function listAll(app: HelloApp, query: string): Promise<{ items: RunRecord[]; pages: number }> {
    const items: RunRecord[] = [];
    let pages = 0;
    let nextToken: string | null = null;
    do {
      const response = await management(`/projects/${app.namespace}/apps/${app.name}/runs?${query}${nextToken === null ? '' : `&nextToken=${nextToken}`}`);
      expect(response.status).toBe(200);
      const page = (await response.json()) as RunPage;
      items.push(...page.items);
      pages += 1;
      nextToken = page.nextToken;
    } while (nextToken !== null);
    return { items, pages };
  }

  /** The app's runs once `predicate` holds for the whole list (pageSize 500). */
  function listedRuns(app: HelloApp, what: string, predicate: (runs: RunRecord[]) => boolean, query = ''): Promise<RunRecord[]> {
    return waitFor(
      async () => {
        const { items } = await listAll(app, `pageSize=500${query}`);
        return predicate(items) && items;
      },
      { what: `${app.namespace}: ${what}`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 },
    );
  }

  it('accepts on the run interface exactly the tokens of the app’s project, unexpired, signed with its key, for its audience', async () => {
    const [pod] = await readyPods(solo);
    const statusWith = async (authorization: string | null) => (await call(solo, pod!, 'run', { name: 'Ada' }, { authorization })).status;
    const other = `${solo.namespace}-other`;

    expect(await statusWith(`Bearer ${await token(solo)}`), 'valid').toBe(200);
    expect(await statusWith(`Bearer ${await token(solo, { expiresIn: '-5m' })}`), 'expired').toBe(401);
    expect(await statusWith(`Bearer ${await token(solo, { key: randomBytes(32) })}`), 'signed with another key').toBe(401);
    expect(await statusWith(`Bearer ${await token(solo, { audience: 'elsewhere' })}`), 'for another audience').toBe(401);
    expect(await statusWith(null), 'no token').toBe(401);
    // A shared key is one project's: this sidecar cannot verify another project's token at all.
    expect(await statusWith(`Bearer ${await token(solo, { projectId: other })}`), 'shared-key token of another project').toBe(401);
    // The cluster's issuer signs for every project: a verified token of another project is forbidden.
    expect(await statusWith(`Bearer ${await cluster.issuer.token(solo.namespace)}`), 'service-account token of the project').toBe(200);
    expect(await statusWith(`Bearer ${await cluster.issuer.token(other)}`), 'service-account token of another project').toBe(403);
    expect(await statusWith(`Bearer ${await cluster.issuer.token(solo.namespace, { audience: 'elsewhere' })}`), 'service-account token for another audience').toBe(401);
  });

  it('lists the runs of both replicas together, newest first, paged without gaps or duplicates; counts them in the App status', async () => {
    const pods = await readyPods(pair);
    const made: string[] = [];
    for (let i = 0; i < 24; i++) {
      const pod = pods[i % 2]!;
      made.push(i % 4 === 3 ? await runIdOf(await call(pair, pod, 'run', { name: `async ${i}` }, { query: '?async=true' }), 202) : await runIdOf(await call(pair, pod, 'run', { name: `sync ${i}` }), 200));
    }
    await listedRuns(pair, `the ${made.length} runs made, finished`, (runs) => made.every((id) => runs.some((run) => run.id === id && run.status === 'success')));

    const { items, pages } = await listAll(pair, 'pageSize=5');
    const ids = items.map((run) => run.id);
    expect(new Set(ids).size, 'no run listed twice').toBe(ids.length);
    expect([...ids].sort()).toEqual([...made].sort());
    expect(ids, 'newest first').toEqual([...ids].sort().reverse());
    expect(pages).toBe(Math.ceil(made.length / 5));
    expect(new Set(items.map((run) => run.replica))).toEqual(new Set(pods.map((pod) => pod.metadata!.name)));
    const asyncOnly = await listAll(pair, 'pageSize=4&asyncOnly=true');
    expect(asyncOnly.items.map((run) => run.id).sort()).toEqual(made.filter((_, i) => i % 4 === 3).sort());

    // Tokens on the management API: reviewed by the API server.
    const runsPath = `/projects/${pair.namespace}/apps/${pair.name}/runs`;
    expect((await management(runsPath, OUTSIDER)).status, 'authenticated, not allowed').toBe(403);
    expect((await management(runsPath, null)).status, 'no token').toBe(401);

    const counted = await waitFor(
      async () => {
        const runs = (await pair.read()).status?.runs;
        return runs?.total === made.length && runs.inFlight === 0 && runs;
      },
      { what: `${pair.namespace}: App.status.runs counting ${made.length} runs`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 },
    );
    expect(counted).toMatchObject({ total: made.length, success: made.length, failure: 0, inFlight: 0 });
    expect(Date.parse(counted.lastRunTime!)).toBe(Math.max(...items.map((run) => Date.parse(run.createdAt))));
  });

  it('cancels runs through the operator on the replica that runs them: async, sync, stream and queued; repeated, finished, unknown', async () => {
    const [first, second] = await readyPods(stop);
    // Four long async runs fill the first replica's slots (replicaConcurrency 4): a fifth waits in its queue.
    // The first asked for a signed webhook.
    const receiver = await WebhookReceiver.start();
    const hooked = `?async=true&webhookEndpoint=${encodeURIComponent(receiver.at().toString())}`;
    const running: string[] = [];
    for (let i = 0; i < 4; i++) {
      running.push(await runIdOf(await call(stop, first!, 'count', { n: 300, pause: 0.1 }, { query: i === 0 ? hooked : '?async=true', headers: i === 0 ? { 'x-webhook-secret': 'stop-secret' } : {} }), 202));
    }
    const queued = await runIdOf(await call(stop, first!, 'count', { n: 300, pause: 0.1 }, { query: '?async=true' }), 202);
    await listedRuns(stop, 'four runs running, one queued', (runs) => running.every((id) => runs.some((run) => run.id === id && run.status === 'running')) && runs.some((run) => run.id === queued && run.status === 'pending'));

    const accepted = await cancelRun(stop, queued);
    expect(accepted.status, await accepted.clone().text()).toBe(202);
    expect(((await accepted.json()) as { item: RunRecord }).item).toMatchObject({ id: queued, replica: first!.metadata!.name });
    for (const id of running) expect((await cancelRun(stop, id)).status).toBe(202);
    const ended = await listedRuns(stop, 'the five runs cancelled', (runs) => [queued, ...running].every((id) => runs.some((run) => run.id === id && run.status === 'cancelled')));
    for (const run of ended.filter((r) => [queued, ...running].includes(r.id))) {
      expect(run).toMatchObject({ status: 'cancelled', reason: 'cancel_requested', statusCode: 409, error: { type: 'Cancelled' } });
    }
    expect(ended.find((run) => run.id === queued)!.startedAt, 'the queued run never started').toBeNull();
    try {
      await receiver.received(1, STATE_TIMEOUT_MS);
      const delivery = receiver.deliveries[0]!;
      expect(verifyWebhookSignature('stop-secret', delivery.headers, delivery.body)).toBe(true);
      expect(JSON.parse(delivery.body)).toMatchObject({ run_id: running[0], status: 'failure', error: { type: 'Cancelled' } });
    } finally {
      await receiver.close();
    }
    const again = await cancelRun(stop, queued);
    expect([again.status, ((await again.json()) as { item: RunRecord }).item.reason], 'a repeated cancel').toEqual([202, 'cancel_requested']);

    // A sync call on the second replica: its caller is answered 409 run-cancelled.
    const syncAnswer = call(stop, second!, 'count', { n: 300, pause: 0.1 });
    const [syncRun] = await listedRuns(stop, 'a sync run running', (runs) => runs.some((run) => run.mode === 'sync' && run.status === 'running'), '&status=running');
    expect((await cancelRun(stop, syncRun!.id)).status).toBe(202);
    await expectProblem(await syncAnswer, 409, 'run-cancelled');

    // A stream, cancelled as soon as its first item arrives: before its record is in its RunLog, so the operator
    // asks both replicas; the stream ends with `event: error`.
    const { runUrl } = await cluster.sidecar(second!);
    const stream = await fetch(`${runUrl}/v4/${stop.namespace}/${stop.name}/count`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await token(stop)}`, accept: 'text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify({ n: 300, pause: 0.1 }),
    });
    const streamId = stream.headers.get('x-request-id')!;
    const events = new EventReader(stream.body!);
    expect((await events.next())?.data).toMatch(/"item": ?1,/);
    expect((await cancelRun(stop, streamId)).status).toBe(202);
    const rest = await events.rest();
    expect(rest.at(-1)).toMatchObject({ event: 'error', data: expect.stringContaining('"Cancelled"') });
    expect(rest.length, 'the stream stopped long before its 300 items').toBeLessThan(100);
    await listedRuns(stop, 'the stream cancelled', (runs) => runs.some((run) => run.id === streamId && run.status === 'cancelled' && run.reason === 'cancel_requested'));

    // Finished otherwise: 409 run-finished; no such run (recent or not): 404; no run id at all: 400.
    const done = await runIdOf(await call(stop, first!, 'run', { name: 'done' }), 200);
    await listedRuns(stop, 'the finished run', (runs) => runs.some((run) => run.id === done && run.status === 'success'));
    await expectProblem(await cancelRun(stop, done), 409, 'run-finished');
    await expectProblem(await cancelRun(stop, '01a1fd40-0000-7000-8000-000000000000'), 404, 'run-not-found');
    await expectProblem(await cancelRun(stop, newRunId()), 404, 'run-not-found');
    await expectProblem(await cancelRun(stop, 'not-a-run-id'), 400, 'invalid-parameter');
  });

  it('cancels for a caller with the verb cancel only: a reader of runs and an outsider get 403, no token 401, and the run goes on', async () => {
    const [pod] = await readyPods(stop);
    const id = await runIdOf(await call(stop, pod!, 'count', { n: 50, pause: 0.1 }, { query: '?async=true' }), 202);
    // The reader's list is allowed (and its decision cached) just before: a decision is the verb's, not the token's.
    expect((await management(`/projects/${stop.namespace}/apps/${stop.name}/runs`, READER)).status).toBe(200);
    const reader = await cancelRun(stop, id, READER);
    await expectProblem(reader.clone(), 403, 'forbidden');
    expect(((await reader.json()) as { detail: string }).detail).toMatch(/may not cancel runs .* verb "cancel" on resource "runs" of API group "runlet.dev".*runlet-runs-operator/);
    await expectProblem(await cancelRun(stop, id, OUTSIDER), 403, 'forbidden');
    const anonymous = await fetch(`${cluster.operatorUrl}/v2/projects/${stop.namespace}/apps/${stop.name}/runs/${id}/cancel`, { method: 'POST' });
    expect(anonymous.status).toBe(401);
    const [finished] = await listedRuns(stop, `run ${id} finished`, (runs) => runs.some((run) => run.id === id && run.status !== 'pending' && run.status !== 'running'));
    expect(finished).toBeDefined();
    const run = (await listAll(stop, 'pageSize=500')).items.find((r) => r.id === id);
    expect(run?.status, 'not cancelled by a refused caller').toBe('success');
  });

  it('records an async run as failure (replica_lost) when its pod is lost in the middle of it', async () => {
    const [pod] = await readyPods(lost);
    const podName = pod!.metadata!.name!;
    const id = await runIdOf(await call(lost, pod!, 'count', { n: 600, pause: 0.1 }, { query: '?async=true' }), 202);
    await listedRuns(lost, `run ${id} running`, (runs) => runs.some((run) => run.id === id && run.status === 'running'));

    // The pod's node is lost: its processes stop dead, and the pod is force-deleted from the API server.
    const pids = cluster.kubelet.pod(podName, lost.namespace)!.processes().map((p) => p.pid);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    try {
      const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
      await core.patchNamespacedPod({ namespace: lost.namespace, name: podName, body: { metadata: { finalizers: null } } }, MERGE_PATCH);
      await core.deleteNamespacedPod({ namespace: lost.namespace, name: podName, gracePeriodSeconds: 0 });

      const [failed] = await listedRuns(lost, `run ${id} failed as replica_lost`, (runs) => runs.some((run) => run.id === id && run.status === 'failure'), '&status=failure');
      expect(failed).toMatchObject({
        id,
        async: true,
        status: 'failure',
        reason: 'replica_lost',
        replica: podName,
        error: { type: 'ReplicaLost', message: `the pod ${podName} went away before the run completed` },
      });
      expect(Date.parse(failed!.completedAt!)).toBeGreaterThanOrEqual(Date.parse(failed!.startedAt!));
      // The operator wrote it (the pod's processes were frozen throughout), and counted it once its write returned.
      await waitFor(async () => /^runlet_operator_runs_lost_total [1-9]/m.test(await (await fetch(`${cluster.operatorMetricsUrl}/metrics`)).text()), {
        what: 'the operator to count the lost run',
        timeoutMs: STATE_TIMEOUT_MS,
      });
    } finally {
      // The kubelet stops what is left of the pod; frozen processes would wait out its grace period.
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    await waitFor(async () => (await lost.read()).status?.runs?.failure === 1, { what: `${lost.namespace}: the lost run counted as a failure in the App status`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 });
  });

  it('serves sync runs while the API server is unreachable, refuses async ones (503), and lists the sync runs once it is back', async () => {
    const [pod] = await readyPods(solo);
    const made: string[] = [];
    cluster.server.pause('refuse');
    try {
      for (let i = 0; i < 3; i++) made.push(await runIdOf(await call(solo, pod!, 'run', { name: `offline ${i}` }), 200));
      // Refused once the sidecar has seen a RunLog write fail. Its last write (a load report) may be too recent
      // for the sync runs' batch to have been tried yet; an async call accepted meanwhile is journaled (durable),
      // and its own prompt write is the one that fails: the next is refused.
      const refused = await waitFor(
        async () => {
          const answer = await call(solo, pod!, 'run', { name: 'async offline' }, { query: '?async=true' });
          if (answer.status !== 202) return answer;
          await answer.body?.cancel();
          return undefined;
        },
        { what: 'an async call refused while the RunLog cannot be written', timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 },
      );
      const problem = (await refused.json()) as { type: string };
      expect(refused.status).toBe(503);
      expect(problem.type).toBe(problemTypeUri('run-store-unavailable'));
    } finally {
      cluster.server.resume();
    }
    await listedRuns(solo, 'the runs made while the API server was away', (runs) => made.every((id) => runs.some((run) => run.id === id && run.status === 'success')));
  });
});
