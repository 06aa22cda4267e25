// The warm path, this checkout against a baseline commit, side by side. Issue #16 asks that the sidecar ÷ nginx
// of the warm path stay unchanged within noise once the sidecar reports its load, but the sync scenario cannot
// tell a 5–10 % change on this shared 2-core machine: the same build's sidecar ÷ nginx ranged from 0.32× to
// 0.73× in one afternoon as other tenants came and went. Here two pod sidecars, this checkout's ("HEAD", as
// built, uncommitted changes included) and the baseline's (built in a temporary worktree, bench/baseline.ts),
// stand in front of the stack's one runtime and write their RunLogs to its one API server; short wrk loads
// alternate between them, in swapped order each round, so the machine's drift falls on both alike, and every
// round gives a ratio of the two. nginx is not loaded: it would divide both sides alike, so HEAD ÷ baseline of
// the sidecars' runs/s is the ratio of their sidecar ÷ nginx.
//
// A scenario of bench/run.ts (`npm run bench -- --scenarios warm-ab [--ab-base REF] [--ab-rounds N]`), not a
// script of its own: it needs what run.ts already does — the tools, this checkout's build, the stack's runtime
// and API server, the process group that stops every server however the run ends, and the report — and, like
// the operator and cold start scenarios, it is measured once per run, in rounds of its own.
import { join } from 'node:path';
import { checkOutBaseline, type BaselineRef } from '../baseline.ts';
import { runWrk } from '../load/wrk.ts';
import type { ProcessGroup } from '../processes.ts';
import type { FigureSpec, ReportSection, RoundFigures } from '../report.ts';
import { CONCURRENCY, runUrl, startSidecar, type Server, type Stack } from '../stack.ts';
import { median, middleHalf, signTestP } from '../stats.ts';
import { BODY, cpuMeter } from './sync.ts';

export const WARM_AB = 'warm-ab';
/**
 * The commit before the load signal (issue #16: admission's counters, the LoadMeter, `status.load` in the
 * RunLog): what the warm path is to be unchanged from. Move it on when a later change is the one to check.
 */
export const DEFAULT_AB_BASE = '08756ed';
/** With 2 s loads, about 40 s of load; with the baseline's build and the starts, about 80 s on a quiet machine. */
export const DEFAULT_AB_ROUNDS = 10;
/** Short loads, many rounds: the shorter each pair of loads, the less the machine can change between its two halves. */
const LOAD_S = 2;
/** "Within noise": a median ratio this far from 1, in the direction that would be a regression. */
const NOISE = 0.05;

export interface WarmAbOptions {
  baseline: BaselineRef;
  rounds: number;
  sidecarNodeOptions: string;
}

export interface WarmAbResult {
  figures: FigureSpec[];
  /** One entry per A/B round, for the report's summary (its medians and ranges are over these rounds). */
  rounds: RoundFigures[];
  section: ReportSection;
}

interface Load {
  rps: number;
  cpuUs: number;
  kubeApiCpuUs: number;
  errors: number;
}

interface Round {
  headFirst: boolean;
  head: Load;
  base: Load;
}

