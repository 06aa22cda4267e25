// The results store's promise on a real control plane (test/control-plane: kube-apiserver 1.20, pods run by the
// test kubelet as local processes) with a real PostgreSQL: an App's async calls do not need the API server or the
// database to be accepted. With either stopped for OUTAGE_MS, async calls made meanwhile are answered 202 (the
// sidecar's journal in its emptyDir holds them; its shipper buffers their records while the collector or the
// database is away), and once the part is back every one of them is listed through the management API in its
// final state. A call refused at the shipper's bound (503 run-store-unavailable) is counted and never listed.
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { MAX_PAGE_SIZE } from '../../management/schemas.ts';
import { controlPlaneSkipReason } from '../control-plane/control-plane.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { waitFor } from '../support/wait.ts';
import { startControlPlaneCluster, type ControlPlaneCluster } from './control-plane-cluster.ts';
import { HelloApp } from './hello-app.ts';
import { isReady, STATE_TIMEOUT_MS } from './operator-suite.ts';

/** How long the API server, then PostgreSQL, stays stopped: the issue fixes it. */
const OUTAGE_MS = 30_000;
/** Async calls made while a part is stopped: a steady arrival, as callers keep calling (300 in an outage). */
const CALLS_PER_SECOND = 10;
/** From a part's return to every run of the outage listed in its final state (shipper backoff ≤ 5 s, batches, reviews). */
const SETTLE_TIMEOUT_MS = 120_000;
/** Cluster start (control plane, install.yaml, operator, a ready pod), two outages and their settling. */
const FILE_TIMEOUT_MS = 600_000;

const skipReason = controlPlaneSkipReason();
if (skipReason !== undefined) console.log(`results store outages on a real control plane: skipped, ${skipReason}`);

interface OutageCalls {
  /** Run ids answered 202. */
  accepted: string[];
  /** Run ids answered 503 run-store-unavailable (the shipper's bound). */
  refused: string[];
  /** Any other answer: status and body, for the assertion's message. */
  unexpected: string[];
}

