// Micro-benchmark of the sidecar's RunLog store: what a run costs in save(), and how long the store's batched
// status write blocks the event loop. Not part of `make test` or `make bench`; run it by hand:
//
//   node_modules/.bin/node bench/micro/runlog-store.ts [--keep-finished 200,10000] [--rounds 16] [--json]
//       [--stream-seconds 5] [--rate 10000] [--webhooks 0.1]
//   node_modules/.bin/node --cpu-prof --cpu-prof-dir=/tmp/prof bench/micro/runlog-store.ts --keep-finished 10000
//
// Runs go through RunRecorder as the run interface drives a sync run that waited for a slot: saved `pending`,
// then `running`, then finished — three saves. A share carry a webhook, delivered (recorder.touch) later.
// The API server (test/kube) is a child process, so neither its CPU nor its event loop counts here. Per
// keepFinished (200 is the default; 10,000 the most an App allows, where the 1 MiB status bound decides):
//
// Burst: rounds of a second's worth of runs (--runs) saved in one synchronous loop, then a flush, with a full
// garbage collection before each loop and each flush (so neither pays for the other's garbage).
// - save: µs per run in save(): the loop's process CPU time (precise, unlike the thread's) less the same loop
//   into a no-op store, alternated, median over rounds; and the same from the fastest wall times.
// - write, window: the window's synchronous work in each write, timed around its methods: the longest
//   stretch (a slice of serialisation, or the snapshot), and all of it. Median and max over rounds.
// - write, whole: the longest time the event loop could not turn while the write ran (a setImmediate probe),
//   which also covers sending the status and parsing the API server's answer (the kube client's work); the
//   parse is also timed alone. On a loaded machine this mostly measures the scheduler.
// Stream: --rate runs a second for --stream-seconds (the first second not measured), in ~1 ms ticks.
// - store CPU: µs per run beyond a no-op store driven the same way — saves and writes together.
// - loop delay: perf_hooks event-loop delay, max and p99, beside the no-op store's (machine noise).
// Compare runs made side by side: the figures move with the machine's load.
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import pino from 'pino';
import { Registry } from 'prom-client';
import { AppTarget } from '../../sidecar/apps.ts';
import type { RunRecord, WebhookRecord } from '../../crds/run-record-schema.ts';
import { KubeApi } from '../../kube/client.ts';
import type { KubeCredentials } from '../../kube/credentials.ts';
import { inClusterCredentials } from '../../kube/in-cluster.ts';
import { RunRecorder } from '../../sidecar/runs/recorder.ts';
import { newRunId } from '../../run-request/run-id.ts';
import { RunLogJournal } from '../../sidecar/runs/runlog-journal.ts';
import { RunLogStore } from '../../sidecar/runs/runlog-store.ts';
import { RunLogWindow } from '../../sidecar/runs/runlog-window.ts';
import { APP_NAME, NAMESPACE, POD_NAME } from '../../test/support/runlog-store-kit.ts';
import type { RunStore } from '../../sidecar/runs/store.ts';
import type { ApiServerReady } from './runlog-api-server.ts';
import { kubePathOf } from '../../test/support/kube-path.ts';

const { values: args } = parseArgs({
  options: {
    'keep-finished': { type: 'string', default: '200,10000' },
    runs: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '16' },
    rate: { type: 'string', default: '10000' },
    'stream-seconds': { type: 'string', default: '5' },
    webhooks: { type: 'string', default: '0.1' },
    json: { type: 'boolean', default: false },
  },
});
const KEEP_FINISHED = args['keep-finished'].split(',').map(Number);
const RUNS = Number(args.runs);
const ROUNDS = Number(args.rounds);
const WARMUP_ROUNDS = 3;
const RATE = Number(args.rate);
const STREAM_SECONDS = Number(args['stream-seconds']);
const WEBHOOK_SHARE = Number(args.webhooks);
/** Every how many runs one carries a webhook; none when the share is 0. */
const WEBHOOK_EVERY = WEBHOOK_SHARE > 0 ? Math.round(1 / WEBHOOK_SHARE) : Number.POSITIVE_INFINITY;
/** Runs between a webhook run's end and its delivery (recorder.touch), in the burst. */
const WEBHOOK_LAG_RUNS = 100;
/** Ticks (of about a millisecond) a streamed run spends pending, running, and until its webhook is delivered. */
const TICKS = { pending: 1, running: 2, webhook: 5 };

