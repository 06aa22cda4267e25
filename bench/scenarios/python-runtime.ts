// The Python runtime serving the trivial function directly, against the same function in FastAPI under
// uvicorn (one process each). wrk, 32 connections, back to back.
import { runWrk } from '../load/wrk.ts';
import type { LoadResult } from '../load/result.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import type { Stack } from '../stack.ts';
import { inTurn, type Settings } from './settings.ts';
import { BODY } from './sync.ts';

const SCENARIO = 'Python runtime, direct';

export const PYTHON_RUNTIME_FIGURES: FigureSpec[] = [
  { key: 'python.throughputRatio', scenario: SCENARIO, label: 'runtime ÷ uvicorn+FastAPI throughput, 32 connections', unit: '×', decimals: 2, target: { op: '>=', value: 3 } },
  { key: 'python.p99Ratio', scenario: SCENARIO, label: 'runtime ÷ uvicorn+FastAPI p99, 32 connections', unit: '×', decimals: 2, target: { op: '<', value: 1 } },
  { key: 'python.runtimeRps', scenario: SCENARIO, label: 'runtime requests/s', unit: 'req/s', decimals: 0 },
  { key: 'python.uvicornRps', scenario: SCENARIO, label: 'uvicorn+FastAPI requests/s', unit: 'req/s', decimals: 0 },
  { key: 'python.runtimeP99Ms', scenario: SCENARIO, label: 'runtime p99', unit: 'ms', decimals: 2 },
  { key: 'python.uvicornP99Ms', scenario: SCENARIO, label: 'uvicorn+FastAPI p99', unit: 'ms', decimals: 2 },
  { key: 'python.errors', scenario: SCENARIO, label: 'errors and non-2xx answers', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
];

export async function measurePythonRuntime(stack: Stack, settings: Settings, round: number): Promise<RoundFigures> {
  const urls = { runtime: `${stack.runtime.url}/run`, uvicorn: `${stack.uvicorn.url}/run` };
  const results: Partial<Record<keyof typeof urls, LoadResult>> = {};
  for (const name of inTurn(['runtime', 'uvicorn'] as const, round)) {
    results[name] = await runWrk({ url: urls[name], connections: 32, durationS: settings.durationS, body: BODY });
  }
  const { runtime, uvicorn } = results as Required<typeof results>;
  return {
    'python.throughputRatio': runtime.perSecond / uvicorn.perSecond,
    'python.p99Ratio': runtime.latencyMs!.p99 / uvicorn.latencyMs!.p99,
    'python.runtimeRps': runtime.perSecond,
    'python.uvicornRps': uvicorn.perSecond,
    'python.runtimeP99Ms': runtime.latencyMs!.p99,
    'python.uvicornP99Ms': uvicorn.latencyMs!.p99,
    'python.errors': runtime.errors + uvicorn.errors,
  };
}
