// The operator with a results store (a real PostgreSQL): it takes the App pods' batches at its collector (each sent
// with a token bound to its pod, on the collector's own port),
// answers the management API from PostgreSQL, closes the runs of gone pods there as replica_lost, deletes runs
// past their App's retention, and writes App.status.runs from the store's counters; it neither watches nor
// caches RunLogs, and deletes those left from before past their retention by pages of a list. On the in-memory
// API server, without pods: the runs' pods are gone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { waitFor } from '../test/support/wait.ts';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RUNS_ACCESS, RUNS_CANCEL_ACCESS } from '../management/kube-auth.ts';
import { HeldRecords } from '../activator/hold-records.ts';
import { startOperatorProcess } from '../test/support/operator-process.ts';
import { WebhookReceiver } from '../test/support/webhook-receiver.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { openResults, type OpenResults } from '../results/open.ts';
import { createOperator, type Operator } from './main.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import { startPostgres, type PostgresServer } from '../test/support/postgres.ts';
import { runRecord, pendingAsyncRunRecord } from '../test/support/sqlite-run-records.ts';
import { testLogger } from '../test/support/logger.ts';
import { STATE_TIMEOUT_MS, createApp, createCodeConfigMap, createNamespace, isAppliedAtGeneration, prepareCluster, testConfig, waitForApp, type TestCluster } from '../test/support/fake-cluster.ts';
import { HOLDER_KEY_SECRET } from './render/names.ts';
import { ensureHolderKey } from './autoscaling/holder-key.ts';
import { createAppPod, podToken } from '../test/support/app-pod-tokens.ts';
import { RUNLET_API_VERSION } from '../crds/api-group.ts';
import type { App, AppRunCounts } from '../crds/app-schema.ts';
import type { KubeObject } from '../kube/objects.ts';
import { readRunLog, writeRunLog } from '../test/support/runlogs.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const NAMESPACE = 'team';
const TOKEN = 'reader.x.y';
const DAY_MS = 24 * 60 * 60 * 1000;
/**
 * How often each operator replica marks itself present in the store: gone after three missed marks (6 s), which
 * a replica process on a loaded machine must not miss while it lives.
 */
const PRESENCE_SECONDS = 2;
/** A `runlet operator` process starting on a loaded 2-core machine. */
const PROCESS_START_MS = 90_000;

let cluster: TestCluster<KubeApiServer>;
let postgres: PostgresServer;
let results: OpenResults;
let operator: Operator;
let url: string;
let dsn: string;
/** The operator's wall clock runs this far ahead of the real one (RunLog retention). */
let clockOffsetMs = 0;

beforeAll(async () => {
  postgres = await startPostgres();
  dsn = postgres.dsn(await postgres.createDatabase('operator'));
  results = await openResults({ dsn, logger: testLogger() });
  cluster = await prepareCluster(await startKubeApiServer());
  await createNamespace(cluster.api, NAMESPACE);
  await createCodeConfigMap(cluster.api, NAMESPACE, 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
  operator = createOperator({
    kubeConfig: cluster.server.kubeConfig(),
    config: testConfig({ results: { sweepSeconds: 1, pruneIntervalSeconds: 1, presenceSeconds: PRESENCE_SECONDS }, runLogs: { sweepSeconds: 0.5, countersIntervalSeconds: 1 } }),
    logger: testLogger(),
    processMetrics: false,
    clock: () => new Date(Date.now() + clockOffsetMs),
    results,
  });
  operator.start();
  url = await operator.listen();
  await createApp(cluster.api, NAMESPACE, 'hello', pythonSpec());
  await createApp(cluster.api, NAMESPACE, 'brief', pythonSpec({ runs: { retentionDays: 1 } }));
  for (const name of ['hello', 'brief']) await waitForApp(cluster.api, NAMESPACE, name, isAppliedAtGeneration, 'reconciled');
  cluster.server.tokens.set(TOKEN, { username: 'reader' });
  cluster.server.allow({ user: 'reader', namespace: NAMESPACE, ...RUNS_ACCESS });
}, 120_000);

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
  await results?.close();
  await postgres?.stop();
});

