// The benchmark report: every figure's median over the rounds with its range, checked against its target,
// as bench/results.md (for people) and bench/results.json (for tools).
import { writeFileSync } from 'node:fs';
import { median } from './stats.ts';
import type { ToolVersions } from './tools.ts';

export interface Target {
  op: '>=' | '<=' | '<';
  value: number;
}

/** One number a scenario measures in every round. */
export interface FigureSpec {
  key: string;
  scenario: string;
  label: string;
  unit: string;
  decimals: number;
  target?: Target;
}

export type RoundFigures = Record<string, number>;

/** A section of the report after the Notes: Markdown lines under a heading. */
export interface ReportSection {
  title: string;
  lines: string[];
}

export interface RunInfo {
  startedAt: Date;
  finishedAt: Date;
  cores: number;
  cpuModel: string;
  /** 1-minute load average at the start and the end: how busy the shared machine was. */
  loadAverage: { start: number; end: number };
  versions: ToolVersions;
  rounds: number;
  durationS: number;
  /** How the run was set up, one sentence each. */
  method: string[];
}

export interface FigureResult {
  key: string;
  scenario: string;
  label: string;
  unit: string;
  values: number[];
  median: number;
  min: number;
  max: number;
  target: Target | null;
  met: boolean | null;
}

export function summarise(specs: FigureSpec[], rounds: RoundFigures[]): FigureResult[] {
  return specs.map((spec) => {
    const values = rounds.map((round) => round[spec.key]).filter((value): value is number => value !== undefined && Number.isFinite(value));
    const middle = median(values);
    return {
      key: spec.key,
      scenario: spec.scenario,
      label: spec.label,
      unit: spec.unit,
      values,
      median: middle,
      min: values.length > 0 ? Math.min(...values) : Number.NaN,
      max: values.length > 0 ? Math.max(...values) : Number.NaN,
      target: spec.target ?? null,
      met: spec.target && values.length > 0 ? meets(middle, spec.target) : null,
    };
  });
}

function meets(value: number, target: Target): boolean {
  if (target.op === '>=') return value >= target.value;
  if (target.op === '<=') return value <= target.value;
  return value < target.value;
}

export function writeReport(
  paths: { markdown: string; json: string },
  info: RunInfo,
  specs: FigureSpec[],
  results: FigureResult[],
  notes: string[],
  sections: ReportSection[],
): void {
  const decimalsOf = new Map(specs.map((spec) => [spec.key, spec.decimals]));
  writeFileSync(paths.json, JSON.stringify({ ...runInfoJson(info), figures: results, notes }, null, 2) + '\n');
  writeFileSync(paths.markdown, markdown(info, results, notes, sections, (key) => decimalsOf.get(key) ?? 2));
}

function runInfoJson(info: RunInfo) {
  return {
    startedAt: info.startedAt.toISOString(),
    finishedAt: info.finishedAt.toISOString(),
    durationS: Math.round((info.finishedAt.getTime() - info.startedAt.getTime()) / 1000),
    machine: { cores: info.cores, cpuModel: info.cpuModel, loadAverage: info.loadAverage },
    versions: info.versions,
    rounds: info.rounds,
    loadDurationS: info.durationS,
    method: info.method,
  };
}

function markdown(info: RunInfo, results: FigureResult[], notes: string[], sections: ReportSection[], decimalsOf: (key: string) => number): string {
  const v = info.versions;
  const tookS = Math.round((info.finishedAt.getTime() - info.startedAt.getTime()) / 1000);
  const lines = [
    '# Benchmarks',
    '',
    `Written by \`make bench\` (\`npm run bench\`, [bench/run.ts](run.ts)) on ${info.startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC; the run took ${tookS} s.`,
    `Every figure is the median of ${info.rounds} rounds (range in brackets); each round runs every scenario, and a ratio's`,
    'two sides are measured back to back in the same round, because the machine is shared and noisy.',
    '',
    `Machine: ${info.cores} cores (${info.cpuModel}), load average ${info.loadAverage.start.toFixed(1)} at the start and ${info.loadAverage.end.toFixed(1)} at the end.`,
    `Versions: node ${v.node}, python ${v.python}, nginx ${v.nginx}, uvicorn ${v.uvicorn} (FastAPI ${v.fastapi}), wrk ${v.wrk}, autocannon ${v.autocannon}.`,
    '',
    '| scenario | figure | median | range | target | met |',
    '|---|---|---|---|---|---|',
  ];
  for (const result of results) {
    const d = decimalsOf(result.key);
    const unit = result.unit === '×' ? '×' : ` ${result.unit}`;
    const value = (n: number): string => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
    const target = result.target ? `${opText(result.target.op)} ${result.target.value}${unit}` : '';
    const met = result.met === null ? '' : result.met ? 'yes' : '**no**';
    lines.push(`| ${result.scenario} | ${result.label} | ${value(result.median)}${unit} | ${value(result.min)}–${value(result.max)} | ${target} | ${met} |`);
  }
  lines.push('', '## How it is measured', '', ...info.method.map((sentence) => `- ${sentence}`));
  if (notes.length > 0) lines.push('', '## Notes', '', ...notes.map((note) => `- ${note}`));
  for (const section of sections) lines.push('', `## ${section.title}`, '', ...section.lines);
  return lines.join('\n') + '\n';
}

function opText(op: Target['op']): string {
  return op === '>=' ? '≥' : op === '<=' ? '≤' : '<';
}
