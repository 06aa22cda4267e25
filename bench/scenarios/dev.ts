// Sync runs through `runlet dev` (the run interface, the management API and SQLite on one port, its own runtime
// of the trivial app) against nginx in front of the shared runtime and that runtime called directly. wrk for
// all three, 32 connections, back to back.
import { runWrk } from '../load/wrk.ts';
import type { LoadResult } from '../load/result.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { runUrl, type Stack } from '../stack.ts';
import { inTurn, type Settings } from './settings.ts';
import { BODY } from './sync.ts';

const SCENARIO = '`runlet dev`';

export const DEV_FIGURES: FigureSpec[] = [
  { key: 'dev.nginxRatio', scenario: SCENARIO, label: '`runlet dev` ÷ nginx, sync runs/s, 32 connections', unit: '×', decimals: 2, target: { op: '>=', value: 0.4 } },
  { key: 'dev.ratio', scenario: SCENARIO, label: '`runlet dev` ÷ direct runtime, sync runs/s, 32 connections', unit: '×', decimals: 2 },
  { key: 'dev.devRps', scenario: SCENARIO, label: '`runlet dev` sync runs/s', unit: 'req/s', decimals: 0 },
  { key: 'dev.nginxRps', scenario: SCENARIO, label: 'nginx requests/s', unit: 'req/s', decimals: 0 },
  { key: 'dev.directRps', scenario: SCENARIO, label: 'direct runtime requests/s', unit: 'req/s', decimals: 0 },
  { key: 'dev.cpuUs', scenario: SCENARIO, label: '`runlet dev` CPU per run, its runtime included, 32 connections', unit: 'µs', decimals: 0 },
  { key: 'dev.p99Ratio', scenario: SCENARIO, label: '`runlet dev` ÷ nginx p99, 32 connections', unit: '×', decimals: 2 },
  { key: 'dev.devP99Ms', scenario: SCENARIO, label: '`runlet dev` p99, 32 connections', unit: 'ms', decimals: 2 },
  { key: 'dev.errors', scenario: SCENARIO, label: 'errors and non-2xx answers', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
];

export async function measureDev(stack: Stack, settings: Settings, round: number): Promise<RoundFigures> {
  const urls = { dev: runUrl(stack.dev, 'run'), nginx: runUrl(stack.nginx, 'run'), direct: `${stack.runtime.url}/run` };
  const results: Partial<Record<keyof typeof urls, LoadResult>> = {};
  let devCpuMs = 0;
  for (const name of inTurn(['dev', 'nginx', 'direct'] as const, round)) {
    // The process and its direct children: `runlet dev` and the runtime it started.
    const cpuAtStart = stack.dev.process.cpuMs();
    results[name] = await runWrk({ url: urls[name], connections: 32, durationS: settings.durationS, body: BODY });
    if (name === 'dev') devCpuMs = stack.dev.process.cpuMs() - cpuAtStart;
  }
  const { dev, nginx, direct } = results as Required<typeof results>;
  return {
    'dev.nginxRatio': dev.perSecond / nginx.perSecond,
    'dev.ratio': dev.perSecond / direct.perSecond,
    'dev.devRps': dev.perSecond,
    'dev.nginxRps': nginx.perSecond,
    'dev.directRps': direct.perSecond,
    'dev.cpuUs': (devCpuMs * 1000) / dev.requests,
    'dev.p99Ratio': dev.latencyMs!.p99 / nginx.latencyMs!.p99,
    'dev.devP99Ms': dev.latencyMs!.p99,
    'dev.errors': dev.errors + nginx.errors + direct.errors,
  };
}
