// An App's run counters from its RunLogs: sums of the replicas' counts, the newest run's creation time, and a
// last run time that never goes back.
import { describe, expect, it } from 'vitest';
import type { RunLogObject } from '../management/runlog-source.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { runRecord } from '../test/support/runlog-source-kit.ts';
import { rollUpRunCounts } from './run-counters.ts';
import { summarizeRunLog } from './runlog-run-counts.ts';

function runLog(runs: RunRecord[], counts?: { total: number; success: number; failure: number; inFlight: number }): RunLogObject {
  return { apiVersion: 'runlet.dev/v1alpha1', kind: 'RunLog', metadata: { name: 'hello-1', namespace: 'team-a' }, spec: { appName: 'hello' }, status: { runs, counts } };
}

const run = (status: RunRecord['status'], createdAt: string) => runRecord({ appName: 'hello', replica: 'hello-1', status, createdAt });

describe('run counters', () => {
  it('take a RunLog’s counts as its sidecar counted them, and its newest run’s creation time', () => {
    const summary = summarizeRunLog(runLog([run('success', '2030-01-01T00:00:02Z'), run('success', '2030-01-01T00:00:09Z')], { total: 500, success: 480, failure: 15, inFlight: 1 }));
    expect(summary).toEqual({ counts: { total: 500, success: 480, failure: 15, inFlight: 1 }, lastRunAt: Date.parse('2030-01-01T00:00:09Z') });
  });

  it('count the records of a RunLog written without counts (cancelled runs count in the total only)', () => {
    const runs = ['success', 'failure', 'pending', 'running', 'cancelled', 'success'].map((status) => run(status as RunRecord['status'], '2030-01-01T00:00:00Z'));
    expect(summarizeRunLog(runLog(runs)).counts).toEqual({ total: 6, success: 2, failure: 1, inFlight: 2 });
    expect(summarizeRunLog(runLog([]))).toEqual({ counts: { total: 0, success: 0, failure: 0, inFlight: 0 }, lastRunAt: undefined });
  });

  it('sum the RunLogs of an App and show the latest run time', () => {
    const summaries = [
      { counts: { total: 10, success: 7, failure: 2, inFlight: 1 }, lastRunAt: Date.parse('2030-01-01T00:00:05Z') },
      { counts: { total: 4, success: 4, failure: 0, inFlight: 0 }, lastRunAt: Date.parse('2030-01-01T00:00:07.250Z') },
      { counts: { total: 0, success: 0, failure: 0, inFlight: 0 }, lastRunAt: undefined },
    ];
    expect(rollUpRunCounts(summaries, undefined)).toEqual({ total: 14, success: 11, failure: 2, inFlight: 1, lastRunTime: '2030-01-01T00:00:07.250Z' });
    expect(rollUpRunCounts([], undefined)).toEqual({ total: 0, success: 0, failure: 0, inFlight: 0 });
  });

  it('keep a later last run time the status already shows (its RunLog may be gone), in the notation it was written', () => {
    const previous = { total: 30, success: 30, failure: 0, inFlight: 0, lastRunTime: '2030-01-02T00:00:00Z' };
    const summaries = [{ counts: { total: 1, success: 1, failure: 0, inFlight: 0 }, lastRunAt: Date.parse('2030-01-01T00:00:00Z') }];
    expect(rollUpRunCounts(summaries, previous)).toEqual({ total: 1, success: 1, failure: 0, inFlight: 0, lastRunTime: '2030-01-02T00:00:00Z' });
    expect(rollUpRunCounts([{ ...summaries[0]!, lastRunAt: Date.parse('2030-01-02T00:00:00Z') }], previous).lastRunTime).toBe('2030-01-02T00:00:00Z');
  });
});
