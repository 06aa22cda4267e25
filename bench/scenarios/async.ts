// Async runs: how fast the sidecar answers `202` (after the run's pending record is durably stored) and how
// many it accepts per second, against sync calls of the same function through the same sidecar. wrk for all.
// The sidecar is the pod's, which is what the targets are about: its durable record is an append to its RunLog
// journal in the data dir (the pod's emptyDir), replicated by a RunLog write within ~50 ms; the SQLite
// sidecar's accepts (a SQLite commit, as outside a cluster) are measured beside it for comparison.
// Both queues are deep enough that a burst is never refused; the backlog runs after each load, and the next
// load waits until it has.
import { runWrk } from '../load/wrk.ts';
import type { LoadResult } from '../load/result.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { runUrl, type Stack } from '../stack.ts';
import { waitUntilIdle } from './idle.ts';
import { inTurn, type Settings } from './settings.ts';
import { BODY } from './sync.ts';

const SCENARIO = 'async accept';

export const ASYNC_FIGURES: FigureSpec[] = [
  { key: 'async.acceptedPerS', scenario: SCENARIO, label: 'runs accepted (202) per second, 32 connections', unit: 'runs/s', decimals: 0, target: { op: '>=', value: 3000 } },
  { key: 'async.acceptP50Ms', scenario: SCENARIO, label: '202 p50 including the durable record (a RunLog journal append, as in a pod), 1 connection', unit: 'ms', decimals: 3, target: { op: '<=', value: 2 } },
  { key: 'async.acceptRatio', scenario: SCENARIO, label: 'accepted/s ÷ sync runs/s, same sidecar, 32 connections', unit: '×', decimals: 2 },
  { key: 'async.syncRps', scenario: SCENARIO, label: 'sync runs/s, same sidecar, 32 connections', unit: 'req/s', decimals: 0 },
  { key: 'async.syncP50OneMs', scenario: SCENARIO, label: 'sync p50, same sidecar, 1 connection', unit: 'ms', decimals: 3 },
  { key: 'async.sqliteAcceptedPerS', scenario: SCENARIO, label: 'SQLite sidecar: runs accepted per second, 32 connections (`--run-store sqlite`, as outside a cluster)', unit: 'runs/s', decimals: 0 },
  { key: 'async.sqliteAcceptP50Ms', scenario: SCENARIO, label: 'SQLite sidecar: 202 p50 including the durable record (a SQLite commit), 1 connection', unit: 'ms', decimals: 3 },
  { key: 'async.errors', scenario: SCENARIO, label: 'errors and non-2xx answers (a refused run is one)', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
];

export async function measureAsync(stack: Stack, settings: Settings, round: number): Promise<RoundFigures> {
  const targets = {
    sync: { server: stack.asyncSidecar, url: runUrl(stack.asyncSidecar, 'run') },
    async: { server: stack.asyncSidecar, url: runUrl(stack.asyncSidecar, 'run', 'async=true') },
    sqliteAsync: { server: stack.sqliteSidecar, url: runUrl(stack.sqliteSidecar, 'run', 'async=true') },
  };
  const modes = ['sync', 'async', 'sqliteAsync'] as const;
  const loaded: Partial<Record<keyof typeof targets, LoadResult>> = {};
  const unloaded: Partial<Record<keyof typeof targets, LoadResult>> = {};
  for (const mode of inTurn(modes, round)) {
    loaded[mode] = await runWrk({ url: targets[mode].url, connections: 32, durationS: settings.durationS, body: BODY });
    await waitUntilIdle(targets[mode].server.adminUrl);
  }
  for (const mode of inTurn(modes, round)) {
    unloaded[mode] = await runWrk({ url: targets[mode].url, connections: 1, durationS: settings.latencyDurationS, body: BODY });
    await waitUntilIdle(targets[mode].server.adminUrl);
  }
  const many = loaded as Required<typeof loaded>;
  const one = unloaded as Required<typeof unloaded>;
  return {
    'async.acceptedPerS': many.async.perSecond,
    'async.acceptP50Ms': one.async.latencyMs!.p50,
    'async.acceptRatio': many.async.perSecond / many.sync.perSecond,
    'async.syncRps': many.sync.perSecond,
    'async.syncP50OneMs': one.sync.latencyMs!.p50,
    'async.sqliteAcceptedPerS': many.sqliteAsync.perSecond,
    'async.sqliteAcceptP50Ms': one.sqliteAsync.latencyMs!.p50,
    'async.errors': [...Object.values(many), ...Object.values(one)].reduce((sum, result) => sum + result.errors, 0),
  };
}
