// Two operators, one lease: one reconciles and looks after RunLogs, the other stands by (serving health, metrics
// and the management API) and takes over when the first stops — at once when it released the lease, after the
// lease expired when it did not.
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { waitFor } from '../test/support/wait.ts';
import { RUNS_ACCESS } from '../management/kube-auth.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { runRecord } from '../test/support/runlog-source-kit.ts';
import type { KubeObject } from '../kube/objects.ts';
import type { Operator } from './main.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import {
  STATE_TIMEOUT_MS,
  createApp,
  createCodeConfigMap,
  createNamespace,
  isAppliedAtGeneration,
  paths,
  prepareCluster,
  testOperator,
  waitForApp,
  type TestCluster,
} from '../test/support/fake-cluster.ts';
import { readRunLog, writeRunLog } from '../test/support/runlogs.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

interface Lease extends KubeObject {
  spec: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string; leaseTransitions?: number };
}

let cluster: TestCluster<KubeApiServer>;
const operators: Operator[] = [];

afterEach(async () => {
  await Promise.all(operators.splice(0).map((operator) => operator.stop()));
  await cluster.close();
});

function operatorNamed(identity: string): Operator {
  const operator = testOperator(cluster, { leaderElection: { identity } });
  operators.push(operator);
  operator.start();
  return operator;
}

async function runsLost(operator: Operator): Promise<number> {
  return (await operator.metrics.runsLost.get()).values.reduce((sum, value) => sum + value.value, 0);
}

async function reconcileCount(operator: Operator): Promise<number> {
  return (await operator.metrics.reconciles.get()).values.reduce((sum, value) => sum + value.value, 0);
}

async function lease(): Promise<Lease | undefined> {
  return cluster.api.find<Lease>(paths.lease('default', 'runlet-operator'));
}

