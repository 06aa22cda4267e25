// Two operators, one lease: one reconciles, the other stands by (serving health and metrics) and takes
// over when the first stops — at once when it released the lease, after the lease expired when it did not.
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { waitFor } from '../test/support/wait.ts';
import type { KubeObject } from './kube-api.ts';
import type { Operator } from './main.ts';
import { pythonSpec } from './test-support/apps.ts';
import {
  STATE_TIMEOUT_MS,
  createApp,
  createCodeConfigMap,
  createNamespace,
  isReadyAtGeneration,
  paths,
  prepareCluster,
  testOperator,
  waitForApp,
  type TestCluster,
} from './test-support/cluster.ts';

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
    await waitForApp(cluster.api, 'team', 'one', isReadyAtGeneration, 'reconciled by the leader');
    expect(second.isLeader).toBe(false);
    expect(await reconcileCount(second)).toBe(0);
    expect(second.apps.hasApp('team', 'one')).toBe(true);
    expect((await lease())?.spec.holderIdentity).toBe('operator-a');

    await first.stop();
    operators.splice(operators.indexOf(first), 1);
    // Released: operator-b need not wait for the lease to expire.
    await waitFor(() => second.isLeader, { timeoutMs: STATE_TIMEOUT_MS, what: 'operator-b to take over' });
    await createApp(cluster.api, 'team', 'two', pythonSpec());
    await waitForApp(cluster.api, 'team', 'two', isReadyAtGeneration, 'reconciled by the new leader');
    expect(await reconcileCount(second)).toBeGreaterThan(0);
    const taken = await lease();
    expect(taken?.spec.holderIdentity).toBe('operator-b');
    expect(taken?.spec.leaseTransitions).toBe(1);
  });

  it('takes over a lease its holder stopped renewing, once it has expired', async () => {
    await setUp();
    // A leader that crashed without releasing: its lease stays, unrenewed.
    const renewTime = new Date(Date.now() - 60_000).toISOString().replace('Z', '000Z');
    await cluster.api.create('/apis/coordination.k8s.io/v1/namespaces/default/leases', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'runlet-operator' },
      spec: { holderIdentity: 'crashed', leaseDurationSeconds: 1, renewTime, acquireTime: renewTime, leaseTransitions: 4 },
    } as Lease);
    const operator = operatorNamed('operator-c');
    await createApp(cluster.api, 'team', 'orphaned', pythonSpec());

    await waitFor(() => operator.isLeader, { timeoutMs: STATE_TIMEOUT_MS, what: 'operator-c to take the expired lease' });
    await waitForApp(cluster.api, 'team', 'orphaned', isReadyAtGeneration, 'reconciled after the takeover');
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
});