/**
 * Sends the records as their pods' sidecars do: a batch per App and replica, each with a token bound to that pod
 * (made, as the App's, where it does not exist, and deleted once its batch is taken: the runs' pods are gone,
 * as this file's tests want them). Resolves with the first answer other than 200, or the last.
 */
async function send(records: RunRecord[]): Promise<Response> {
  const batches = new Map<string, RunRecord[]>();
  for (const record of records) {
    const key = `${record.appName}/${record.replica}`;
    batches.set(key, [...(batches.get(key) ?? []), record]);
  }
  let answer: Response | undefined;
  for (const batch of batches.values()) {
    const { appName, replica } = batch[0]!;
    const made = (await cluster.api.find(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/pods/${replica}`))) === undefined;
    if (made) await createAppPod(cluster.api, NAMESPACE, replica, appName);
    const token = await podToken(cluster.api, NAMESPACE, replica);
    const body = JSON.stringify({ records: batch });
    // 403 until the operator's pod cache shows the pod.
    answer = await waitFor(async () => {
      const response = await fetch(`${operator.collectorUrl}/v1/results/${NAMESPACE}/runs`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body });
      return response.status === 403 ? undefined : response;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: `the collector to take pod ${replica}'s batch` });
    if (made) await cluster.api.delete(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/pods/${replica}`));
    if (answer.status !== 200) return answer;
  }
  return answer!;
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${operator.metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((row) => row.startsWith(`${name} `));
  if (line === undefined) throw new Error(`metric ${name} not in /metrics`);
  return Number(line.slice(name.length + 1));
}

/** The App's status.runs once `predicate` holds. */
async function appRunsWhen(app: string, what: string, predicate: (runs: AppRunCounts) => boolean): Promise<AppRunCounts> {
  return waitFor(
    async () => {
      const runs = (await cluster.api.find<App & KubeObject>(kubePathOf(`/apis/${RUNLET_API_VERSION}/namespaces/${NAMESPACE}/apps/${app}`)))?.status?.runs;
      return runs !== undefined && predicate(runs) && runs;
    },
    { timeoutMs: STATE_TIMEOUT_MS, what: `App ${app}: status.runs ${what}` },
  );
}

async function getRun(app: string, id: string): Promise<Response> {
  return fetch(`${url}/v2/projects/${NAMESPACE}/apps/${app}/runs/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
}

describe('the operator with a results store', () => {
  it('lists and gets from PostgreSQL the runs its collector took, with the new filters, after their pod is gone', async () => {
    const runs = Array.from({ length: 5 }, (_, i) => runRecord({ projectId: NAMESPACE, appName: 'hello', functionName: i < 2 ? 'train' : 'run', createdAt: new Date().toISOString() }));
    const sent = await waitFor(async () => {
      const response = await send(runs);
      return response.status === 200 && response;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the collector to take a batch' });
    expect(await sent.json()).toEqual({ received: 5, written: 5, refused: [] });
    const listed = await fetch(`${url}/v2/projects/${NAMESPACE}/apps/hello/runs?functionName=train&pageSize=1`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const page = (await listed.json()) as { items: RunRecord[]; nextToken: string | null };
    expect(page.items.map((run) => run.id)).toEqual([runs[1]!.id]);
    const next = await fetch(`${url}/v2/projects/${NAMESPACE}/apps/hello/runs?functionName=train&pageSize=1&nextToken=${page.nextToken}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(((await next.json()) as { items: RunRecord[] }).items.map((run) => run.id)).toEqual([runs[0]!.id]);
    expect(await (await getRun('hello', runs[3]!.id)).json()).toEqual({ item: runs[3] });
    expect((await fetch(`${url}/v2/projects/${NAMESPACE}/apps/hello/runs?createdAfter=2026-02-30T00:00:00Z`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(400);
  });

  it('closes the runs a gone pod left unfinished as replica_lost', async () => {
    const running = { ...pendingAsyncRunRecord({ projectId: NAMESPACE, appName: 'hello', replica: 'hello-gone-pod', createdAt: new Date().toISOString() }), status: 'running' as const };
    expect((await send([running])).status).toBe(200);
    const closed = await waitFor(async () => {
      const { item } = (await (await getRun('hello', running.id)).json()) as { item: RunRecord };
      return item.status === 'failure' && item;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the run closed' });
    expect(closed).toMatchObject({ reason: 'replica_lost', error: { type: 'ReplicaLost', message: 'the pod hello-gone-pod went away before the run completed' } });
  });

  it('records a call held at zero and cancelled by another operator replica at once, its webhook pending while that replica delivers it; closes the webhook as not delivered once the replica is killed', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'runlet-held-results-'));
    const receiver = await WebhookReceiver.start();
    // Held call `told`: 404 once (tried again, as the spec's table says), then no answer until the test says so,
    // then 200. Held call `stuck`: no answer ever, so its replica is still delivering it (three attempts of up to
    // 10 s) when it is killed.
    let answerTold = false;
    receiver.answer = (delivery) => (delivery.path === '/told' ? (receiver.deliveries.filter((seen) => seen.path === '/told').length === 1 ? 404 : answerTold ? 200 : 'hang') : 'hang');
    const kubeconfig = join(dir, 'kubeconfig');
    await cluster.server.writeKubeconfig(kubeconfig);
    await writeFile(join(dir, 'config.json'), JSON.stringify({ results: { presenceSeconds: PRESENCE_SECONDS }, webhookAllowCidrs: ['127.0.0.0/8'] }));
    // Another replica of the operator, standing by (the Lease is this file's operator's), as a real process: the
    // one that cancels the held calls and delivers their webhooks, and is killed mid-delivery.
    const other = startOperatorProcess({
      home: dir,
      env: { KUBECONFIG: kubeconfig, KUBERNETES_SERVICE_HOST: '', RUNLET_RESULTS_DSN: dsn },
      args: ['--config', join(dir, 'config.json'), '--identity', 'operator-b', '--holder', 'external'],
    });
    try {
      const address = await waitFor(
        () => {
          const line = other.output().split('\n').find((text) => text.includes('"operator listening"'));
          return line === undefined ? undefined : (JSON.parse(line) as { address: string }).address;
        },
        { what: 'the other operator replica listening', timeoutMs: PROCESS_START_MS, intervalMs: 100 },
      ).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}; its output:\n${other.output()}`, { cause: error });
      });
      cluster.server.allow({ user: 'reader', namespace: NAMESPACE, ...RUNS_CANCEL_ACCESS });
      // Where that replica looks for held calls: its namespace's own for them (holder.heldCallsNamespace's default).
      await createNamespace(cluster.api, 'default-held');
      // The App namespace's hand-over key, which signs the records of the calls held for it. This operator runs no
      // holder, so it makes none: the test puts one where the activators' operator would (namespaceHolderKeys reads it).
      const namespaceKey = await ensureHolderKey(cluster.api, { namespace: NAMESPACE, name: HOLDER_KEY_SECRET });
      const records = new HeldRecords({ api: cluster.api, namespace: 'default-held', identity: 'activator-0', staleClaimMs: 60_000, ttlMs: 60_000, keys: async () => namespaceKey });
      const holdAndCancel = async (path: string): Promise<string> => {
        const runId = uuidv7();
        const url = `/v4/${NAMESPACE}/hello/run?async=true&webhookEndpoint=${encodeURIComponent(receiver.at(path).toString())}`;
        await records.save({ runId, namespace: NAMESPACE, appName: 'hello', acceptedAt: Date.now(), authenticatedProject: null, method: 'POST', url, headers: { 'x-webhook-secret': 'held-secret' }, body: Buffer.from('{}') });
        const cancelled = await waitFor(async () => {
          const answer = await fetch(`${address}/v2/projects/${NAMESPACE}/apps/hello/runs/${runId}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
          // 503 until that replica's caches and store are ready.
          return answer.status === 503 ? undefined : answer;
        }, { timeoutMs: PROCESS_START_MS, what: 'the other replica to take the cancel' });
        expect(cancelled.status, await cancelled.text()).toBe(202);
        return runId;
      };
      const webhookOf = async (runId: string): Promise<RunRecord['webhook'] | undefined> => {
        const answer = await getRun('hello', runId);
        return answer.status === 200 ? ((await answer.json()) as { item: RunRecord }).item.webhook : undefined;
      };

      const told = await holdAndCancel('/told');
      // Gettable as soon as the cancel answered, while its webhook is still being tried.
      await receiver.received(1);
      const answer = await getRun('hello', told);
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as { item: RunRecord }).item).toMatchObject({ id: told, status: 'cancelled', reason: 'cancel_requested', replica: 'operator-b', webhook: { state: 'pending' } });
      // A sweep passes (it closes a gone pod's run written after the held one) and leaves the pending webhook to
      // the replica delivering it, which is marked present.
      const gone = { ...pendingAsyncRunRecord({ projectId: NAMESPACE, appName: 'hello', replica: 'hello-gone-pod-2', createdAt: new Date().toISOString() }), status: 'running' as const };
      expect((await send([gone])).status).toBe(200);
      await waitFor(async () => (await (await getRun('hello', gone.id)).json() as { item: RunRecord }).item.status === 'failure', { timeoutMs: STATE_TIMEOUT_MS, what: 'a sweep after the held run was written' });
      expect(await webhookOf(told)).toMatchObject({ state: 'pending' });
      // Answered at last: the outcome that replica records replaces the pending one.
      answerTold = true;
      await waitFor(async () => (await webhookOf(told))?.state === 'delivered', { timeoutMs: 3 * STATE_TIMEOUT_MS, what: 'the webhook recorded delivered' });

      const stuck = await holdAndCancel('/stuck');
      await waitFor(() => receiver.deliveries.some((delivery) => delivery.path === '/stuck'), { timeoutMs: STATE_TIMEOUT_MS, what: 'the stuck webhook tried' });
      expect(await webhookOf(stuck)).toMatchObject({ state: 'pending' });
      await other.kill();
      // Its marks stop: the leader's sweep closes what it was delivering, as it closes a gone pod's.
      const closed = await waitFor(async () => {
        const webhook = await webhookOf(stuck);
        return webhook?.state !== 'pending' && webhook;
      }, { timeoutMs: 3 * STATE_TIMEOUT_MS, what: 'the stuck webhook closed' });
      expect(closed).toMatchObject({ state: 'failed', lastError: 'not delivered: the operator replica operator-b went away before the delivery completed' });
      expect(await (await getRun('hello', stuck)).json()).toMatchObject({ item: { status: 'cancelled', reason: 'cancel_requested' } });
    } finally {
      await other.kill();
      await receiver.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, PROCESS_START_MS + 5 * STATE_TIMEOUT_MS);

  it('closes a held run\'s webhook left pending past a delivery\'s time by a replica that is still there (it restarted under its name)', async () => {
    // As this file's operator (a replica marked present) would have recorded it 11 minutes ago, before a restart.
    const completedAt = new Date(Date.now() - 11 * 60_000).toISOString();
    const held: RunRecord = {
      ...pendingAsyncRunRecord({ projectId: NAMESPACE, appName: 'hello', replica: 'operator-a', createdAt: completedAt }),
      status: 'cancelled',
      reason: 'cancel_requested',
      completedAt,
      webhook: { endpoint: 'http://127.0.0.1:9/hook', state: 'pending', attempts: 0, lastStatusCode: null, lastError: null },
    };
    expect((await send([held])).status).toBe(200);
    const closed = await waitFor(async () => {
      const { item } = (await (await getRun('hello', held.id)).json()) as { item: RunRecord };
      return item.webhook?.state !== 'pending' && item.webhook;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the webhook closed' });
    expect(closed).toMatchObject({ state: 'failed', lastError: 'not delivered: the operator replica operator-a recorded no outcome of the delivery within 10 minutes' });
  });

  it("deletes runs past their App's retention, and keeps the others' for the default", async () => {
    const twoDaysAgo = (app: string): RunRecord => {
      const at = Date.now() - 2 * DAY_MS;
      return runRecord({ id: uuidv7({ msecs: at }), projectId: NAMESPACE, appName: app, createdAt: new Date(at).toISOString() });
    };
    const brief = twoDaysAgo('brief');
    const kept = twoDaysAgo('hello');
    expect((await send([brief, kept])).status).toBe(200);
    await waitFor(async () => (await getRun('brief', brief.id)).status === 404, { timeoutMs: STATE_TIMEOUT_MS, what: 'the brief App’s old run deleted' });
    expect((await getRun('hello', kept.id)).status).toBe(200);
  });

  it('collects many runs with no RunLog watched or cached, and counts them in App.status.runs from PostgreSQL', async () => {
    await createApp(cluster.api, NAMESPACE, 'busy', pythonSpec());
    // Its runs' pod runs: the sweep of lost runs leaves them in flight.
    await createAppPod(cluster.api, NAMESPACE, 'busy-pod', 'busy');
    await waitFor(() => operator.ready, { timeoutMs: STATE_TIMEOUT_MS, what: 'the operator ready' });
    const runs = Array.from({ length: 3000 }, (_, i) => {
      const run = pendingAsyncRunRecord({ projectId: NAMESPACE, appName: 'busy', replica: 'busy-pod', createdAt: new Date().toISOString() });
      return i % 3 === 0 ? run : { ...run, status: i % 3 === 1 ? ('success' as const) : ('failure' as const), statusCode: 200, startedAt: run.createdAt, completedAt: run.createdAt };
    });
    for (let i = 0; i < runs.length; i += 1000) expect((await send(runs.slice(i, i + 1000))).status).toBe(200);
    const pending = runs.filter((run) => run.status === 'pending');
    const first = await appRunsWhen('busy', 'counting 3000 runs', (counts) => counts.total === 3000);
    expect(first).toEqual({ total: 3000, success: 1000, failure: 1000, inFlight: 1000, lastRunTime: runs.map((run) => run.createdAt).sort().at(-1) });
    // Replayed, then moved on: a pending run that starts and succeeds moves the counts; a replay does not.
    expect((await send(runs.slice(0, 1000))).status).toBe(200);
    const moved = pending.slice(0, 10).map((run) => ({ ...run, status: 'success' as const, statusCode: 200, startedAt: run.createdAt, completedAt: run.createdAt }));
    expect((await send(moved)).status).toBe(200);
    expect(await appRunsWhen('busy', 'moved by 10 runs finished', (counts) => counts.success === 1010)).toEqual({ ...first, success: 1010, inFlight: 990 });

    expect(cluster.server.countRequests({ pathPattern: /\/runlogs/, watch: true }), 'a RunLog watch').toBe(0);
    expect(await metric('runlet_operator_runs_cached')).toBe(0);
  });

  it('deletes the RunLogs left from before the results store past their retention, listing them a page at a time', async () => {
    // Written by sidecars before the store was configured: their pods are gone. Kept a day (the default), but
    // those of an App that keeps them a week.
    await createApp(cluster.api, NAMESPACE, 'weekly', pythonSpec({ runs: { retention: 7 * 24 * 3600 } }));
    // Two pages of the janitor's list (20 a page).
    const leftovers = Array.from({ length: 25 }, (_, i) => `hello-old-${String(i).padStart(2, '0')}`);
    for (const pod of leftovers) await writeRunLog(cluster.api, NAMESPACE, pod, 'hello', [runRecord({ projectId: NAMESPACE, appName: 'hello', replica: pod, createdAt: new Date().toISOString() })]);
    await writeRunLog(cluster.api, NAMESPACE, 'weekly-old', 'weekly', [runRecord({ projectId: NAMESPACE, appName: 'weekly', replica: 'weekly-old', createdAt: new Date().toISOString() })]);
    await waitFor(() => operator.apps.get(NAMESPACE, 'weekly') !== undefined, { timeoutMs: STATE_TIMEOUT_MS, what: 'App weekly in the cache' });
    clockOffsetMs = 25 * 3600_000;
    await waitFor(async () => (await Promise.all(leftovers.map((pod) => readRunLog(cluster.api, NAMESPACE, pod)))).every((runLog) => runLog === undefined), {
      // Three requests each, two at a time, by a leader whose short test lease a loaded machine may make it lose.
      timeoutMs: 3 * STATE_TIMEOUT_MS,
      what: 'the leftover RunLogs deleted',
    });
    expect(await readRunLog(cluster.api, NAMESPACE, 'weekly-old'), 'a RunLog within its App\'s retention').toBeDefined();
    const lists = cluster.server.requests.filter((request) => request.method === 'GET' && /\/runlogs$/.test(request.path));
    expect(lists.length).toBeGreaterThan(0);
    expect(lists.every((request) => request.query.limit === '20' && !request.watch), JSON.stringify(lists.slice(0, 3))).toBe(true);
    expect(await metric('runlet_operator_runs_cached')).toBe(0);
  });
});
