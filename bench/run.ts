// `make bench` / `npm run bench`: installs the tools it needs, builds dist/, starts every server once, runs every
// scenario in each of several rounds, and writes bench/results.md and bench/results.json.
//   npm run bench -- [--rounds 3] [--duration 3] [--scenarios sync,memory,...] [--sidecar-node-options=FLAGS]
//                    [--ab-base REF] [--ab-rounds 10]   (the warm-path A/B: scenarios/warm-ab.ts)
// With --scenarios (for profiling one scenario), the report goes to bench/.work/ instead. Only then may
// --sidecar-node-options start the sidecars with other Node flags than the pod's (to measure alternatives;
// `--sidecar-node-options=` for Node's defaults).
import { mkdirSync, rmSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SIDECAR_NODE_OPTIONS } from '../operator/render/sidecar-container.ts';
import { buildProject } from './build.ts';
import { closeStreamClient } from './load/stream-client.ts';
import { methodNotes } from './method.ts';
import { IMAGES_SECTION } from './images.ts';
import { NODE_FLAGS_SECTION } from './node-flags.ts';
import { RESULTS_STORE_SECTION } from './results-store.ts';
import { explainMisses } from './notes.ts';
import { ProcessGroup } from './processes.ts';
import { summarise, writeReport, type FigureSpec, type RoundFigures } from './report.ts';
import { ASYNC_FIGURES, measureAsync } from './scenarios/async.ts';
import { DEV_FIGURES, measureDev } from './scenarios/dev.ts';
import { BURST_FIGURES, measureBurst } from './scenarios/burst.ts';
import { COLD_START_FIGURES, measureColdStart } from './scenarios/cold-start.ts';
import { ETCD_WRITES_FIGURES, measureEtcdWrites } from './scenarios/etcd-writes.ts';
import { HOLDER_MEMORY_FIGURES, measureHolderMemory } from './scenarios/holder-memory.ts';
import { measureOperator, OPERATOR_FIGURES } from './scenarios/operator.ts';
import { measureMemory, MEMORY_FIGURES } from './scenarios/memory.ts';
import { measurePythonRuntime, PYTHON_RUNTIME_FIGURES } from './scenarios/python-runtime.ts';
import type { Settings } from './scenarios/settings.ts';
import { measureStream, STREAM_FIGURES } from './scenarios/stream.ts';
import { measureSync, SYNC_FIGURES } from './scenarios/sync.ts';
import { measureWebhook, WEBHOOK_FIGURES } from './scenarios/webhook.ts';
import { DEFAULT_AB_BASE, DEFAULT_AB_ROUNDS, measureWarmAb, WARM_AB, type WarmAbResult } from './scenarios/warm-ab.ts';
import { resolveBaselineRef } from './baseline.ts';
import { startStack, type Stack } from './stack.ts';
import { ensureTools, toolVersions } from './tools.ts';

const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
const WORK_DIR = join(BENCH_DIR, '.work');

interface Scenario {
  name: string;
  figures: FigureSpec[];
  measure: (stack: Stack, settings: Settings, round: number) => Promise<RoundFigures> | RoundFigures;
}

/** Measured once per run, after the rounds, with servers of their own (not the stack's). */
interface OnceScenario {
  name: string;
  figures: FigureSpec[];
  measure: (group: ProcessGroup, workDir: string) => Promise<RoundFigures>;
}

/** In the order of a round; memory reads the sidecar right after the sync scenario's loads. */
const SCENARIOS: Scenario[] = [
  { name: 'sync', figures: SYNC_FIGURES, measure: measureSync },
  { name: 'memory', figures: MEMORY_FIGURES, measure: measureMemory },
  { name: 'python', figures: PYTHON_RUNTIME_FIGURES, measure: measurePythonRuntime },
  { name: 'stream', figures: STREAM_FIGURES, measure: measureStream },
  { name: 'async', figures: ASYNC_FIGURES, measure: measureAsync },
  { name: 'webhook', figures: WEBHOOK_FIGURES, measure: measureWebhook },
  { name: 'dev', figures: DEV_FIGURES, measure: measureDev },
];

/**
 * In this order, after the rounds: the operator at scale (see scenarios/operator.ts), then autoscaling on the
 * tests' local cluster — scale to zero's cold start through the holder, the holder's memory under held calls
 * (on the in-memory API server alone), and a burst's scale-up — then the API server's and etcd's writes per
 * busy replica with and without the results store, on the real control plane (skipped where it cannot run).
 */
const ONCE_SCENARIOS: OnceScenario[] = [
  { name: 'operator', figures: OPERATOR_FIGURES, measure: measureOperator },
  { name: 'coldstart', figures: COLD_START_FIGURES, measure: () => measureColdStart() },
  { name: 'holder-memory', figures: HOLDER_MEMORY_FIGURES, measure: () => measureHolderMemory() },
  { name: 'burst', figures: BURST_FIGURES, measure: () => measureBurst() },
  { name: 'etcd-writes', figures: ETCD_WRITES_FIGURES, measure: () => measureEtcdWrites() },
];

