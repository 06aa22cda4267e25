// How fast the operator answers the list API: 10,000 runs of one app in 5 RunLogs (2,000 each, about the 1 MiB
// a RunLog status may hold), paged through the operator's own HTTP server — its RunLog watch, cache, token check
// (cached) and fastify — on 127.0.0.1. management/runlog-source-latency.test.ts measures the cache alone.
// Prints p50/p99 and asserts what the pages hold; timing is reported, never asserted (it belongs in bench/).
import { loadavg } from 'node:os';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RUNS_ACCESS } from '../management/kube-auth.ts';
import { appRuns, newestFirst, onReplica } from '../management/runlog-source-test-kit.ts';
import type { RunRecord } from '../sidecar/runs/record.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { waitFor } from '../test/support/wait.ts';
import type { Operator } from './main.ts';
import { pythonSpec } from './test-support/apps.ts';
import { STATE_TIMEOUT_MS, createApp, createNamespace, prepareCluster, testOperator, type TestCluster } from './test-support/cluster.ts';
import { createPod, writeRunLog } from './test-support/runlogs.ts';

const PROJECT = 'team-a';
const APP = 'hello';
const REPLICAS = ['a', 'b', 'c', 'd', 'e'].map((suffix) => `hello-7d9c-${suffix.repeat(5)}`);
const RUNS = 10_000;
const TOKEN = 'bench.eyJ0b2tlbiI6ImJlbmNoIn0.sig';

let cluster: TestCluster<KubeApiServer>;
let operator: Operator;
let base: string;
let runs: RunRecord[];

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  await createNamespace(cluster.api, PROJECT);
  await createApp(cluster.api, PROJECT, APP, pythonSpec());
  cluster.server.tokens.set(TOKEN, { username: 'system:serviceaccount:team-a:bench' });
  cluster.server.allow({ user: 'system:serviceaccount:team-a:bench', namespace: PROJECT, ...RUNS_ACCESS });
  runs = appRuns({ namespace: PROJECT, appName: APP, count: RUNS, replicas: REPLICAS });
  // Running pods: the RunLogs are their sidecars', which the operator leaves alone.
  for (const replica of REPLICAS) {
    await createPod(cluster.api, PROJECT, replica, APP);
    await writeRunLog(cluster.api, PROJECT, replica, APP, onReplica(runs, replica));
  }
  operator = testOperator(cluster);
  operator.start();
  const url = await operator.listen();
  base = `${url}/v2/projects/${PROJECT}/apps/${APP}/runs`;
}, 120_000);

afterAll(async () => {
  await operator?.stop();
  await cluster?.close();
});

interface Walk {
  ids: string[];
  latenciesMs: number[];
}

/** Every page of a listing, following nextToken; each request timed from send to the last byte of the body. */
async function walk(query: string): Promise<Walk> {
  const ids: string[] = [];
  const latenciesMs: number[] = [];
  let nextToken: string | null = null;
  do {
    const url: string = `${base}?${query}${nextToken === null ? '' : `&nextToken=${nextToken}`}`;
    const started = performance.now();
    const response = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
    const body = (await response.json()) as { items: RunRecord[]; nextToken: string | null };
    latenciesMs.push(performance.now() - started);
    expect(response.status).toBe(200);
    ids.push(...body.items.map((run) => run.id));
    nextToken = body.nextToken;
  } while (nextToken !== null);
  return { ids, latenciesMs };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

it('pages through 10,000 runs in 5 RunLogs through the operator’s HTTP server (prints p50/p99)', async () => {
  const newest = newestFirst(runs).map((run) => run.id);
  // The operator's cache is filled by its watch: wait until it holds every run.
  await waitFor(async () => (await walk('pageSize=500')).ids.length === RUNS, { timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100, what: `the operator to cache all ${RUNS} runs` });

  const lines: string[] = [];
  const defaultPages: number[] = [];
  for (const [label, query, expected] of [
    ['pageSize=50, every page, 3 walks', 'pageSize=50', newest],
    ['pageSize=500, every page, 3 walks', 'pageSize=500', newest],
    ['asyncOnly, status=failure, pageSize=50, 3 walks', 'asyncOnly=true&status=failure&pageSize=50', newestFirst(runs.filter((run) => run.async && run.status === 'failure')).map((run) => run.id)],
  ] as const) {
    const latencies: number[] = [];
    for (let round = 0; round < 3; round++) {
      const result = await walk(query);
      expect(result.ids).toEqual(expected);
      latencies.push(...result.latenciesMs);
    }
    if (query === 'pageSize=50') defaultPages.push(...latencies);
    const format = (ms: number): string => `${ms.toFixed(2)} ms`;
    lines.push(`${label.padEnd(48)} n=${String(latencies.length).padStart(4)}  p50 ${format(percentile(latencies, 50))}  p99 ${format(percentile(latencies, 99))}`);
  }
  process.stdout.write(`\nlist API latency through the operator, ${RUNS} runs in ${REPLICAS.length} RunLogs (load average ${loadavg()[0]!.toFixed(1)})\n${lines.map((line) => `  ${line}`).join('\n')}\n`);
});
