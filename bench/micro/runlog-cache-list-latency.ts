// How fast the list API answers from the RunLog cache: 10,000 runs of one app in 5 RunLogs (2,000 each, about
// the 1 MiB a RunLog status may hold), paged through the real plugin over HTTP on 127.0.0.1 with a cached
// token; then the cache alone (listRuns in process) and an index update. Prints p50/p99, and fails when a page
// holds other runs than it should. Not part of `make test` or `make bench`:
//
//   npm run bench:runlog-cache-list
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { KubeApi } from '../../kube/client.ts';
import { RUNS_ACCESS, kubeAuthenticator } from '../../management/kube-auth.ts';
import { managementApi } from '../../management/routes.ts';
import { RunLogIndex, appKey } from '../../management/runlog-source-index.ts';
import type { RunLogSource } from '../../management/runlog-source.ts';
import {
  PROJECT,
  appRuns,
  createApp,
  expectSameIds,
  latencySummary,
  newestFirst,
  onReplica,
  startSource,
  startTestCluster,
  walkRunPages,
  walkRunPagesRepeatedly,
  writeRunLog,
  type TestCluster,
} from '../../test/support/runlog-source-kit.ts';
import { testLogger } from '../../test/support/logger.ts';

const APP = 'hello';
const REPLICAS = ['a', 'b', 'c', 'd', 'e'].map((suffix) => `hello-7d9c-${suffix.repeat(5)}`);
const RUNS = 10_000;
const TOKEN = 'bench.eyJ0b2tlbiI6ImJlbmNoIn0.sig';

let cluster: TestCluster | undefined;
let source: (RunLogSource & { api: KubeApi }) | undefined;
let server: FastifyInstance | undefined;
try {
  cluster = await startTestCluster();
  await createApp(cluster.api, PROJECT, APP);
  cluster.server.tokens.set(TOKEN, { username: 'system:serviceaccount:team-a:bench' });
  cluster.server.allow({ user: 'system:serviceaccount:team-a:bench', namespace: PROJECT, ...RUNS_ACCESS });
  const runs = appRuns({ appName: APP, count: RUNS, replicas: REPLICAS });
  for (const replica of REPLICAS) await writeRunLog(cluster.api, PROJECT, replica, APP, onReplica(runs, replica));
  const started = performance.now();
  source = await startSource(cluster);
  const syncMs = performance.now() - started;
  server = fastify({ loggerInstance: testLogger() as FastifyBaseLogger });
  await server.register(managementApi, { runs: source, apps: source, appList: () => [], authenticate: kubeAuthenticator({ api: source.api }) });
  await server.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}/v2/projects/${PROJECT}/apps/${APP}/runs`;

  const newest = newestFirst(runs).map((run) => run.id);
  await walkRunPages(base, 'pageSize=50', TOKEN); // warm-up: JIT, connections, the token's decision cached

  const lines: string[] = [];
  for (const [label, query, expected] of [
    ['pageSize=50, every page, 3 walks', 'pageSize=50', newest],
    ['pageSize=500, every page, 3 walks', 'pageSize=500', newest],
    ['status=failure, pageSize=50, 3 walks', 'status=failure&pageSize=50', newestFirst(runs.filter((run) => run.status === 'failure')).map((run) => run.id)],
  ] as const) {
    const { walks, latenciesMs } = await walkRunPagesRepeatedly(base, query, TOKEN, 3);
    for (const ids of walks) expectSameIds(ids, expected, label);
    lines.push(latencySummary(`HTTP ${label}`, latenciesMs));
  }

  // The cache's own share, without HTTP: listRuns at random depths of the list.
  const direct: number[] = [];
  for (let i = 0; i < 2_000; i++) {
    const beforeId = i % 10 === 0 ? null : newest[Math.floor(Math.random() * newest.length)]!;
    const started = performance.now();
    await source.listRuns({ projectId: PROJECT, appName: APP, pageSize: 50, beforeId, asyncOnly: i % 2 === 0, status: null, functionName: null, createdAfter: null, createdBefore: null });
    direct.push(performance.now() - started);
  }
  lines.push(latencySummary('listRuns in process, pageSize=50, random cursor', direct));

  // A replica's write as the watch delivers it: 10 new runs in, its 10 oldest out, the other 1,990 rewritten.
  const index = new RunLogIndex();
  for (const replica of REPLICAS) index.putRunLog(`${PROJECT}/${replica}`, appKey(PROJECT, APP), newestFirst(onReplica(runs, replica)));
  const writer = REPLICAS[0]!;
  let held = newestFirst(onReplica(runs, writer));
  const updates: number[] = [];
  for (let i = 0; i < 50; i++) {
    const fresh = appRuns({ appName: APP, count: 10, replicas: [writer] });
    held = [...newestFirst(fresh), ...held.slice(0, -10)].map((run) => ({ ...run }));
    const started = performance.now();
    index.putRunLog(`${PROJECT}/${writer}`, appKey(PROJECT, APP), held);
    updates.push(performance.now() - started);
  }
  if (index.size !== RUNS) throw new Error(`the index holds ${index.size} runs, not ${RUNS}`);
  lines.push(latencySummary('index update: one RunLog of 2,000 runs rewritten', updates));

  process.stdout.write(`list API latency, ${RUNS} runs in ${REPLICAS.length} RunLogs (initial list and index: ${syncMs.toFixed(0)} ms; load average ${loadavg()[0]!.toFixed(1)})\n${lines.map((line) => `  ${line}`).join('\n')}\n`);
} finally {
  await server?.close();
  await source?.stop();
  await source?.api.close();
  await cluster?.close();
}