function log(line: string): void {
  process.stdout.write(`bench: ${line}\n`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      duration: { type: 'string', default: '3' },
      scenarios: { type: 'string' },
      'sidecar-node-options': { type: 'string' },
      'ab-base': { type: 'string' },
      'ab-rounds': { type: 'string' },
    },
  });
  const sidecarNodeOptions = values['sidecar-node-options'] ?? SIDECAR_NODE_OPTIONS;
  if (values['sidecar-node-options'] !== undefined && values.scenarios === undefined) {
    throw new Error('--sidecar-node-options needs --scenarios: bench/results.md reports the sidecar as the pod starts it');
  }
  const rounds = positiveInteger(values.rounds, '--rounds');
  const { scenarios, onceScenarios } = selectScenarios(values.scenarios);
  const runWarmAb = values.scenarios === undefined || values.scenarios.split(',').includes(WARM_AB);
  if (!runWarmAb && (values['ab-base'] ?? values['ab-rounds']) !== undefined) throw new Error(`--ab-base and --ab-rounds need the ${WARM_AB} scenario`);
  const abBaseline = runWarmAb ? resolveBaselineRef(values['ab-base'] ?? DEFAULT_AB_BASE) : null;
  const abRounds = positiveInteger(values['ab-rounds'] ?? String(DEFAULT_AB_ROUNDS), '--ab-rounds');
  const reportDir = values.scenarios === undefined ? BENCH_DIR : WORK_DIR;
  const durationS = positiveInteger(values.duration, '--duration');
  const settings: Settings = { durationS, latencyDurationS: Math.max(1, Math.round(durationS * 0.67)) };
  const startedAt = new Date();
  const loadAtStart = loadavg()[0]!;

  ensureTools(log);
  const versions = toolVersions();
  log('building dist/ (npm run build)');
  buildProject();
  rmSync(WORK_DIR, { recursive: true, force: true });
  mkdirSync(WORK_DIR, { recursive: true });

  const group = new ProcessGroup();
  const interrupted = (): void => {
    log('interrupted: stopping the servers');
    void group.stopAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);

  const measured: RoundFigures[] = [];
  let warmAb: WarmAbResult | null = null;
  try {
    // The servers of the rounds (and the A/B's runtime and API server): started only when something measures on them.
    const needsStack = scenarios.length > 0 || abBaseline !== null;
    if (needsStack) log('starting the servers');
    const stack = needsStack ? await startStack(group, WORK_DIR, { sidecarNodeOptions }) : undefined;
    if (stack !== undefined && scenarios.length > 0) {
      // Node compiles its hot paths during the first seconds of load: a short unreported round first, so every
      // reported round measures warm servers.
      log('warm-up round (not reported)');
      for (const scenario of scenarios) await scenario.measure(stack, { durationS: 1, latencyDurationS: 1 }, 0);
      for (let round = 0; round < rounds; round++) {
        log(`round ${round + 1} of ${rounds}`);
        const figures: RoundFigures = {};
        for (const scenario of scenarios) {
          const began = performance.now();
          Object.assign(figures, await scenario.measure(stack, settings, round));
          log(`  ${scenario.name} (${((performance.now() - began) / 1000).toFixed(1)} s)`);
        }
        measured.push(figures);
      }
    }
    // Reported with the last round's figures (a run of these alone: as one round).
    if (measured.length === 0 && onceScenarios.length > 0) measured.push({});
    for (const scenario of onceScenarios) {
      log(`${scenario.name} (once)`);
      const began = performance.now();
      Object.assign(measured.at(-1)!, await scenario.measure(group, WORK_DIR));
      log(`  ${scenario.name} (${((performance.now() - began) / 1000).toFixed(1)} s)`);
    }
    if (stack !== undefined && abBaseline !== null) {
      log(`${WARM_AB} (once, ${abRounds} rounds against ${abBaseline.ref})`);
      warmAb = await measureWarmAb(stack, group, WORK_DIR, { baseline: abBaseline, rounds: abRounds, sidecarNodeOptions }, log);
      // Its own rounds, with keys of their own: its figures' medians and ranges are over them.
      measured.push(...warmAb.rounds);
    }
  } finally {
    closeStreamClient();
    await group.stopAll();
  }

  const figures = [...scenarios, ...onceScenarios].flatMap((scenario) => scenario.figures);
  if (warmAb !== null) figures.push(...warmAb.figures);
  const results = summarise(figures, measured);
  const finishedAt = new Date();
  writeReport(
    { markdown: join(reportDir, 'results.md'), json: join(reportDir, 'results.json') },
    {
      startedAt,
      finishedAt,
      cores: cpus().length,
      cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
      loadAverage: { start: loadAtStart, end: loadavg()[0]! },
      versions,
      rounds,
      durationS,
      method: methodNotes(settings, sidecarNodeOptions),
    },
    figures,
    results,
    explainMisses(results, cpus().length),
    [NODE_FLAGS_SECTION, IMAGES_SECTION, RESULTS_STORE_SECTION, ...(warmAb ? [warmAb.section] : [])],
  );
  for (const result of results.filter((figure) => figure.target)) {
    log(`${result.met ? 'met   ' : 'MISSED'} ${result.scenario}: ${result.label}: ${result.median.toFixed(3)} ${result.unit}`);
  }
  log(`wrote ${join(reportDir, 'results.md')} and results.json (${Math.round((finishedAt.getTime() - startedAt.getTime()) / 1000)} s)`);
}

function selectScenarios(list: string | undefined): { scenarios: Scenario[]; onceScenarios: OnceScenario[] } {
  if (list === undefined) return { scenarios: SCENARIOS, onceScenarios: ONCE_SCENARIOS };
  const names = list.split(',').map((name) => name.trim());
  const known = [...SCENARIOS, ...ONCE_SCENARIOS].map((scenario) => scenario.name).concat(WARM_AB);
  const unknown = names.filter((name) => !known.includes(name));
  if (unknown.length > 0) throw new Error(`unknown scenario(s) ${unknown.join(', ')}; known: ${known.join(', ')}`);
  return { scenarios: SCENARIOS.filter((scenario) => names.includes(scenario.name)), onceScenarios: ONCE_SCENARIOS.filter((scenario) => names.includes(scenario.name)) };
}

function positiveInteger(text: string, name: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got "${text}"`);
  return value;
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
