// For the foundation issue's closing note: sync runs per second through `runlet dev` against direct calls to
// the runtime. autocannon, 32 connections, back to back. No target.
import { runAutocannon } from '../load/autocannon.ts';
import type { LoadResult } from '../load/result.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { runUrl, type Stack } from '../stack.ts';
import { inTurn, type Settings } from './settings.ts';
import { BODY } from './sync.ts';

const SCENARIO = '`runlet dev`';

export const DEV_FIGURES: FigureSpec[] = [
  { key: 'dev.ratio', scenario: SCENARIO, label: '`runlet dev` ÷ direct runtime, sync runs/s, 32 connections (autocannon)', unit: '×', decimals: 2 },
  { key: 'dev.devRps', scenario: SCENARIO, label: '`runlet dev` sync runs/s', unit: 'req/s', decimals: 0 },
  { key: 'dev.directRps', scenario: SCENARIO, label: 'direct runtime requests/s', unit: 'req/s', decimals: 0 },
  { key: 'dev.errors', scenario: SCENARIO, label: 'errors and non-2xx answers', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
];

export async function measureDev(stack: Stack, settings: Settings, round: number): Promise<RoundFigures> {
  const urls = { dev: runUrl(stack.dev, 'run'), direct: `${stack.runtime.url}/run` };
  const results: Partial<Record<keyof typeof urls, LoadResult>> = {};
  for (const name of inTurn(['dev', 'direct'] as const, round)) {
    results[name] = await runAutocannon({ url: urls[name], connections: 32, durationS: settings.durationS, body: BODY });
  }
  const { dev, direct } = results as Required<typeof results>;
  return {
    'dev.ratio': dev.perSecond / direct.perSecond,
    'dev.devRps': dev.perSecond,
    'dev.directRps': direct.perSecond,
    'dev.errors': dev.errors + direct.errors,
  };
}
