// What the tests of the management API in cluster mode share: the in-memory API server with the Runlet CRDs
// installed (fake-cluster.ts), Apps and RunLogs written as the operator and the sidecars write them, run records
// in creation order, and a RunLogSource on the server.
import { v7 as uuidv7 } from 'uuid';
import type { RunRecord, RunStatus } from '../../crds/run-record-schema.ts';
import { pythonApp } from './crd-fixtures.ts';
import { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer, type KubeApiServerOptions } from '../kube/index.ts';
import { RunLogSource, type RunLogSourceOptions } from '../../management/runlog-source.ts';
import { prepareCluster, type TestCluster as FakeCluster } from './fake-cluster.ts';
import { testLogger } from './logger.ts';
import { kubePathOf } from './kube-path.ts';

export const PROJECT = 'team-a';
export const OTHER_PROJECT = 'team-b';
/** Generous for a loaded 2-core machine: only a failing test waits this long. */
export const STATE_TIMEOUT_MS = 20_000;

const GROUP_PATH = '/apis/runlet.dev/v1alpha1';

export type TestCluster = FakeCluster<KubeApiServer>;

/** The fake cluster (fake-cluster.ts) with the two projects' namespaces. */
export async function startTestCluster(options: KubeApiServerOptions = {}): Promise<TestCluster> {
  return prepareCluster(await startKubeApiServer({ namespaces: [PROJECT, OTHER_PROJECT], ...options }));
}

/** A source on the test server with quick retries; started, and synced before it is returned. */
export async function startSource(cluster: { server: KubeApiServer }, options: Partial<RunLogSourceOptions> = {}): Promise<RunLogSource & { api: KubeApi }> {
  const api = options.api ?? new KubeApi(await cluster.server.credentials());
  const source = new RunLogSource({ api, logger: testLogger(), backoff: { initialMs: 20, maxMs: 200 }, ...options });
  source.start();
  await source.ready();
  return Object.assign(source, { api });
}

export async function createApp(api: KubeApi, namespace: string, name: string): Promise<void> {
  const app = pythonApp();
  app.metadata = { name, namespace };
  await api.create(kubePathOf(`${GROUP_PATH}/namespaces/${namespace}/apps`), app as KubeObject);
}

/** Writes a RunLog as a replica's sidecar does (one writer for every kit: runlogs.ts). */
export { writeRunLog } from './runlogs.ts';

export async function deleteRunLog(api: KubeApi, namespace: string, name: string): Promise<void> {
  await api.delete(kubePathOf(`${GROUP_PATH}/namespaces/${namespace}/runlogs/${name}`));
}

const STATUSES: RunStatus[] = ['success', 'failure', 'success', 'running', 'cancelled', 'success', 'pending'];

/**
 * `count` runs of an app in creation order (oldest first), as `replicas` replicas would have run them turn by
 * turn: run i on replica i % replicas. Statuses cycle through every status; every third run is async.
 */
export function appRuns(options: { namespace?: string; appName: string; count: number; replicas: string[] }): RunRecord[] {
  const { namespace = PROJECT, appName, count, replicas } = options;
  const runs: RunRecord[] = [];
  for (let i = 0; i < count; i++) {
    const status = STATUSES[i % STATUSES.length]!;
    const async = i % 3 === 0;
    runs.push(runRecord({ projectId: namespace, appName, replica: replicas[i % replicas.length]!, status, async, mode: async ? 'async' : 'sync' }));
  }
  return runs;
}

/** One run record with a fresh id (UUID v7: newer than every id made before in this process). */
export function runRecord(overrides: Partial<RunRecord> & Pick<RunRecord, 'appName' | 'replica'>): RunRecord {
  const status = overrides.status ?? 'success';
  const finished = status !== 'pending' && status !== 'running';
  const now = new Date().toISOString();
  return {
    id: uuidv7(),
    projectId: PROJECT,
    functionName: 'run',
    method: 'POST',
    mode: 'sync',
    async: false,
    status,
    statusCode: finished ? (status === 'failure' ? 500 : 200) : null,
    error: status === 'failure' ? { type: 'ValueError', message: 'bad input' } : null,
    reason: null,
    createdAt: now,
    startedAt: status === 'pending' ? null : now,
    completedAt: finished ? now : null,
    queueTimeMs: status === 'pending' ? null : 1,
    runtimeMs: finished ? 12 : null,
    responseTimeMs: finished ? 13.5 : null,
    webhook: null,
    ...overrides,
  };
}

export function onReplica(runs: RunRecord[], replica: string): RunRecord[] {
  return runs.filter((run) => run.replica === replica);
}

/** Newest first, as the list API answers. */
export function newestFirst(runs: RunRecord[]): RunRecord[] {
  return [...runs].sort((a, b) => (a.id < b.id ? 1 : -1));
}

export interface PageWalk {
  ids: string[];
  latenciesMs: number[];
}

/** Every page of a listing at `runsUrl`, following nextToken; each request timed from send to the last byte. */
export async function walkRunPages(runsUrl: string, query: string, token: string): Promise<PageWalk> {
  const ids: string[] = [];
  const latenciesMs: number[] = [];
  let nextToken: string | null = null;
  do {
    const url: string = `${runsUrl}?${query}${nextToken === null ? '' : `&nextToken=${nextToken}`}`;
    const started = performance.now();
    const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    const body = (await response.json()) as { items: RunRecord[]; nextToken: string | null };
    latenciesMs.push(performance.now() - started);
    if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${JSON.stringify(body)}`);
    ids.push(...body.items.map((run) => run.id));
    nextToken = body.nextToken;
  } while (nextToken !== null);
  return { ids, latenciesMs };
}

/** `rounds` walks of the same listing: the ids of each walk, and every request's latency. */
export async function walkRunPagesRepeatedly(runsUrl: string, query: string, token: string, rounds: number): Promise<{ walks: string[][]; latenciesMs: number[] }> {
  const walks: string[][] = [];
  const latenciesMs: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const result = await walkRunPages(runsUrl, query, token);
    walks.push(result.ids);
    latenciesMs.push(...result.latenciesMs);
  }
  return { walks, latenciesMs };
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** One printed line of a latency measurement: count, p50 and p99. */
/** Throws unless a walk of pages listed exactly the `expected` run ids, in order (what a benchmark's pages must hold). */
export function expectSameIds(ids: readonly string[], expected: readonly string[], what: string): void {
  const first = ids.findIndex((id, index) => id !== expected[index]);
  if (first === -1 && ids.length === expected.length) return;
  throw new Error(`${what}: listed ${ids.length} runs, expected ${expected.length}; first difference at ${first === -1 ? ids.length : first}`);
}

export function latencySummary(label: string, latenciesMs: number[]): string {
  const format = (ms: number): string => `${ms.toFixed(2)} ms`;
  return `${label.padEnd(48)} n=${String(latenciesMs.length).padStart(4)}  p50 ${format(percentile(latenciesMs, 50))}  p99 ${format(percentile(latenciesMs, 99))}`;
}
