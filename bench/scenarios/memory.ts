// Resident memory: the sidecar's right after the sync scenario's loads, the runtime's before its first call.
import type { FigureSpec, RoundFigures } from '../report.ts';
import type { Stack } from '../stack.ts';

const SCENARIO = 'memory';

export const MEMORY_FIGURES: FigureSpec[] = [
  { key: 'memory.sidecarRssMb', scenario: SCENARIO, label: 'sidecar RSS after the sync scenario', unit: 'MB', decimals: 1, target: { op: '<=', value: 80 } },
  { key: 'memory.runtimeIdleRssMb', scenario: SCENARIO, label: 'Python runtime RSS, idle (trivial app, before any call)', unit: 'MB', decimals: 1, target: { op: '<=', value: 30 } },
];

/** Call right after measureSync. */
export function measureMemory(stack: Stack): RoundFigures {
  return {
    'memory.sidecarRssMb': stack.sidecar.process.rssMb(),
    'memory.runtimeIdleRssMb': stack.runtimeIdleRssMb,
  };
}