export function warmAbFigures(baseline: BaselineRef, rounds: number): FigureSpec[] {
  const base = baseline.ref;
  const scenario = `warm path vs ${base} (${rounds} alternating rounds)`;
  return [
    { key: 'warmAb.cpuRatio', scenario, label: `sidecar CPU per run, HEAD ÷ ${base} (within noise: median ≤ ${1 + NOISE})`, unit: '×', decimals: 3, target: { op: '<=', value: 1 + NOISE } },
    { key: 'warmAb.rpsRatio', scenario, label: `sidecar runs/s at ${CONCURRENCY} connections, HEAD ÷ ${base} (within noise: median ≥ ${1 - NOISE})`, unit: '×', decimals: 3, target: { op: '>=', value: 1 - NOISE } },
    { key: 'warmAb.headCpuUs', scenario, label: 'HEAD sidecar CPU per run', unit: 'µs', decimals: 1 },
    { key: 'warmAb.baseCpuUs', scenario, label: `${base} sidecar CPU per run`, unit: 'µs', decimals: 1 },
    { key: 'warmAb.headRps', scenario, label: 'HEAD sidecar runs/s', unit: 'req/s', decimals: 0 },
    { key: 'warmAb.baseRps', scenario, label: `${base} sidecar runs/s`, unit: 'req/s', decimals: 0 },
    { key: 'warmAb.headKubeApiCpuUs', scenario, label: 'in-memory API server CPU per HEAD run (RunLog writes)', unit: 'µs', decimals: 1 },
    { key: 'warmAb.baseKubeApiCpuUs', scenario, label: `in-memory API server CPU per ${base} run (RunLog writes)`, unit: 'µs', decimals: 1 },
    { key: 'warmAb.errors', scenario, label: 'errors and non-2xx answers, all rounds', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
  ];
}

export async function measureWarmAb(stack: Stack, group: ProcessGroup, workDir: string, options: WarmAbOptions, log: (line: string) => void): Promise<WarmAbResult> {
  const { baseline } = options;
  const began = performance.now();
  log(`  building ${baseline.ref} (${baseline.summary}) in a worktree`);
  const checkout = checkOutBaseline(baseline, join(workDir, 'warm-ab-base'));
  const started: Server[] = [];
  try {
    const start = async (name: string, cli?: string): Promise<Server> => {
      const sidecar = await startSidecar(group, { name, cli, runtime: stack.runtime, workDir, store: stack.runLogStore, nodeOptions: options.sidecarNodeOptions });
      started.push(sidecar);
      return sidecar;
    };
    const head = await start('warm-ab-head');
    const base = await start('warm-ab-base', checkout.cli);
    const load = async (sidecar: Server): Promise<Load> => {
      const cpu = cpuMeter(sidecar.process, stack.runtime.process, stack.kubeApi.process);
      const result = await runWrk({ url: runUrl(sidecar, 'run'), connections: CONCURRENCY, durationS: LOAD_S, body: BODY });
      const { proxyCpuUs, kubeApiCpuUs } = cpu.perRequestUs(result.requests);
      return { rps: result.perSecond, cpuUs: proxyCpuUs, kubeApiCpuUs, errors: result.errors };
    };
    // Node compiles the hot paths in the first seconds of load: one unreported load each.
    await load(head);
    await load(base);
    const rounds: Round[] = [];
    for (let index = 0; index < options.rounds; index++) {
      const headFirst = index % 2 === 1;
      const [first, second] = headFirst ? [await load(head), await load(base)] : [await load(base), await load(head)];
      const round = headFirst ? { headFirst, head: first, base: second } : { headFirst, head: second, base: first };
      rounds.push(round);
      log(`  round ${index + 1} of ${options.rounds}: HEAD ${describe(round.head)} | ${baseline.ref} ${describe(round.base)}`);
    }
    log(`  ${WARM_AB} took ${((performance.now() - began) / 1000).toFixed(0)} s, the baseline's build included`);
    return { figures: warmAbFigures(baseline, options.rounds), rounds: roundFigures(rounds), section: section(baseline, rounds) };
  } finally {
    for (const sidecar of started) await sidecar.process.stop();
    checkout.remove();
  }
}

function describe(load: Load): string {
  return `${load.rps.toFixed(0)} runs/s, ${load.cpuUs.toFixed(1)} µs/run${load.errors > 0 ? `, ${load.errors} errors` : ''}`;
}

function roundFigures(rounds: Round[]): RoundFigures[] {
  const figures: RoundFigures[] = rounds.map(({ head, base }) => ({
    'warmAb.cpuRatio': head.cpuUs / base.cpuUs,
    'warmAb.rpsRatio': head.rps / base.rps,
    'warmAb.headCpuUs': head.cpuUs,
    'warmAb.baseCpuUs': base.cpuUs,
    'warmAb.headRps': head.rps,
    'warmAb.baseRps': base.rps,
    'warmAb.headKubeApiCpuUs': head.kubeApiCpuUs,
    'warmAb.baseKubeApiCpuUs': base.kubeApiCpuUs,
  }));
  // A total, not a per-round median: an error in any round is one too many.
  const errors = rounds.reduce((sum, { head, base }) => sum + head.errors + base.errors, 0);
  Object.assign(figures.at(-1) ?? {}, { 'warmAb.errors': errors });
  return figures;
}

/** How many rounds of `rounds` must land on one side for the sign test's p to reach 0.05. */
function signTestNeeds(rounds: number): string {
  for (let side = Math.ceil(rounds / 2); side <= rounds; side++) {
    if (signTestP(side, rounds - side) <= 0.05) return `with ${rounds} rounds, p ≤ 0.05 takes ${side} of them`;
  }
  return `${rounds} rounds can never reach p ≤ 0.05 (it takes at least 6)`;
}

/** The ratios' spread and the sign test, and every round, under a heading of the report. */
function section(baseline: BaselineRef, rounds: Round[]): ReportSection {
  const base = baseline.ref;
  const ratios = (of: (load: Load) => number): number[] => rounds.map((round) => of(round.head) / of(round.base));
  const spread = (values: number[], more: string): string => {
    const { low, high } = middleHalf(values);
    const above = values.filter((value) => value > 1).length;
    const below = values.filter((value) => value < 1).length;
    return `median ${median(values).toFixed(3)}, middle half ${low.toFixed(3)}–${high.toFixed(3)}; ${more} in ${above} of ${rounds.length} rounds, less in ${below} (sign test, two-sided: p = ${signTestP(above, below).toFixed(2)})`;
  };
  const medianOf = (of: (round: Round) => number): number => median(rounds.map(of));
  const n = (value: number, decimals: number): string => value.toFixed(decimals);
  return {
    title: `Warm path A/B: HEAD against ${base} (${baseline.summary})`,
    lines: [
      `Two pod sidecars (\`--run-store runlog\`), this checkout's build ("HEAD") and ${base}'s (checked out into a temporary git worktree and built there), in front of the same runtime and writing to the same in-memory API server; wrk loads of ${LOAD_S} s at ${CONCURRENCY} connections alternate between them, the order swapped every round, after one unreported load each. Each round gives a HEAD ÷ ${base} ratio measured under the same machine load, which the sync scenario's sidecar ÷ nginx, taken minutes apart on a shared machine, cannot give. \`npm run bench -- --scenarios warm-ab --ab-base REF\` compares with another commit.`,
      '',
      `- Sidecar CPU per run, HEAD ÷ ${base}: ${spread(ratios((load) => load.cpuUs), 'HEAD spent more')}.`,
      `- Runs/s, HEAD ÷ ${base}: ${spread(ratios((load) => load.rps), 'HEAD served more')}.`,
      `- Medians: HEAD ${n(medianOf((round) => round.head.cpuUs), 1)} µs per run and ${n(medianOf((round) => round.head.rps), 0)} runs/s, ${base} ${n(medianOf((round) => round.base.cpuUs), 1)} µs and ${n(medianOf((round) => round.base.rps), 0)} runs/s; the API server spent ${n(medianOf((round) => round.head.kubeApiCpuUs), 1)} and ${n(medianOf((round) => round.base.kubeApiCpuUs), 1)} µs per run on their RunLog writes.`,
      `- Read a ratio as a change, not noise, only when its middle half leaves out 1 and HEAD lands on the same side in most rounds: ${signTestNeeds(rounds.length)}. \`--ab-base HEAD\` (the build against its own commit) shows how far identical sidecars stray on the machine of the day.`,
      '',
      `| round | first | HEAD runs/s | ${base} runs/s | ratio | HEAD µs/run | ${base} µs/run | ratio |`,
      '|---|---|---|---|---|---|---|---|',
      ...rounds.map(({ headFirst, head, base: other }, index) =>
        `| ${index + 1} | ${headFirst ? 'HEAD' : base} | ${n(head.rps, 0)} | ${n(other.rps, 0)} | ${n(head.rps / other.rps, 3)} | ${n(head.cpuUs, 1)} | ${n(other.cpuUs, 1)} | ${n(head.cpuUs / other.cpuUs, 3)} |`,
      ),
    ],
  };
}
