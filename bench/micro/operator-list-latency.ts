// How fast the operator answers the list API: 10,000 runs of one app in 5 RunLogs (2,000 each, about the 1 MiB
// a RunLog status may hold), paged through the operator's own HTTP server — its RunLog watch, cache, token check
// (cached) and fastify — on 127.0.0.1. runlog-cache-list-latency.ts measures the cache alone. Prints p50/p99,
// and fails when a page holds other runs than it should. Not part of `make test` or `make bench`:
//
//   npm run bench:operator-list
import { loadavg } from 'node:os';
import { RUNS_ACCESS } from '../../management/kube-auth.ts';
import { appRuns, expectSameIds, latencySummary, newestFirst, onReplica, walkRunPages, walkRunPagesRepeatedly } from '../../test/support/runlog-source-kit.ts';
import { startKubeApiServer, type KubeApiServer } from '../../test/kube/index.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { Operator } from '../../operator/main.ts';
import { pythonSpec } from '../../test/support/operator-apps.ts';
import { STATE_TIMEOUT_MS, createApp, createNamespace, prepareCluster, testOperator, type TestCluster } from '../../test/support/fake-cluster.ts';
import { createPod, writeRunLog } from '../../test/support/runlogs.ts';

const PROJECT = 'team-a';
const APP = 'hello';
const REPLICAS = ['a', 'b', 'c', 'd', 'e'].map((suffix) => `hello-7d9c-${suffix.repeat(5)}`);
const RUNS = 10_000;
const TOKEN = 'bench.eyJ0b2tlbiI6ImJlbmNoIn0.sig';

let cluster: TestCluster<KubeApiServer> | undefined;
let operator: Operator | undefined;
try {
  cluster = await prepareCluster(await startKubeApiServer());
  await createNamespace(cluster.api, PROJECT);
  await createApp(cluster.api, PROJECT, APP, pythonSpec());
  cluster.server.tokens.set(TOKEN, { username: 'system:serviceaccount:team-a:bench' });
  cluster.server.allow({ user: 'system:serviceaccount:team-a:bench', namespace: PROJECT, ...RUNS_ACCESS });
  const runs = appRuns({ namespace: PROJECT, appName: APP, count: RUNS, replicas: REPLICAS });
  // Running pods: the RunLogs are their sidecars', which the operator leaves alone.
  for (const replica of REPLICAS) {
    await createPod(cluster.api, PROJECT, replica, APP);
    await writeRunLog(cluster.api, PROJECT, replica, APP, onReplica(runs, replica));
  }
  operator = testOperator(cluster);
  operator.start();
  const url = await operator.listen();
  const base = `${url}/v2/projects/${PROJECT}/apps/${APP}/runs`;

  const newest = newestFirst(runs).map((run) => run.id);
  // The operator's cache is filled by its watch: wait until it holds every run.
  await waitFor(async () => (await walkRunPages(base, 'pageSize=500', TOKEN)).ids.length === RUNS, { timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100, what: `the operator to cache all ${RUNS} runs` });

  const lines: string[] = [];
  for (const [label, query, expected] of [
    ['pageSize=50, every page, 3 walks', 'pageSize=50', newest],
    ['pageSize=500, every page, 3 walks', 'pageSize=500', newest],
    ['asyncOnly, status=failure, pageSize=50, 3 walks', 'asyncOnly=true&status=failure&pageSize=50', newestFirst(runs.filter((run) => run.async && run.status === 'failure')).map((run) => run.id)],
  ] as const) {
    const { walks, latenciesMs } = await walkRunPagesRepeatedly(base, query, TOKEN, 3);
    for (const ids of walks) expectSameIds(ids, expected, label);
    lines.push(latencySummary(label, latenciesMs));
  }
  process.stdout.write(`list API latency through the operator, ${RUNS} runs in ${REPLICAS.length} RunLogs (load average ${loadavg()[0]!.toFixed(1)})\n${lines.map((line) => `  ${line}`).join('\n')}\n`);
} finally {
  await operator?.stop();
  await cluster?.close();
}