const noopStore: RunStore = {
  has: () => false,
  save() {},
  saveDurably: () => Promise.resolve(),
  flush: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

const target = new AppTarget({ projectId: NAMESPACE, appName: APP_NAME, runtime: 'python', replicaConcurrency: 4, responseGracePeriodSeconds: 900 });

/** A run as the run interface starts one, saved `pending` as it is when it waits for a slot. */
function startRun(recorder: RunRecorder, n: number): RunRecord {
  const webhook: WebhookRecord | null =
    (n + 1) % WEBHOOK_EVERY === 0 ? { endpoint: 'https://hooks.example/done', state: 'pending', attempts: 0, lastStatusCode: null, lastError: null } : null;
  const record = recorder.pending({ id: newRunId(), target, functionName: 'run', method: 'POST', mode: 'sync', async: false, webhook, receivedAt: performance.now() });
  recorder.store.save(record);
  return record;
}

function deliverWebhook(recorder: RunRecorder, record: RunRecord): void {
  Object.assign(record.webhook!, { state: 'delivered', attempts: 1, lastStatusCode: 200 });
  recorder.touch(record);
}

// gc() without --expose-gc on the command line (bench/run.ts-style runs pass no flags).
v8.setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

function cpuMs(since?: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}

/** A second's worth of runs, each saved three times, in one synchronous loop. Returns the CPU ms it took. */
function burst(recorder: RunRecorder): number {
  const startedAt = process.cpuUsage();
  const hooks: { record: RunRecord; at: number }[] = [];
  for (let n = 0; n < RUNS; n += 1) {
    const record = startRun(recorder, n);
    recorder.running(record);
    recorder.finish(record, { statusCode: 200 });
    if (record.webhook !== null) hooks.push({ record, at: n });
    while (hooks.length > 0 && hooks[0]!.at + WEBHOOK_LAG_RUNS <= n) deliverWebhook(recorder, hooks.shift()!.record);
  }
  for (const { record } of hooks) deliverWebhook(recorder, record);
  return cpuMs(startedAt);
}

/** The longest time between two turns of the event loop from now until the returned function is called. */
function probeLongestTurn(): () => number {
  let last = performance.now();
  let longest = 0;
  let probing = true;
  const turn = (): void => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (probing) setImmediate(turn);
  };
  setImmediate(turn);
  return () => {
    probing = false;
    return longest;
  };
}

