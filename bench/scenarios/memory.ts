// Resident memory: the sidecars' right after the sync scenario's loads (the pod's, which the target is about, and
// the SQLite one), the runtime's before its first call, and for scale, an empty Node process and the pod's
// sidecar before its first call.
import { execFileSync } from 'node:child_process';
import type { FigureSpec, RoundFigures } from '../report.ts';
import type { Stack } from '../stack.ts';

const SCENARIO = 'memory';

export const MEMORY_FIGURES: FigureSpec[] = [
  { key: 'memory.sidecarRssMb', scenario: SCENARIO, label: 'sidecar RSS after the sync scenario', unit: 'MB', decimals: 1, target: { op: '<=', value: 80 } },
  { key: 'memory.sqliteSidecarRssMb', scenario: SCENARIO, label: 'SQLite sidecar RSS after the sync scenario', unit: 'MB', decimals: 1 },
  { key: 'memory.runtimeIdleRssMb', scenario: SCENARIO, label: 'Python runtime RSS, idle (trivial app, before any call)', unit: 'MB', decimals: 1, target: { op: '<=', value: 30 } },
  { key: 'memory.sidecarIdleRssMb', scenario: SCENARIO, label: 'sidecar RSS right after start, before any call', unit: 'MB', decimals: 1 },
  { key: 'memory.floorProxyRssMb', scenario: SCENARIO, label: 'floor proxy RSS after the same loads (node:http + the runtime client, same NODE_OPTIONS)', unit: 'MB', decimals: 1 },
  { key: 'memory.nodeFloorRssMb', scenario: SCENARIO, label: 'an empty Node process (`node -e`), same binary', unit: 'MB', decimals: 1 },
];

/** Call right after measureSync. */
export function measureMemory(stack: Stack): RoundFigures {
  return {
    'memory.sidecarRssMb': stack.sidecar.process.rssMb(),
    'memory.sqliteSidecarRssMb': stack.sqliteSidecar.process.rssMb(),
    'memory.runtimeIdleRssMb': stack.runtimeIdleRssMb,
    'memory.sidecarIdleRssMb': stack.sidecarIdleRssMb,
    'memory.floorProxyRssMb': stack.floorProxy.process.rssMb(),
    'memory.nodeFloorRssMb': Number(execFileSync(process.execPath, ['-e', 'process.stdout.write(String(process.memoryUsage().rss))'], { encoding: 'utf8' })) / 1048576,
  };
}
