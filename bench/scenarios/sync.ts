// Sync runs of the trivial function through the sidecar as in a pod (runs recorded in its RunLog), against the
// same runtime behind nginx and called directly; the pod's sidecar of a cluster with a results store and the
// SQLite sidecar (as outside a cluster) beside them, with targets of their own. wrk for all (microsecond latencies). At 32 connections the load is closed-loop, so a p50
// there is mostly queueing (connections ÷ throughput); the latency the sidecar adds is read at 1 connection.
import { runWrk } from '../load/wrk.ts';
import type { LoadResult } from '../load/result.ts';
import type { BenchProcess } from '../processes.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { runUrl, type Stack } from '../stack.ts';
import { waitUntilCollected } from './idle.ts';
import { inTurn, type Settings } from './settings.ts';

const SCENARIO = 'sync run, trivial function';
export const BODY = '{"name":"bench"}';

export const SYNC_FIGURES: FigureSpec[] = [
  { key: 'sync.throughputRatio', scenario: SCENARIO, label: 'sidecar ÷ nginx throughput, 32 connections', unit: '×', decimals: 2, target: { op: '>=', value: 0.6 } },
  { key: 'sync.p50AddedMs', scenario: SCENARIO, label: 'p50 added over direct, 1 connection (sidecar − direct)', unit: 'ms', decimals: 3, target: { op: '<=', value: 0.5 } },
  { key: 'sync.p99Ratio', scenario: SCENARIO, label: 'sidecar ÷ nginx p99, 32 connections', unit: '×', decimals: 2, target: { op: '<=', value: 2 } },
  { key: 'sync.sidecarRps', scenario: SCENARIO, label: 'sidecar runs/s, 32 connections', unit: 'req/s', decimals: 0 },
  { key: 'sync.nginxRps', scenario: SCENARIO, label: 'nginx requests/s, 32 connections', unit: 'req/s', decimals: 0 },
  { key: 'sync.directRps', scenario: SCENARIO, label: 'direct requests/s, 32 connections', unit: 'req/s', decimals: 0 },
  { key: 'sync.sqliteRatio', scenario: SCENARIO, label: 'SQLite sidecar ÷ nginx throughput, 32 connections (`--run-store sqlite`, as outside a cluster)', unit: '×', decimals: 2, target: { op: '>=', value: 0.6 } },
  { key: 'sync.sqliteP99Ratio', scenario: SCENARIO, label: 'SQLite sidecar ÷ nginx p99, 32 connections', unit: '×', decimals: 2, target: { op: '<=', value: 2 } },
  { key: 'sync.sqliteRps', scenario: SCENARIO, label: 'SQLite sidecar runs/s, 32 connections', unit: 'req/s', decimals: 0 },
  { key: 'sync.resultsRatio', scenario: SCENARIO, label: 'results sidecar ÷ nginx throughput, 32 connections (`--run-store results`, as in a cluster with a results store)', unit: '×', decimals: 2, target: { op: '>=', value: 0.6 } },
  { key: 'sync.resultsP99Ratio', scenario: SCENARIO, label: 'results sidecar ÷ nginx p99, 32 connections', unit: '×', decimals: 2, target: { op: '<=', value: 2 } },
  { key: 'sync.resultsRps', scenario: SCENARIO, label: 'results sidecar runs/s, 32 connections', unit: 'req/s', decimals: 0 },
  { key: 'sync.resultsP99Ms', scenario: SCENARIO, label: 'results sidecar p99, 32 connections', unit: 'ms', decimals: 2 },
  { key: 'sync.resultsCpuUs', scenario: SCENARIO, label: 'results sidecar CPU per run, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.floorRatio', scenario: SCENARIO, label: 'floor ÷ nginx throughput: node:http + the same runtime client, nothing else', unit: '×', decimals: 2 },
  { key: 'sync.floorRps', scenario: SCENARIO, label: 'floor requests/s, 32 connections', unit: 'req/s', decimals: 0 },
  { key: 'sync.sidecarP99Ms', scenario: SCENARIO, label: 'sidecar p99, 32 connections', unit: 'ms', decimals: 2 },
  { key: 'sync.sqliteP99Ms', scenario: SCENARIO, label: 'SQLite sidecar p99, 32 connections', unit: 'ms', decimals: 2 },
  { key: 'sync.nginxP99Ms', scenario: SCENARIO, label: 'nginx p99, 32 connections', unit: 'ms', decimals: 2 },
  { key: 'sync.sidecarP50OneMs', scenario: SCENARIO, label: 'sidecar p50, 1 connection', unit: 'ms', decimals: 3 },
  { key: 'sync.nginxP50OneMs', scenario: SCENARIO, label: 'nginx p50, 1 connection', unit: 'ms', decimals: 3 },
  { key: 'sync.directP50OneMs', scenario: SCENARIO, label: 'direct p50, 1 connection', unit: 'ms', decimals: 3 },
  { key: 'sync.sidecarCpuUs', scenario: SCENARIO, label: 'sidecar CPU per run, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.sqliteCpuUs', scenario: SCENARIO, label: 'SQLite sidecar CPU per run, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.kubeApiCpuUs', scenario: SCENARIO, label: 'in-memory API server CPU per sidecar run (its RunLog writes; elsewhere in a cluster), 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.nginxCpuUs', scenario: SCENARIO, label: 'nginx CPU per request, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.floorCpuUs', scenario: SCENARIO, label: 'floor CPU per request, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.runtimeCpuUs', scenario: SCENARIO, label: 'runtime CPU per call, direct, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.runtimeBehindNginxCpuUs', scenario: SCENARIO, label: 'runtime CPU per call behind nginx, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.runtimeBehindSidecarCpuUs', scenario: SCENARIO, label: 'runtime CPU per call behind the sidecar, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.runtimeBehindFloorCpuUs', scenario: SCENARIO, label: 'runtime CPU per call behind the floor proxy, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'sync.errors', scenario: SCENARIO, label: 'errors and non-2xx answers', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
];

export async function measureSync(stack: Stack, settings: Settings, round: number): Promise<RoundFigures> {
  const targets = {
    direct: { url: `${stack.runtime.url}/run`, proxy: null },
    nginx: { url: runUrl(stack.nginx, 'run'), proxy: stack.nginx.process },
    sidecar: { url: runUrl(stack.sidecar, 'run'), proxy: stack.sidecar.process },
    sqlite: { url: runUrl(stack.sqliteSidecar, 'run'), proxy: stack.sqliteSidecar.process },
    results: { url: runUrl(stack.resultsSidecar, 'run'), proxy: stack.resultsSidecar.process },
    floor: { url: runUrl(stack.floorProxy, 'run'), proxy: stack.floorProxy.process },
  };
  const loaded: Partial<Record<keyof typeof targets, { result: LoadResult; proxyCpuUs: number; runtimeCpuUs: number; kubeApiCpuUs: number }>> = {};
  const unloaded: Partial<Record<keyof typeof targets, LoadResult>> = {};
  for (const name of inTurn(['direct', 'nginx', 'sidecar', 'sqlite', 'results', 'floor'] as const, round)) {
    const { url, proxy } = targets[name];
    const cpu = cpuMeter(proxy, stack.runtime.process, stack.kubeApi.process);
    const result = await runWrk({ url, connections: 32, durationS: settings.durationS, body: BODY });
    loaded[name] = { result, ...cpu.perRequestUs(result.requests) };
    // Its records still on their way to the collector (whose PostgreSQL shares these two cores) would load the next one's.
    if (name === 'results') await waitUntilCollected(stack.resultsSidecar.adminUrl);
  }
  for (const name of inTurn(['direct', 'nginx', 'sidecar'] as const, round)) {
    unloaded[name] = await runWrk({ url: targets[name].url, connections: 1, durationS: settings.latencyDurationS, body: BODY });
  }
  const { direct, nginx, sidecar, sqlite, results, floor } = loaded as Required<typeof loaded>;
  const one = unloaded as Required<typeof unloaded>;
  const p50 = (result: LoadResult): number => result.latencyMs!.p50;
  const p99 = (result: LoadResult): number => result.latencyMs!.p99;
  return {
    'sync.throughputRatio': sidecar.result.perSecond / nginx.result.perSecond,
    'sync.p50AddedMs': p50(one.sidecar) - p50(one.direct),
    'sync.p99Ratio': p99(sidecar.result) / p99(nginx.result),
    'sync.sidecarRps': sidecar.result.perSecond,
    'sync.nginxRps': nginx.result.perSecond,
    'sync.directRps': direct.result.perSecond,
    'sync.sqliteRatio': sqlite.result.perSecond / nginx.result.perSecond,
    'sync.sqliteP99Ratio': p99(sqlite.result) / p99(nginx.result),
    'sync.sqliteRps': sqlite.result.perSecond,
    'sync.resultsRatio': results.result.perSecond / nginx.result.perSecond,
    'sync.resultsP99Ratio': p99(results.result) / p99(nginx.result),
    'sync.resultsRps': results.result.perSecond,
    'sync.resultsP99Ms': p99(results.result),
    'sync.resultsCpuUs': results.proxyCpuUs,
    'sync.floorRatio': floor.result.perSecond / nginx.result.perSecond,
    'sync.floorRps': floor.result.perSecond,
    'sync.sidecarP99Ms': p99(sidecar.result),
    'sync.sqliteP99Ms': p99(sqlite.result),
    'sync.nginxP99Ms': p99(nginx.result),
    'sync.sidecarP50OneMs': p50(one.sidecar),
    'sync.nginxP50OneMs': p50(one.nginx),
    'sync.directP50OneMs': p50(one.direct),
    'sync.sidecarCpuUs': sidecar.proxyCpuUs,
    'sync.sqliteCpuUs': sqlite.proxyCpuUs,
    'sync.kubeApiCpuUs': sidecar.kubeApiCpuUs,
    'sync.nginxCpuUs': nginx.proxyCpuUs,
    'sync.floorCpuUs': floor.proxyCpuUs,
    'sync.runtimeCpuUs': direct.runtimeCpuUs,
    'sync.runtimeBehindNginxCpuUs': nginx.runtimeCpuUs,
    'sync.runtimeBehindSidecarCpuUs': sidecar.runtimeCpuUs,
    'sync.runtimeBehindFloorCpuUs': floor.runtimeCpuUs,
    'sync.errors': [direct, nginx, sidecar, sqlite, results, floor].reduce((sum, run) => sum + run.result.errors, 0) + Object.values(one).reduce((sum, result) => sum + result.errors, 0),
  };
}

/** CPU the proxy (if any), the runtime and the API server (the RunLog's writes) spend during a load, per request. */
export function cpuMeter(proxy: BenchProcess | null, runtime: BenchProcess, kubeApi: BenchProcess) {
  const proxyStart = proxy?.cpuMs() ?? 0;
  const runtimeStart = runtime.cpuMs();
  const kubeApiStart = kubeApi.cpuMs();
  return {
    perRequestUs(requests: number) {
      return {
        proxyCpuUs: proxy ? ((proxy.cpuMs() - proxyStart) * 1000) / requests : Number.NaN,
        runtimeCpuUs: ((runtime.cpuMs() - runtimeStart) * 1000) / requests,
        kubeApiCpuUs: ((kubeApi.cpuMs() - kubeApiStart) * 1000) / requests,
      };
    },
  };
}