async function startApiServer(keepFinished: number): Promise<{ credentials(): Promise<KubeCredentials>; stop(): Promise<void> }> {
  const child = fork(new URL('./runlog-api-server.ts', import.meta.url), [String(keepFinished)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const [ready] = (await Promise.race([
    once(child, 'message'),
    once(child, 'exit').then(([code]) => Promise.reject(new Error(`the API server exited with ${code} before serving`))),
  ])) as [ApiServerReady];
  return {
    credentials: () => inClusterCredentials({ env: ready.env, serviceAccountDir: ready.serviceAccountDir }),
    async stop() {
      const exited = once(child, 'exit');
      child.disconnect();
      await exited;
    },
  };
}

/** A store on the API server, its journal in `dataDir` (only durable saves use it; none are made here). */
async function openStore(credentials: KubeCredentials, dataDir: string, warnings: Record<string, number>): Promise<RunLogStore> {
  const logger = pino({ level: 'warn' }, {
    write(line: string) {
      const { msg } = JSON.parse(line) as { msg: string };
      warnings[msg] = (warnings[msg] ?? 0) + 1;
    },
  });
  const journal = await RunLogJournal.open({ dataDir, logger });
  const store = new RunLogStore({ credentials, namespace: NAMESPACE, podName: POD_NAME, appName: APP_NAME, journal, registry: new Registry(), logger });
  store.start();
  await store.flush();
  return store;
}

interface BurstFigures {
  saveCpuUsPerRun: number[];
  storeWallMs: number[];
  baselineWallMs: number[];
  longestStretchMs: number[];
  windowWorkMs: number[];
  longestTurnMs: number[];
}

/**
 * Times the window's synchronous work in each write: every slice of serialisation ahead of the snapshot (when
 * the store has them), the snapshot with the slice run in the same turn just before it, and markWritten.
 */
function timeWindowWork(): () => number[] {
  // The benchmark wraps the window's methods in place; their signatures are the window's, not ours to restate.
  const proto = RunLogWindow.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  let stretches: number[] = [];
  let sliceBeforeSnapshotMs = 0;
  const wrap = (name: string, account: (ms: number, result: unknown) => void): void => {
    const original = proto[name];
    if (original === undefined) return;
    proto[name] = function (this: unknown, ...args: unknown[]) {
      const startedAt = performance.now();
      const result = original.apply(this, args);
      account(performance.now() - startedAt, result);
      return result;
    };
  };
  wrap('prepare', (ms, more) => {
    if (more === true) stretches.push(ms);
    else sliceBeforeSnapshotMs = ms;
  });
  wrap('snapshot', (ms) => {
    stretches.push(sliceBeforeSnapshotMs + ms);
    sliceBeforeSnapshotMs = 0;
  });
  wrap('markWritten', (ms) => stretches.push(ms));
  return () => {
    const taken = stretches;
    stretches = [];
    return taken;
  };
}

function wallMs(run: () => void): number {
  const startedAt = performance.now();
  run();
  return performance.now() - startedAt;
}

async function measureBursts(store: RunLogStore, takeStretches: () => number[]): Promise<BurstFigures> {
  const figures: BurstFigures = { saveCpuUsPerRun: [], storeWallMs: [], baselineWallMs: [], longestStretchMs: [], windowWorkMs: [], longestTurnMs: [] };
  const recorder = new RunRecorder(store, POD_NAME);
  const baseline = new RunRecorder(noopStore, POD_NAME);
  for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round += 1) {
    let baselineCpuMs = 0;
    let storeCpuMs = 0;
    collectGarbage();
    const baselineWallMs = wallMs(() => (baselineCpuMs = burst(baseline)));
    collectGarbage();
    const storeWallMs = wallMs(() => (storeCpuMs = burst(recorder)));
    // Else the scavenges owed by the burst's allocations land in the flush, and measure the burst, not the flush.
    collectGarbage();
    takeStretches();
    const stopProbe = probeLongestTurn();
    await store.flush();
    const longestTurnMs = stopProbe();
    const stretches = takeStretches();
    if (round < WARMUP_ROUNDS) continue;
    figures.saveCpuUsPerRun.push(((storeCpuMs - baselineCpuMs) / RUNS) * 1000);
    figures.storeWallMs.push(storeWallMs);
    figures.baselineWallMs.push(baselineWallMs);
    figures.longestStretchMs.push(Math.max(...stretches));
    figures.windowWorkMs.push(stretches.reduce((sum, ms) => sum + ms, 0));
    figures.longestTurnMs.push(longestTurnMs);
  }
  return figures;
}

interface StreamFigures {
  runs: number;
  cpuMs: number;
  loopDelayMaxMs: number;
  loopDelayP99Ms: number;
  achievedRate: number;
}

/** Drives `recorder` at RATE runs a second in ~1 ms ticks; measures all but the first second. */
async function stream(recorder: RunRecorder): Promise<StreamFigures> {
  const pending: { record: RunRecord; tick: number }[] = [];
  const running: { record: RunRecord; tick: number }[] = [];
  const delivering: { record: RunRecord; tick: number }[] = [];
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  let tick = 0;
  let started = 0;
  let from: { runs: number; cpu: NodeJS.CpuUsage; at: number } | undefined;
  const beganAt = performance.now();
  const end = beganAt + STREAM_SECONDS * 1000;
  await new Promise<void>((resolve) => {
    const step = (): void => {
      tick += 1;
      const now = performance.now();
      if (from === undefined && now >= beganAt + 1000) {
        from = { runs: started, cpu: process.cpuUsage(), at: now };
        loopDelay.enable();
      }
      while (delivering.length > 0 && delivering[0]!.tick + TICKS.webhook <= tick) deliverWebhook(recorder, delivering.shift()!.record);
      while (running.length > 0 && running[0]!.tick + TICKS.running <= tick) {
        const { record } = running.shift()!;
        recorder.finish(record, { statusCode: 200 });
        if (record.webhook !== null) delivering.push({ record, tick });
      }
      while (pending.length > 0 && pending[0]!.tick + TICKS.pending <= tick) {
        const { record } = pending.shift()!;
        recorder.running(record);
        running.push({ record, tick });
      }
      if (now < end) {
        for (const due = Math.floor(((now - beganAt) / 1000) * RATE); started < due; started += 1) pending.push({ record: startRun(recorder, started), tick });
      }
      if (now < end || pending.length + running.length + delivering.length > 0) setTimeout(step, 1);
      else resolve();
    };
    setTimeout(step, 1);
  });
  loopDelay.disable();
  const measured = from!;
  return {
    runs: started - measured.runs,
    cpuMs: cpuMs(measured.cpu),
    loopDelayMaxMs: loopDelay.max / 1e6,
    loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
    achievedRate: (started - measured.runs) / ((performance.now() - measured.at) / 1000),
  };
}

interface Result {
  keepFinished: number;
  statusRuns: number;
  statusKiB: number;
  /** Per run: median of the CPU difference; difference of the fastest wall times. */
  saveUs: { cpuMedian: number; wallMin: number };
  longestStretchMs: { median: number; max: number };
  windowWorkMs: { median: number; max: number };
  longestTurnMs: { median: number; max: number };
  /** JSON.parse of the RunLog the API server answers a status write with (the kube client's, not the store's). */
  answerParseMs: number;
  stream?: { achievedRate: number; storeCpuUsPerRun: number; loopDelayMaxMs: number; loopDelayP99Ms: number; noopLoopDelayMaxMs: number; noopLoopDelayP99Ms: number };
  warnings: Record<string, number>;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function spread(values: number[]): { median: number; max: number } {
  return { median: median(values), max: Math.max(...values) };
}

async function measure(keepFinished: number, takeStretches: () => number[]): Promise<Result> {
  const server = await startApiServer(keepFinished);
  const dataDir = await mkdtemp(join(tmpdir(), 'runlet-micro-runlog-'));
  const warnings: Record<string, number> = {};
  try {
    const burstStore = await openStore(await server.credentials(), dataDir, warnings);
    const bursts = await measureBursts(burstStore, takeStretches).finally(() => burstStore.close());
    const runLog = await readRunLog(await server.credentials());
    const status = (JSON.parse(runLog) as { status: { runs: unknown[] } }).status;
    const result: Result = {
      keepFinished,
      statusRuns: status.runs.length,
      statusKiB: Buffer.byteLength(JSON.stringify(status)) / 1024,
      saveUs: {
        cpuMedian: median(bursts.saveCpuUsPerRun),
        wallMin: ((Math.min(...bursts.storeWallMs) - Math.min(...bursts.baselineWallMs)) / RUNS) * 1000,
      },
      longestStretchMs: spread(bursts.longestStretchMs),
      windowWorkMs: spread(bursts.windowWorkMs),
      longestTurnMs: spread(bursts.longestTurnMs),
      answerParseMs: median(Array.from({ length: 9 }, () => wallMs(() => JSON.parse(runLog)))),
      warnings,
    };
    if (STREAM_SECONDS > 0) {
      const noop = await stream(new RunRecorder(noopStore, POD_NAME));
      const store = await openStore(await server.credentials(), dataDir, warnings);
      const streamed = await stream(new RunRecorder(store, POD_NAME)).finally(() => store.close());
      result.stream = {
        achievedRate: Math.round(streamed.achievedRate),
        storeCpuUsPerRun: (streamed.cpuMs / streamed.runs - noop.cpuMs / noop.runs) * 1000,
        loopDelayMaxMs: streamed.loopDelayMaxMs,
        loopDelayP99Ms: streamed.loopDelayP99Ms,
        noopLoopDelayMaxMs: noop.loopDelayMaxMs,
        noopLoopDelayP99Ms: noop.loopDelayP99Ms,
      };
    }
    return result;
  } finally {
    await server.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

async function readRunLog(credentials: KubeCredentials): Promise<string> {
  const api = new KubeApi(credentials);
  try {
    return JSON.stringify(await api.request('GET', kubePathOf(`/apis/runlet.dev/v1alpha1/namespaces/${NAMESPACE}/runlogs/${POD_NAME}`)));
  } finally {
    await api.close();
  }
}

const takeStretches = timeWindowWork();
const results: Result[] = [];
for (const keepFinished of KEEP_FINISHED) results.push(await measure(keepFinished, takeStretches));
if (args.json) {
  console.log(JSON.stringify(results, null, 2));
} else {
  const f = (value: number, digits = 2): string => value.toFixed(digits);
  const range = (r: { median: number; max: number }): string => `${f(r.median)} ms (median; max ${f(r.max)})`;
  console.log(`burst: ${ROUNDS} rounds of ${RUNS} runs (3 saves each, ${WEBHOOK_SHARE * 100}% with a webhook delivered later) then a flush; stream: ${RATE} runs/s for ${STREAM_SECONDS} s`);
  for (const r of results) {
    const lines = [
      `keepFinished ${r.keepFinished}: status of ${r.statusRuns} runs, ${f(r.statusKiB, 0)} KiB`,
      `  save():             ${f(r.saveUs.cpuMedian)} µs CPU per run (median), ${f(r.saveUs.wallMin)} µs wall (fastest rounds)`,
      `  write, window:      longest synchronous stretch ${range(r.longestStretchMs)}, all ${range(r.windowWorkMs)}`,
      `  write, whole:       longest event-loop turn ${range(r.longestTurnMs)}; parsing the answer alone ${f(r.answerParseMs)} ms`,
    ];
    if (r.stream !== undefined) {
      const s = r.stream;
      lines.push(
        `  stream:             ${s.achievedRate} runs/s; store CPU ${f(s.storeCpuUsPerRun)} µs per run beyond a no-op store`,
        `  loop delay:         max ${f(s.loopDelayMaxMs)} ms, p99 ${f(s.loopDelayP99Ms)} ms (no-op store: max ${f(s.noopLoopDelayMaxMs)} ms, p99 ${f(s.noopLoopDelayP99Ms)} ms)`,
      );
    }
    lines.push(`  warnings:           ${Object.entries(r.warnings).map(([msg, n]) => `${n}× ${msg}`).join('; ') || 'none'}`);
    console.log(lines.join('\n'));
  }
}
