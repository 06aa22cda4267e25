// Resident memory: the sidecars' right after the sync scenario's loads (the pod's with a results store, which the
// target is about, once its records are collected; the pod's with a RunLog; the SQLite one), the results sidecar's
// again once idle for a while, the runtime's before its first call, and for scale, an empty Node process and the
// pod's sidecar before its first call.
// For the pod's sidecar, the floor proxy and the empty Node process, the RSS is also split by where its pages are
// (bench/smaps.ts, from /proc/<pid>/smaps): the node binary's own file pages, which are the platform's (every
// Node process maps the same binary and shares them; clean, so the kernel can drop and read them back), the
// process's anonymous memory (V8's heap, malloc: what the process itself allocated), and the rest (shared
// libraries). The target stays on the whole RSS.
import { execFileSync } from 'node:child_process';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { readRssSplit, splitRss, type RssSplit } from '../smaps.ts';
import type { Stack } from '../stack.ts';
import { waitUntilCollected } from './idle.ts';

const SCENARIO = 'memory';
/**
 * How long after the load the settled RSS is read: the sidecar collects 15 s after a busy period ends
 * (sidecar/idle-collection.ts) and jemalloc returns freed pages a second later; 30 s leaves room on a loaded machine.
 */
const SETTLE_S = 30;
const BINARY = 'in the node binary\'s own pages (the platform\'s: file-backed, clean, shared by every Node process)';
const ANONYMOUS = 'anonymous (its own: V8 heap, malloc)';
const OTHER = 'the rest (shared libraries, other files)';

export const MEMORY_FIGURES: FigureSpec[] = [
  { key: 'memory.resultsSidecarRssMb', scenario: SCENARIO, label: 'results sidecar RSS right after the sync scenario, its records collected (`--run-store results`, the pod\'s in a cluster with a results store; the heap the load grew not yet collected)', unit: 'MB', decimals: 1 },
  ...splitFigures('resultsSidecar', 'of the results sidecar\'s RSS after the sync scenario'),
  // The target: what the pod holds after a load, once the sidecar has collected it (15 s after the load).
  { key: 'memory.resultsSidecarSettledRssMb', scenario: SCENARIO, label: `results sidecar RSS after the sync scenario, once idle ${SETTLE_S} s (the heap the load grew collected, its pages returned)`, unit: 'MB', decimals: 1, target: { op: '<=', value: 80 } },
  { key: 'memory.resultsSidecarIdleRssMb', scenario: SCENARIO, label: 'results sidecar RSS right after start, before any call', unit: 'MB', decimals: 1 },
  { key: 'memory.sidecarRssMb', scenario: SCENARIO, label: 'RunLog sidecar RSS after the sync scenario (`--run-store runlog`, the pod\'s in a cluster without a results store: its 200-record window)', unit: 'MB', decimals: 1 },
  ...splitFigures('sidecar', 'of the RunLog sidecar\'s RSS after the sync scenario'),
  { key: 'memory.sqliteSidecarRssMb', scenario: SCENARIO, label: 'SQLite sidecar RSS after the sync scenario', unit: 'MB', decimals: 1 },
  { key: 'memory.runtimeIdleRssMb', scenario: SCENARIO, label: 'Python runtime RSS, idle (trivial app, before any call)', unit: 'MB', decimals: 1, target: { op: '<=', value: 30 } },
  { key: 'memory.sidecarIdleRssMb', scenario: SCENARIO, label: 'RunLog sidecar RSS right after start, before any call', unit: 'MB', decimals: 1 },
  { key: 'memory.floorProxyRssMb', scenario: SCENARIO, label: 'floor proxy RSS after the same loads (node:http + the runtime client, same NODE_OPTIONS)', unit: 'MB', decimals: 1 },
  ...splitFigures('floorProxy', 'of the floor proxy\'s RSS'),
  { key: 'memory.nodeFloorRssMb', scenario: SCENARIO, label: 'an empty Node process (`node -e`), same binary', unit: 'MB', decimals: 1 },
  ...splitFigures('nodeFloor', 'of the empty Node process\'s RSS'),
];

function splitFigures(name: string, of: string): FigureSpec[] {
  return [
    { key: `memory.${name}BinaryMb`, scenario: SCENARIO, label: `${of}: ${BINARY}`, unit: 'MB', decimals: 1 },
    { key: `memory.${name}AnonymousMb`, scenario: SCENARIO, label: `${of}: ${ANONYMOUS}`, unit: 'MB', decimals: 1 },
    { key: `memory.${name}OtherMb`, scenario: SCENARIO, label: `${of}: ${OTHER}`, unit: 'MB', decimals: 1 },
  ];
}

function splitValues(name: string, split: RssSplit): RoundFigures {
  return {
    [`memory.${name}BinaryMb`]: split.binaryKb / 1024,
    [`memory.${name}AnonymousMb`]: split.anonymousKb / 1024,
    [`memory.${name}OtherMb`]: split.otherKb / 1024,
  };
}

/**
 * An empty Node process's RSS as it sees it, then its executable and smaps, read by itself (it exits once it has
 * written them); both before it first touches process.stdout, whose pipe stream (net, streams) adds about 2 MB.
 */
const EMPTY_NODE = [
  'const rss = process.memoryUsage().rss;',
  'const { readFileSync, readlinkSync } = require("node:fs");',
  'const exe = readlinkSync("/proc/self/exe");',
  'const smaps = readFileSync("/proc/self/smaps", "utf8");',
  'process.stdout.write(JSON.stringify({ rss, exe, smaps }));',
].join(' ');

/** Call right after measureSync. */
export async function measureMemory(stack: Stack): Promise<RoundFigures> {
  // Each process's RSS and its split are read one right after the other.
  await waitUntilCollected(stack.resultsSidecar.adminUrl);
  const resultsSidecarRssMb = stack.resultsSidecar.process.rssMb();
  const resultsSidecarSplit = readRssSplit(stack.resultsSidecar.process.pid);
  const sidecarRssMb = stack.sidecar.process.rssMb();
  const sidecarSplit = readRssSplit(stack.sidecar.process.pid);
  const floorProxyRssMb = stack.floorProxy.process.rssMb();
  const floorProxySplit = readRssSplit(stack.floorProxy.process.pid);
  // Nothing calls the sidecars meanwhile: what the results sidecar holds once its heap is given back.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_S * 1000));
  const resultsSidecarSettledRssMb = stack.resultsSidecar.process.rssMb();
  const empty = JSON.parse(execFileSync(process.execPath, ['-e', EMPTY_NODE], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 })) as { rss: number; exe: string; smaps: string };
  return {
    'memory.resultsSidecarRssMb': resultsSidecarRssMb,
    ...splitValues('resultsSidecar', resultsSidecarSplit),
    'memory.resultsSidecarSettledRssMb': resultsSidecarSettledRssMb,
    'memory.resultsSidecarIdleRssMb': stack.resultsSidecarIdleRssMb,
    'memory.sidecarRssMb': sidecarRssMb,
    ...splitValues('sidecar', sidecarSplit),
    'memory.sqliteSidecarRssMb': stack.sqliteSidecar.process.rssMb(),
    'memory.runtimeIdleRssMb': stack.runtimeIdleRssMb,
    'memory.sidecarIdleRssMb': stack.sidecarIdleRssMb,
    'memory.floorProxyRssMb': floorProxyRssMb,
    ...splitValues('floorProxy', floorProxySplit),
    'memory.nodeFloorRssMb': empty.rss / 1048576,
    ...splitValues('nodeFloor', splitRss(empty.smaps, empty.exe)),
  };
}
