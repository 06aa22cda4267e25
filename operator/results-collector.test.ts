// The operator's results collector as one tenant attacks another's runs (issue 31, findings 1 and 7): every batch
// comes with a token the API server reviews for the collector's audience, bound to a pod the operator's cache
// knows as an App's, and carries only that App's runs, run by that pod. Two tenant namespaces with an App each, on
// the in-memory API server (its TokenRequest binds tokens to pods, its TokenReview names the pod, as a real one
// does), a real PostgreSQL, the operator's collector on its own port.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { openResults, type OpenResults } from '../results/open.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { createAppPod, podToken } from '../test/support/app-pod-tokens.ts';
import { STATE_TIMEOUT_MS, createApp, createCodeConfigMap, createNamespace, isAppliedAtGeneration, prepareCluster, testConfig, waitForApp, type TestCluster } from '../test/support/fake-cluster.ts';
import { testLogger } from '../test/support/logger.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import { startPostgres, type PostgresServer } from '../test/support/postgres.ts';
import { pendingAsyncRunRecord } from '../test/support/sqlite-run-records.ts';
import { waitFor } from '../test/support/wait.ts';
import { createOperator, type Operator } from './main.ts';
import { SignJWT, decodeProtectedHeader, generateKeyPair } from 'jose';
import { SERVICE_ACCOUNT_ISSUER, signServiceAccountToken } from '../test/kube/service-account-issuer.ts';
import { RESULTS_TOKEN_AUDIENCE } from '../results/results-token.ts';
import { kubePathOf } from '../test/support/kube-path.ts';
import { RawConnection } from '../test/support/raw-http.ts';

const APP = 'billing';
const POD = { a: 'billing-a-1', b: 'billing-b-1' } as const;

let cluster: TestCluster<KubeApiServer>;
let postgres: PostgresServer;
let results: OpenResults;
let operator: Operator;
/** The operator's API port (management API, dashboard, health). */
let apiUrl: string;
const tokens: Record<'a' | 'b', string> = { a: '', b: '' };

beforeAll(async () => {
  postgres = await startPostgres();
  results = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('collector')), logger: testLogger() });
  cluster = await prepareCluster(await startKubeApiServer());
  operator = createOperator({ kubeConfig: cluster.server.kubeConfig(), config: testConfig(), logger: testLogger(), processMetrics: false, results });
  operator.start();
  apiUrl = await operator.listen();
  for (const tenant of ['a', 'b'] as const) {
    const namespace = `team-${tenant}`;
    await createNamespace(cluster.api, namespace);
    await createCodeConfigMap(cluster.api, namespace, 'code', APP, { 'main.py': 'def run(): pass\n' });
    await createApp(cluster.api, namespace, APP, pythonSpec({}, 'code'));
    await waitForApp(cluster.api, namespace, APP, isAppliedAtGeneration, 'reconciled');
    // The pod the kubelet would run for the App's Deployment, and the token it would project into its sidecar.
    await createAppPod(cluster.api, namespace, POD[tenant], APP);
    tokens[tenant] = await podToken(cluster.api, namespace, POD[tenant]);
  }
  await waitFor(() => operator.ready, { timeoutMs: STATE_TIMEOUT_MS, what: 'the operator ready' });
}, 120_000);

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
  await results?.close();
  await postgres?.stop();
});

