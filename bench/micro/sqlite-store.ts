// Micro-benchmark of the SQLite run store (`runlet dev`, `runlet sidecar --run-store sqlite`): what it costs the
// event loop that answers calls. Not part of `make test` or `make bench`; run it by hand:
//
//   node_modules/.bin/node bench/micro/sqlite-store.ts [--rate 8000] [--seconds 6] [--async-share 0.1]
//
// Runs are saved as the run interface saves them, at --rate a second in ~1 ms ticks: a sync run `running`,
// then finished on the next tick (two saves); a share of async runs `pending` with saveDurably (the 202's
// wait), then finished. The first second is not measured. Against a no-op store driven the same way:
// - loop delay: perf_hooks event-loop delay, p99 and max — a commit, or a checkpoint's fsync inside one, done
//   on the event loop shows here;
// - main-thread CPU: µs per run on the event loop's thread beyond the no-op store (process.threadCpuUsage);
// - durable save: ms from saveDurably to its commit, p50 and p99.
// Compare runs made side by side: the figures move with the machine's load.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { SqliteRunStore } from '../../sidecar/runs/sqlite-run-store.ts';
import { pendingAsyncRunRecord, runRecord } from '../../test/support/sqlite-run-records.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import type { RunStore } from '../../sidecar/runs/store.ts';
import { median } from '../stats.ts';

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '8000' },
    seconds: { type: 'string', default: '6' },
    'async-share': { type: 'string', default: '0.1' },
  },
});
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const ASYNC_SHARE = Number(args['async-share']);
const TICK_MS = 1;

const noopStore: RunStore = {
  has: () => false,
  save: () => undefined,
  saveDurably: async () => undefined,
  flush: async () => undefined,
  close: async () => undefined,
};

interface Measured {
  loopP99Ms: number;
  loopMaxMs: number;
  mainCpuUsPerRun: number;
  durableP50Ms: number;
  durableP99Ms: number;
}

async function drive(store: RunStore): Promise<Measured> {
  const loop = monitorEventLoopDelay({ resolution: 1 });
  const durableMs: number[] = [];
  let finishing: RunRecord[] = [];
  let runs = 0;
  let measuring = false;
  let cpuAtStart = process.threadCpuUsage();
  const started = performance.now();
  const perTick = (RATE * TICK_MS) / 1000;
  let owed = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const elapsed = performance.now() - started;
      if (!measuring && elapsed >= 1000) {
        measuring = true;
        loop.enable();
        cpuAtStart = process.threadCpuUsage();
        runs = 0;
      }
      for (const record of finishing) {
        record.status = 'success';
        store.save(record);
      }
      finishing = [];
      owed += perTick;
      for (; owed >= 1; owed -= 1) {
        runs += 1;
        if (Math.random() < ASYNC_SHARE) {
          const record = pendingAsyncRunRecord();
          const saved = performance.now();
          void store.saveDurably(record).then(() => {
            if (measuring) durableMs.push(performance.now() - saved);
            finishing.push(record);
          });
        } else {
          const record = runRecord({ status: 'running' });
          store.save(record);
          finishing.push(record);
        }
      }
      if (elapsed < (SECONDS + 1) * 1000) setTimeout(tick, TICK_MS);
      else resolve();
    };
    tick();
  });
  const cpu = process.threadCpuUsage(cpuAtStart);
  loop.disable();
  await store.flush();
  durableMs.sort((a, b) => a - b);
  return {
    loopP99Ms: loop.percentile(99) / 1e6,
    loopMaxMs: loop.max / 1e6,
    mainCpuUsPerRun: (cpu.user + cpu.system) / runs,
    durableP50Ms: median(durableMs),
    durableP99Ms: durableMs[Math.floor(durableMs.length * 0.99)] ?? Number.NaN,
  };
}

const dataDir = await mkdtemp(join(tmpdir(), 'runlet-sqlite-micro-'));
try {
  const noop = await drive(noopStore);
  const store = new SqliteRunStore({ dataDir, logger: pino({ level: 'warn' }) });
  const sqlite = await drive(store);
  await store.close();
  const n = (x: number, decimals = 2): string => x.toFixed(decimals);
  process.stdout.write(
    `${RATE} runs/s (${ASYNC_SHARE * 100}% async), ${SECONDS} s measured\n` +
      `loop delay p99 / max: SQLite ${n(sqlite.loopP99Ms)} / ${n(sqlite.loopMaxMs)} ms, no-op ${n(noop.loopP99Ms)} / ${n(noop.loopMaxMs)} ms\n` +
      `main-thread CPU per run beyond the no-op store: ${n(sqlite.mainCpuUsPerRun - noop.mainCpuUsPerRun, 1)} µs\n` +
      `durable save to commit p50 / p99: ${n(sqlite.durableP50Ms, 3)} / ${n(sqlite.durableP99Ms, 3)} ms\n`,
  );
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