async function setUp(): Promise<void> {
  cluster = await prepareCluster(await startKubeApiServer());
  await createNamespace(cluster.api, 'team');
  await createCodeConfigMap(cluster.api, 'team', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
}

describe('leader election', () => {
  it('only the leader reconciles; the standby takes over when the leader stops', async () => {
    await setUp();
    const first = operatorNamed('operator-a');
    await waitFor(() => first.isLeader, { timeoutMs: STATE_TIMEOUT_MS, what: 'operator-a to lead' });
    const second = operatorNamed('operator-b');
    await waitFor(() => second.ready, { timeoutMs: STATE_TIMEOUT_MS, what: 'the standby’s caches' });

    await createApp(cluster.api, 'team', 'one', pythonSpec());
    await waitForApp(cluster.api, 'team', 'one', isAppliedAtGeneration, 'reconciled by the leader');
    expect(second.isLeader).toBe(false);
    expect(await reconcileCount(second)).toBe(0);
    expect(second.apps.hasApp('team', 'one')).toBe(true);
    expect((await lease())?.spec.holderIdentity).toBe('operator-a');

    // RunLog upkeep is the leader's too: the runs of a pod that does not exist are closed by operator-a alone.
    const orphan = runRecord({ projectId: 'team', appName: 'one', replica: 'one-7d9c-aaaaa', status: 'running' });
    await writeRunLog(cluster.api, 'team', 'one-7d9c-aaaaa', 'one', [orphan]);
    await waitFor(async () => (await readRunLog(cluster.api, 'team', 'one-7d9c-aaaaa'))?.status?.runs[0]?.status === 'failure', { timeoutMs: STATE_TIMEOUT_MS, what: 'the orphan run closed' });
    await waitFor(async () => (await runsLost(first)) === 1, { timeoutMs: STATE_TIMEOUT_MS, what: 'operator-a to count the run it closed' });
    expect(await runsLost(second)).toBe(0);
    // The standby serves the management API from its own caches.
    cluster.server.tokens.set('reader.x.y', { username: 'reader' });
    cluster.server.allow({ user: 'reader', namespace: 'team', ...RUNS_ACCESS });
    const standbyUrl = await second.listen();
    const listed = await waitFor(async () => {
      const response = await fetch(`${standbyUrl}/v2/projects/team/apps/one/runs`, { headers: { authorization: 'Bearer reader.x.y' } });
      const items = response.status === 200 ? ((await response.json()) as { items: RunRecord[] }).items : [];
      return items[0]?.status === 'failure' && items;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'the closed run listed by the standby' });
    expect(listed.map((run) => [run.id, run.reason])).toEqual([[orphan.id, 'replica_lost']]);

    await first.stop();
    operators.splice(operators.indexOf(first), 1);
    // Released: operator-b need not wait for the lease to expire.
    await waitFor(() => second.isLeader, { timeoutMs: STATE_TIMEOUT_MS, what: 'operator-b to take over' });
    await createApp(cluster.api, 'team', 'two', pythonSpec());
    await waitForApp(cluster.api, 'team', 'two', isAppliedAtGeneration, 'reconciled by the new leader');
    expect(await reconcileCount(second)).toBeGreaterThan(0);
    const taken = await lease();
    expect(taken?.spec.holderIdentity).toBe('operator-b');
    expect(taken?.spec.leaseTransitions).toBe(1);
  });

  it('takes over a lease its holder stopped renewing, once it has expired', async () => {
    await setUp();
    // A leader that crashed without releasing: its lease stays, unrenewed.
    const renewTime = new Date(Date.now() - 60_000).toISOString().replace('Z', '000Z');
    await cluster.api.create(kubePathOf('/apis/coordination.k8s.io/v1/namespaces/default/leases'), {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'runlet-operator' },
      spec: { holderIdentity: 'crashed', leaseDurationSeconds: 1, renewTime, acquireTime: renewTime, leaseTransitions: 4 },
    } as Lease);
    const operator = operatorNamed('operator-c');
    await createApp(cluster.api, 'team', 'orphaned', pythonSpec());

    await waitFor(() => operator.isLeader, { timeoutMs: STATE_TIMEOUT_MS, what: 'operator-c to take the expired lease' });
    await waitForApp(cluster.api, 'team', 'orphaned', isAppliedAtGeneration, 'reconciled after the takeover');
    expect((await lease())?.spec).toMatchObject({ holderIdentity: 'operator-c', leaseTransitions: 5 });
  });

  it('a standby does not take a lease that is being renewed', async () => {
    await setUp();
    const first = operatorNamed('operator-a');
    await waitFor(() => first.isLeader, { timeoutMs: STATE_TIMEOUT_MS, what: 'operator-a to lead' });
    const second = operatorNamed('operator-b');
    // More than a lease duration (4 s) passes while operator-a keeps renewing: 25 renewals, 200 ms apart.
    const renewals = new Set<string>();
    await waitFor(async () => {
      const current = await lease();
      if (current?.spec.renewTime !== undefined) renewals.add(current.spec.renewTime);
      expect(current?.spec.holderIdentity).toBe('operator-a');
      expect(second.isLeader).toBe(false);
      return renewals.size >= 25;
    }, { timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100, what: '25 renewals by operator-a' });
  });

  it('a leader whose renewals hang steps down within the renew deadline and starts no reconcile afterwards', async () => {
    await setUp();
    const leader = operatorNamed('operator-a');
    await waitFor(() => leader.isLeader, { timeoutMs: STATE_TIMEOUT_MS, what: 'operator-a to lead' });
    await createApp(cluster.api, 'team', 'before', pythonSpec());
    await waitForApp(cluster.api, 'team', 'before', isAppliedAtGeneration, 'reconciled while leading');

    // Every Lease call from now on is left unanswered; the operator's own request timeout (30 s) is far
    // longer than the renew deadline (3 s), so only a per-call bound and the deadline timer end leadership.
    cluster.server.hangNext({ pathPattern: '/leases', times: Infinity });
    const hungAt = performance.now();
    await waitFor(() => !leader.isLeader, { timeoutMs: 3_000 + 2_000, what: 'operator-a to step down by its renew deadline (+2 s tolerance)' });
    expect(performance.now() - hungAt).toBeLessThan(3_000 + 2_000);

    const reconciles = await reconcileCount(leader);
    const requestsBefore = cluster.server.requests.length;
    await createApp(cluster.api, 'team', 'after', pythonSpec());
    await waitFor(() => leader.apps.hasApp('team', 'after'), { timeoutMs: STATE_TIMEOUT_MS, what: 'the new App in operator-a’s cache' });
    // The elector's next (hung) Lease call after the App arrived: the operator has handled its events since.
    const leaseCalls = cluster.server.countRequests({ pathPattern: '/leases' });
    await waitFor(() => cluster.server.countRequests({ pathPattern: '/leases' }) > leaseCalls, { timeoutMs: STATE_TIMEOUT_MS, what: 'another Lease call' });
    const childRequests = cluster.server.requests.slice(requestsBefore).filter((record) => /\/(deployments|services|configmaps)\b/.test(record.path));
    expect(childRequests).toEqual([]);
    expect(await reconcileCount(leader)).toBe(reconciles);
    expect(await cluster.api.find(paths.deployment('team', 'after'))).toBeUndefined();
  });
});
