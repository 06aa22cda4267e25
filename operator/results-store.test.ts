// The operator with a results store (a real PostgreSQL): it takes the sidecars' signed batches at its collector,
// answers the management API from PostgreSQL, closes the runs of gone pods there as replica_lost, and deletes
// runs past their App's retention. On the in-memory API server, without pods: the runs' pods are gone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { V1Secret } from '@kubernetes/client-node';
import { v7 as uuidv7 } from 'uuid';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { waitFor } from '../test/support/wait.ts';
import { RUNS_ACCESS } from '../management/kube-auth.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { holderKeyFromText } from '../run-request/auth/held-run.ts';
import { openResults, type OpenResults } from '../results/open.ts';
import { RESULTS_SIGNATURE_HEADER, resultsKeyOf, signBatch } from '../results/results-key.ts';
import { createOperator, type Operator } from './main.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import { startPostgres, type PostgresServer } from '../test/support/postgres.ts';
import { runRecord, pendingAsyncRunRecord } from '../test/support/sqlite-run-records.ts';
import { testLogger } from '../test/support/logger.ts';
import { STATE_TIMEOUT_MS, createApp, createCodeConfigMap, createNamespace, isAppliedAtGeneration, prepareCluster, testConfig, waitForApp, type TestCluster } from '../test/support/fake-cluster.ts';
import { HOLDER_KEY_DATA_KEY, HOLDER_KEY_SECRET } from './render/names.ts';

const NAMESPACE = 'team';
const TOKEN = 'reader.x.y';
const DAY_MS = 24 * 60 * 60 * 1000;

let cluster: TestCluster<KubeApiServer>;
let postgres: PostgresServer;
let results: OpenResults;
let operator: Operator;
let url: string;
let key: Uint8Array;

beforeAll(async () => {
  postgres = await startPostgres();
  results = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('operator')), logger: testLogger() });
  cluster = await prepareCluster(await startKubeApiServer());
  await createNamespace(cluster.api, NAMESPACE);
  await createCodeConfigMap(cluster.api, NAMESPACE, 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
  operator = createOperator({
    kubeConfig: cluster.server.kubeConfig(),
    config: testConfig({ results: { sweepSeconds: 1, pruneIntervalSeconds: 1 } }),
    logger: testLogger(),
    processMetrics: false,
    results,
  });
  operator.start();
  url = await operator.listen();
  await createApp(cluster.api, NAMESPACE, 'hello', pythonSpec());
  await createApp(cluster.api, NAMESPACE, 'brief', pythonSpec({ runs: { retentionDays: 1 } }));
  for (const name of ['hello', 'brief']) await waitForApp(cluster.api, NAMESPACE, name, isAppliedAtGeneration, 'reconciled');
  cluster.server.tokens.set(TOKEN, { username: 'reader' });
  cluster.server.allow({ user: 'reader', namespace: NAMESPACE, ...RUNS_ACCESS });
  // The sidecars' key: the copy of the hand-over key the leader puts in the App's namespace.
  const secret = await waitFor(() => cluster.api.find<V1Secret & { metadata: { name: string } }>(`/api/v1/namespaces/${NAMESPACE}/secrets/${HOLDER_KEY_SECRET}`), {
    timeoutMs: STATE_TIMEOUT_MS,
    what: 'the namespace’s hand-over key',
  });
  key = resultsKeyOf(holderKeyFromText(Buffer.from(secret.data![HOLDER_KEY_DATA_KEY]!, 'base64').toString('utf8')));
}, 120_000);

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
  await results?.close();
  await postgres?.stop();
});

async function send(records: RunRecord[]): Promise<Response> {
  const body = Buffer.from(JSON.stringify({ records }));
  return fetch(`${url}/v1/results/${NAMESPACE}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [RESULTS_SIGNATURE_HEADER]: signBatch(key, body) },
    body,
  });
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
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the collector to take a batch (once the key is read)' });
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
});