describe.skipIf(skipReason !== undefined)('the results store while a part is stopped, on a real control plane', { timeout: FILE_TIMEOUT_MS }, () => {
  let postgres: PostgresServer;
  let cluster: ControlPlaneCluster;
  let app: HelloApp;
  let runUrl: string;
  let callerToken: string;
  let readerToken: string;

  beforeAll(async () => {
    postgres = await startPostgres();
    cluster = await startControlPlaneCluster({ resultsDsn: postgres.dsn(await postgres.createDatabase('runlet')) });
    await prepareApp().catch((error: unknown) => {
      console.log(cluster.diagnostics());
      throw error;
    });
  }, FILE_TIMEOUT_MS);

  beforeEach((context) => {
    context.onTestFailed(() => console.log(cluster.diagnostics()));
  });

  afterAll(async () => {
    await cluster?.close();
    await postgres?.stop();
  });

  async function prepareApp(): Promise<void> {
    app = new HelloApp(cluster.kubeConfig, `runlet-outage-${Date.now().toString(36)}`);
    await app.apply();
    const pod = await waitFor(async () => (await app.pods()).find(isReady), { what: 'the App’s pod Ready', timeoutMs: 2 * STATE_TIMEOUT_MS, intervalMs: 200 });
    ({ runUrl } = await cluster.sidecar(pod));
    const args = [...pod.spec!.containers, ...(pod.spec!.initContainers ?? [])].map((container) => (container.args ?? []).join(' '));
    expect(args.filter((line) => line.includes('--run-store results')), 'the sidecar keeps its runs in the results store').toHaveLength(1);
    // Tokens while the API server serves: the caller's (verified offline by the sidecar, against the key set it
    // fetched at start) and the reader's, bound to the runs viewer role for the management API.
    callerToken = await cluster.token(app.namespace);
    readerToken = await cluster.serviceAccountToken(app.namespace, 'default');
    await cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: app.namespace,
      body: {
        metadata: { name: 'default-runs-viewer' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-runs-viewer' },
        subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: app.namespace }],
      },
    });
    // Before any outage: a call made now is listed, so the path (sidecar → collector → PostgreSQL → list) works.
    const before = await callDuring(1_000);
    expect(before.unexpected).toEqual([]);
    await listedFinished(before.accepted);
  }

  async function asyncCall(index: number): Promise<{ status: number; runId: string | null; body: string }> {
    const response = await fetch(`${runUrl}/v4/${app.namespace}/hello/run?async=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${callerToken}` },
      body: JSON.stringify({ name: `outage-${index}` }),
    });
    const body = await response.text();
    const runId = response.status === 202 ? (JSON.parse(body) as { run_id: string }).run_id : response.headers.get('x-request-id');
    return { status: response.status, runId, body };
  }

  /** Async calls at CALLS_PER_SECOND for `durationMs`, each awaited to its answer. */
  async function callDuring(durationMs: number): Promise<OutageCalls> {
    const answers: Promise<Awaited<ReturnType<typeof asyncCall>>>[] = [];
    const count = Math.round((durationMs / 1000) * CALLS_PER_SECOND);
    await new Promise<void>((resolveAll) => {
      const timer = setInterval(() => {
        answers.push(asyncCall(answers.length));
        if (answers.length === count) {
          clearInterval(timer);
          resolveAll();
        }
      }, 1000 / CALLS_PER_SECOND);
    });
    const settled = await Promise.all(answers);
    // A refusal names its run id (X-Request-Id), so the test can check that it is never listed.
    const refusal = (answer: (typeof settled)[number]) => answer.status === 503 && answer.body.includes('run-store-unavailable') && answer.runId !== null;
    return {
      accepted: settled.filter((answer) => answer.status === 202).map((answer) => answer.runId!),
      refused: settled.filter(refusal).map((answer) => answer.runId!),
      unexpected: settled.filter((answer) => answer.status !== 202 && !refusal(answer)).map((answer) => `${answer.status} ${answer.body}`),
    };
  }

  /** Every run of the App, page by page through the management API. */
  async function listAll(): Promise<Map<string, RunRecord>> {
    const runs = new Map<string, RunRecord>();
    let nextToken: string | null = null;
    do {
      const query = new URLSearchParams({ pageSize: String(MAX_PAGE_SIZE), ...(nextToken === null ? {} : { nextToken }) });
      const response = await fetch(`${cluster.operatorUrl}/v2/projects/${app.namespace}/apps/hello/runs?${query}`, { headers: { authorization: `Bearer ${readerToken}` } });
      if (response.status !== 200) throw new Error(`listing the runs answered ${response.status}: ${await response.text()}`);
      const page = (await response.json()) as { items: RunRecord[]; nextToken: string | null };
      for (const run of page.items) runs.set(run.id, run);
      nextToken = page.nextToken;
    } while (nextToken !== null);
    return runs;
  }

  /** Waits until every run of `ids` is listed finished (only runs made during this test's outage can satisfy it); resolves with the listing. */
  function listedFinished(ids: string[]): Promise<Map<string, RunRecord>> {
    return waitFor(
      async () => {
        const runs = await listAll();
        return ids.every((id) => runs.get(id)?.status === 'success') && runs;
      },
      { what: `the ${ids.length} runs accepted during the outage listed as succeeded`, timeoutMs: SETTLE_TIMEOUT_MS, intervalMs: 500 },
    );
  }

  it(`accepts async calls while the API server is stopped for ${OUTAGE_MS / 1000} s, and lists every one afterwards in its final state`, async () => {
    await cluster.controlPlane.stopApiServer();
    let calls: OutageCalls;
    try {
      await expect(fetch(`${cluster.controlPlane.server}/readyz`), 'the API server is down').rejects.toThrow();
      calls = await callDuring(OUTAGE_MS);
    } finally {
      await cluster.controlPlane.startApiServer();
    }
    expect(calls.unexpected, 'every call answered 202').toEqual([]);
    expect(calls.refused, 'no call refused: the API server is not on the way').toEqual([]);
    expect(calls.accepted).toHaveLength(Math.round((OUTAGE_MS / 1000) * CALLS_PER_SECOND));
    const runs = await listedFinished(calls.accepted);
    for (const id of calls.accepted) expect(runs.get(id), `run ${id}`).toMatchObject({ id, async: true, status: 'success', functionName: 'run' });
  });

  it(`accepts async calls while PostgreSQL is stopped for ${OUTAGE_MS / 1000} s, lists every one afterwards in its final state, and none it refused`, async () => {
    await postgres.halt();
    let calls: OutageCalls;
    try {
      const probe = new pg.Client({ connectionString: postgres.dsn() });
      await expect(probe.connect(), 'PostgreSQL is down').rejects.toThrow();
      calls = await callDuring(OUTAGE_MS);
    } finally {
      await postgres.resume();
    }
    expect(calls.unexpected, 'every call answered 202, or 503 run-store-unavailable at the shipper’s bound').toEqual([]);
    // At this rate the bound (10,000 runs waiting) is far: a refusal would be counted here, and must not be listed.
    console.log(`PostgreSQL outage: ${calls.accepted.length} async calls accepted, ${calls.refused.length} refused at the shipper's bound`);
    expect(calls.accepted.length + calls.refused.length).toBe(Math.round((OUTAGE_MS / 1000) * CALLS_PER_SECOND));
    const runs = await listedFinished(calls.accepted);
    for (const id of calls.accepted) expect(runs.get(id), `run ${id}`).toMatchObject({ id, async: true, status: 'success', functionName: 'run' });
    for (const id of calls.refused) expect(runs.has(id), `refused run ${id} listed`).toBe(false);
  });
});