/** POSTs a batch to the collector as a sidecar does; `namespace` is the path's. */
function post(namespace: string, records: unknown[], authorization: string | undefined): Promise<Response> {
  return fetch(`${operator.collectorUrl}/v1/results/${namespace}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
    body: JSON.stringify({ records }),
  });
}

/** As the pod's sidecar sends: 403 until the operator's pod cache shows the pod. */
async function sendAs(tenant: 'a' | 'b', records: RunRecord[]): Promise<Response> {
  return waitFor(async () => {
    const answer = await post(`team-${tenant}`, records, `Bearer ${tokens[tenant]}`);
    return answer.status === 403 ? undefined : answer;
  }, { timeoutMs: STATE_TIMEOUT_MS, what: `the collector to know pod ${POD[tenant]}` });
}

const hook = (endpoint: string): RunRecord['webhook'] => ({ endpoint, state: 'pending', attempts: 0, lastStatusCode: null, lastError: null });

/** team-b's pending async run, as its sidecar records it. */
async function teamBRun(): Promise<RunRecord> {
  const run = pendingAsyncRunRecord({ id: uuidv7(), projectId: 'team-b', appName: APP, replica: POD.b, createdAt: new Date().toISOString(), webhook: hook('https://b.example.com/hook') });
  expect(await (await sendAs('b', [run])).json()).toEqual({ received: 1, written: 1, refused: [] });
  return run;
}

describe('the results collector, attacked by another tenant', () => {
  it('refuses team-a\'s pod writing team-b\'s run, with its own token, in every way; team-b\'s outcome still lands', async () => {
    const run = await teamBRun();
    const forged: RunRecord = { ...run, status: 'failure', statusCode: 500, completedAt: run.createdAt, webhook: hook('https://attacker.example.com/') };
    // To team-b's path: the token is team-a's pod's.
    const toB = await post('team-b', [forged], `Bearer ${tokens.a}`);
    expect(toB.status).toBe(403);
    // To its own path, as team-b's records (project team-b), or as its own project's with team-b's id and replica.
    const asB = await sendAs('a', [forged]);
    expect(await asB.json()).toMatchObject({ received: 1, written: 0, refused: [{ index: 0, reason: 'of project team-b, not team-a' }] });
    const sameIdOwnProject = { ...forged, projectId: 'team-a' };
    expect(await (await sendAs('a', [sameIdOwnProject])).json()).toMatchObject({ written: 0, refused: [{ reason: `run by replica ${POD.b}, not ${POD.a}, which sent it` }] });
    expect(await results.store.getRun('team-b', APP, run.id)).toEqual(run);
    // team-b's real outcome.
    const finished: RunRecord = { ...run, status: 'success', statusCode: 200, startedAt: run.createdAt, completedAt: run.createdAt };
    expect(await (await sendAs('b', [finished])).json()).toEqual({ received: 1, written: 1, refused: [] });
    expect(await results.store.getRun('team-b', APP, run.id)).toEqual(finished);
  });

  it('refuses another App\'s runs in the pod\'s own namespace', async () => {
    const other = pendingAsyncRunRecord({ projectId: 'team-a', appName: 'payroll', replica: POD.a, createdAt: new Date().toISOString() });
    expect(await (await sendAs('a', [other])).json()).toMatchObject({ written: 0, refused: [{ reason: `of app payroll, not ${APP}, whose pod ${POD.a} sent it` }] });
    expect(await results.store.getRun('team-a', 'payroll', other.id)).toBeUndefined();
  });

  it('refuses what a tenant can read or mint: a batch signed as before (with a key from a Secret), a token for another audience, a token not bound to a pod', async () => {
    const run = await teamBRun();
    const forged = { ...run, status: 'failure', statusCode: 500, completedAt: run.createdAt };
    // Batches were signed with a key derived from the namespace's holder key Secret, which `edit` reads: no
    // signature is taken now, only a pod's token.
    const signed = await fetch(`${operator.collectorUrl}/v1/results/team-b/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-runlet-results-signature': `sha256=${'0'.repeat(64)}` },
      body: JSON.stringify({ records: [forged] }),
    });
    expect(signed.status).toBe(401);
    // A token of team-b's pod, for the API server's audience (what `kubectl create token` gives by default).
    const apiServerToken = await podToken(cluster.api, 'team-b', POD.b, { audience: 'https://kubernetes.default.svc.cluster.local' });
    expect((await post('team-b', [forged], `Bearer ${apiServerToken}`)).status).toBe(401);
    // A token of team-b's sidecar ServiceAccount for the collector, bound to no pod (`kubectl create token --audience`).
    const unbound = await podToken(cluster.api, 'team-b', POD.b, { boundPod: false });
    expect((await post('team-b', [forged], `Bearer ${unbound}`)).status).toBe(403);
    expect(await results.store.getRun('team-b', APP, run.id)).toEqual(run);
  });

  it('refuses a plain pod\'s token, an App-labelled pod of another ServiceAccount, an expired token, and a gone pod\'s', async () => {
    const run = pendingAsyncRunRecord({ projectId: 'team-a', appName: APP, replica: 'plain', createdAt: new Date().toISOString() });
    // A pod of no App, running as the sidecar's ServiceAccount.
    await createAppPod(cluster.api, 'team-a', 'plain', null);
    const plain = await podToken(cluster.api, 'team-a', 'plain');
    expect((await post('team-a', [run], `Bearer ${plain}`)).status).toBe(403);
    // A pod labelled as the App's, running as another ServiceAccount (its own, the namespace's default).
    await cluster.api.create(kubePathOf('/api/v1/namespaces/team-a/serviceaccounts'), { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default' } });
    await createAppPod(cluster.api, 'team-a', 'impostor', APP, 'default');
    const impostor = await podToken(cluster.api, 'team-a', 'impostor', { serviceAccount: 'default' });
    await waitFor(() => operator.apps.get('team-a', APP) !== undefined, { what: 'the App cached' });
    const impostorRun = { ...run, replica: 'impostor' };
    expect((await post('team-a', [impostorRun], `Bearer ${impostor}`)).status).toBe(403);
    // An expired token of the App's pod (never seen by the collector before).
    const expired = await podToken(cluster.api, 'team-a', POD.a);
    cluster.server.tokens.get(expired)!.expiresAtMs = Date.now() - 1000;
    const ownRun = { ...run, replica: POD.a };
    expect((await post('team-a', [ownRun], `Bearer ${expired}`)).status).toBe(401);
    // A pod gone: its token, taken before (its review cached), is refused at once.
    await createAppPod(cluster.api, 'team-a', 'leaving', APP);
    const leaving = await podToken(cluster.api, 'team-a', 'leaving');
    const leavingRun = { ...run, id: uuidv7(), replica: 'leaving' };
    expect((await waitFor(async () => {
      const answer = await post('team-a', [leavingRun], `Bearer ${leaving}`);
      return answer.status === 403 ? undefined : answer;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'pod leaving known' })).status).toBe(200);
    await cluster.api.delete(kubePathOf('/api/v1/namespaces/team-a/pods/leaving'));
    await waitFor(async () => (await post('team-a', [leavingRun], `Bearer ${leaving}`)).status === 403, { timeoutMs: STATE_TIMEOUT_MS, what: 'the gone pod refused' });
    for (const refused of [run, impostorRun, ownRun]) expect(await results.store.getRun('team-a', APP, refused.id)).toBeUndefined();
  });

  it('asks the API server once per token, not once per batch', async () => {
    await createAppPod(cluster.api, 'team-b', 'billing-b-2', APP);
    const token = await podToken(cluster.api, 'team-b', 'billing-b-2');
    const reviews = () => cluster.server.countRequests({ method: 'POST', pathPattern: '/tokenreviews' });
    const before = reviews();
    for (let i = 0; i < 5; i += 1) {
      const run = pendingAsyncRunRecord({ projectId: 'team-b', appName: APP, replica: 'billing-b-2', createdAt: new Date().toISOString() });
      const answer = await waitFor(async () => {
        const sent = await post('team-b', [run], `Bearer ${token}`);
        return sent.status === 403 ? undefined : sent;
      }, { timeoutMs: STATE_TIMEOUT_MS, what: 'pod billing-b-2 known' });
      expect(answer.status).toBe(200);
    }
    expect(reviews() - before).toBe(1);
  });

  it('is served on its own port: the management API\'s has no collector route', async () => {
    const { port } = operator.server.server.address() as { port: number };
    expect(new URL(operator.collectorUrl!).port).not.toBe(String(port));
    const answer = await fetch(`http://127.0.0.1:${port}/v1/results/team-a/runs`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.a}` }, body: '{"records":[]}' });
    expect(answer.status).toBe(404);
  });
});

describe('the operator\'s ports, sent a body for no route', () => {
  it.each([
    ['the collector', () => operator.collectorUrl!, '/nope'],
    ['the metrics port', () => operator.metricsUrl!, '/nope'],
    ['the API port', () => apiUrl, '/v2/nope'],
    ['the API port, outside /v2', () => apiUrl, '/nope'],
  ])('%s answers 404 at once and closes the connection, reading no byte of the body', async (_port, url, path) => {
    // Without a token: fastify would read (and hold) up to 1 MiB of it before its 404, on as many connections as
    // a caller opens.
    for (const type of ['text/plain', 'application/json']) {
      const connection = await RawConnection.open(url());
      try {
        connection.write(`POST ${path} HTTP/1.1\r\nHost: operator\r\nContent-Type: ${type}\r\nContent-Length: 900000\r\n\r\n`);
        connection.write(Buffer.alloc(64 * 1024, 0x20));
        let timer: NodeJS.Timeout | undefined;
        const answer = await Promise.race([
          connection.next(),
          new Promise<never>((_resolve, reject) => {
            timer = setTimeout(() => reject(new Error(`no answer from ${path} (${type}) while its body was still being sent`)), 10_000);
          }),
        ]).finally(() => clearTimeout(timer));
        expect(answer).toMatchObject({ status: 404, headers: { connection: 'close' } });
        await connection.closedByServer();
      } finally {
        connection.close();
      }
    }
  });
});

describe('the results collector, flooded with tokens', () => {
  /** Claims as the API server writes them for team-a's pod, changed by `change`. */
  const podClaims = (change: Record<string, unknown> = {}): Record<string, unknown> => {
    const now = Math.floor(Date.now() / 1000);
    return {
      sub: 'system:serviceaccount:team-a:runlet-sidecar',
      aud: [RESULTS_TOKEN_AUDIENCE],
      iat: now,
      nbf: now,
      exp: now + 600,
      jti: uuidv7(),
      'kubernetes.io': { namespace: 'team-a', serviceaccount: { name: 'runlet-sidecar', uid: uuidv7() }, pod: { name: POD.a, uid: uuidv7() } },
      ...change,
    };
  };

  it('checks tokens offline first: 1,000 forged, other-audience, expired and made-up ones reach no TokenReview, while a real pod\'s batch is taken', async () => {
    // A key of the attacker's, under the kid of the cluster's: the signature is what tells it apart.
    const { privateKey } = await generateKeyPair('RS256');
    const { kid } = decodeProtectedHeader(tokens.a);
    const forge = (claims: Record<string, unknown>): Promise<string> => new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).setIssuer(SERVICE_ACCOUNT_ISSUER).sign(privateKey);
    const junk: string[] = [];
    for (let i = 0; i < 250; i += 1) {
      junk.push(await forge(podClaims()));
      // Signed by the cluster's own key, as a leaked or minted token would be: for another audience, or expired.
      junk.push(signServiceAccountToken(podClaims({ aud: ['https://kubernetes.default.svc.cluster.local'] })));
      junk.push(signServiceAccountToken(podClaims({ exp: Math.floor(Date.now() / 1000) - 60 - i })));
      junk.push(`${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(`{"n":${i}}`).toString('base64url')}.c2lnbmF0dXJl`);
    }
    const reviews = () => cluster.server.countRequests({ method: 'POST', pathPattern: '/tokenreviews' });
    const before = reviews();
    const run = pendingAsyncRunRecord({ projectId: 'team-a', appName: APP, replica: POD.a, createdAt: new Date().toISOString() });
    const statuses = new Map<number, number>();
    for (let start = 0; start < junk.length; start += 50) {
      const answers = await Promise.all(junk.slice(start, start + 50).map((token) => post('team-a', [run], `Bearer ${token}`)));
      for (const answer of answers) statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ 401: 1000 });
    expect(reviews() - before).toBe(0);
    // A real pod's token, never seen before: one review, and its batch taken.
    await createAppPod(cluster.api, 'team-a', 'billing-a-2', APP);
    const real = await podToken(cluster.api, 'team-a', 'billing-a-2');
    const own = { ...run, replica: 'billing-a-2' };
    const answer = await waitFor(async () => {
      const sent = await post('team-a', [own], `Bearer ${real}`);
      return sent.status === 403 ? undefined : sent;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'pod billing-a-2 known' });
    expect(await answer.json()).toEqual({ received: 1, written: 1, refused: [] });
    expect(reviews() - before).toBe(1);
    // Counted, by reason, without a namespace for the unauthenticated.
    const metrics = await (await fetch(`${operator.metricsUrl}/metrics`)).text();
    expect(metricValue(metrics, 'runlet_results_batches_refused_total{reason="unauthenticated",namespace=""}')).toBeGreaterThanOrEqual(1000);
    expect(metricValue(metrics, 'runlet_results_token_checks_total{outcome="refused"}')).toBeGreaterThanOrEqual(1000);
    expect(metricValue(metrics, 'runlet_results_token_checks_total{outcome="verified"}')).toBeGreaterThanOrEqual(1);
  }, 120_000);

  it('keeps a tenant minting valid tokens of its own pods from taking every review: another namespace\'s new pod token is reviewed while the flood goes on', async () => {
    // team-a asks the API server for bound tokens of its own pod (kubectl create token --bound-object-kind Pod, as
    // `edit` may): each verifies offline and costs a TokenReview. It sends them without pause, many at once.
    const minted = await Promise.all(Array.from({ length: 400 }, () => podToken(cluster.api, 'team-a', POD.a)));
    // team-b's new pod, known to the operator before the flood (a first token of it taken).
    await createAppPod(cluster.api, 'team-b', 'billing-b-3', APP);
    const warm = await podToken(cluster.api, 'team-b', 'billing-b-3');
    const first = pendingAsyncRunRecord({ id: uuidv7(), projectId: 'team-b', appName: APP, replica: 'billing-b-3', createdAt: new Date().toISOString() });
    await waitFor(async () => ((await post('team-b', [first], `Bearer ${warm}`)).status === 200 ? true : undefined), { what: 'pod billing-b-3 known', timeoutMs: STATE_TIMEOUT_MS });
    const run = pendingAsyncRunRecord({ projectId: 'team-a', appName: APP, replica: POD.a, createdAt: new Date().toISOString() });
    // The pod's token rotated (the kubelet's next one): never seen by the collector, sent once the flood is on.
    const fresh = await podToken(cluster.api, 'team-b', 'billing-b-3');
    let flooding = true;
    let sent = 0;
    const flood = async (): Promise<void> => {
      while (flooding && sent < minted.length) {
        const token = minted[sent++]!;
        await post('team-a', [run], `Bearer ${token}`).then((answer) => answer.arrayBuffer(), () => undefined);
      }
    };
    const flooders = Array.from({ length: 16 }, () => flood());
    try {
      await waitFor(() => sent >= 60, { what: 'the flood under way', timeoutMs: STATE_TIMEOUT_MS });
      const own = pendingAsyncRunRecord({ id: uuidv7(), projectId: 'team-b', appName: APP, replica: 'billing-b-3', createdAt: new Date().toISOString() });
      const answer = await post('team-b', [own], `Bearer ${fresh}`);
      expect(flooding && sent < minted.length).toBe(true);
      expect({ status: answer.status, body: await answer.json() }).toEqual({ status: 200, body: { received: 1, written: 1, refused: [] } });
    } finally {
      flooding = false;
      await Promise.all(flooders);
    }
  }, 120_000);

  it('counts refused batches by reason and, once the sender is authenticated, its namespace', async () => {
    const run = pendingAsyncRunRecord({ projectId: 'team-b', appName: APP, replica: POD.a, createdAt: new Date().toISOString() });
    expect((await post('team-b', [run], `Bearer ${tokens.a}`)).status).toBe(403);
    expect((await post('team-a', [run], undefined)).status).toBe(401);
    const metrics = await (await fetch(`${operator.metricsUrl}/metrics`)).text();
    expect(metricValue(metrics, 'runlet_results_batches_refused_total{reason="wrong-namespace",namespace="team-a"}')).toBeGreaterThanOrEqual(1);
    expect(metricValue(metrics, 'runlet_results_batches_refused_total{reason="unauthenticated",namespace=""}')).toBeGreaterThanOrEqual(1);
    // Nothing labelled with a namespace the API server did not vouch for.
    expect(metrics).not.toMatch(/runlet_results_batches_refused_total\{reason="unauthenticated",namespace="[^"]/);
  });
});

/** The value of one series in a Prometheus text exposition; undefined when it is absent. */
function metricValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
