// What the janitor decides for a RunLog, case by case: whose pod runs, what it holds, how old it is.
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { RunLog } from '../crds/runlog-schema.ts';
import { runRecord } from '../test/support/runlog-source-kit.ts';
import type { KubeObject } from '../kube/objects.ts';
import { HELD_RUNS_LABEL } from './held-runs-log.ts';
import { HELD_RUN_DELIVERY_GRACE_MS, judgeRunLog, lastWriteTime, podRuns, type PodObject } from './runlog-verdict.ts';

const POD = 'hello-7d9c-aaaaa';
const CREATED = '2030-01-01T00:00:00Z';
const HOUR_MS = 3_600_000;

function runLog(runs: RunRecord[]): RunLog & KubeObject {
  return {
    apiVersion: 'runlet.dev/v1alpha1',
    kind: 'RunLog',
    metadata: { name: POD, namespace: 'team-a', creationTimestamp: CREATED, resourceVersion: '7' },
    spec: { appName: 'hello' },
    status: { runs },
  };
}

function run(status: RunRecord['status'], at: string, overrides: Partial<RunRecord> = {}): RunRecord {
  const finished = status !== 'pending' && status !== 'running';
  return runRecord({ appName: 'hello', replica: POD, status, createdAt: at, startedAt: status === 'pending' ? null : at, completedAt: finished ? at : null, ...overrides });
}

function pod(phase?: string, deletionTimestamp?: string): PodObject {
  return { metadata: { name: POD, namespace: 'team-a', ...(deletionTimestamp === undefined ? {} : { deletionTimestamp }) } as PodObject['metadata'], status: { phase } };
}

const at = (ms: number) => new Date(Date.parse(CREATED) + ms);
const iso = (ms: number) => at(ms).toISOString();

describe('whether a pod runs', () => {
  it('runs while the API server has it and it has not ended, also while it is being deleted (its sidecar drains)', () => {
    expect(podRuns(pod('Running'))).toBe(true);
    expect(podRuns(pod('Pending'))).toBe(true);
    expect(podRuns(pod(undefined))).toBe(true);
    expect(podRuns(pod('Running', CREATED))).toBe(true);
    expect(podRuns(pod('Failed'))).toBe(false);
    expect(podRuns(pod('Succeeded'))).toBe(false);
    expect(podRuns(undefined)).toBe(false);
  });
});

describe('the verdict on a RunLog', () => {
  const retentionSeconds = 3600;

  it('keeps the RunLog of a running pod, whatever it holds and however old', () => {
    const log = runLog([run('running', iso(0)), run('success', iso(0))]);
    expect(judgeRunLog(log, { pod: pod('Running'), retentionSeconds, now: at(100 * HOUR_MS) })).toEqual({ action: 'keep', why: 'pod-runs' });
    expect(judgeRunLog(log, { pod: pod('Running', iso(1)), retentionSeconds, now: at(100 * HOUR_MS) })).toEqual({ action: 'keep', why: 'pod-runs' });
  });

  it('closes the runs a gone or ended pod left in flight, and the webhooks it still owed', () => {
    const inFlight = runLog([run('pending', iso(0)), run('running', iso(0)), run('success', iso(0)), run('failure', iso(0))]);
    expect(judgeRunLog(inFlight, { pod: undefined, retentionSeconds, now: at(1) })).toEqual({ action: 'close-runs', runs: 2 });
    expect(judgeRunLog(inFlight, { pod: pod('Failed'), retentionSeconds, now: at(1) })).toEqual({ action: 'close-runs', runs: 2 });
    const owed = runLog([run('success', iso(0), { webhook: { endpoint: 'https://hooks.example/x', state: 'pending', attempts: 1, lastStatusCode: 503, lastError: null } })]);
    expect(judgeRunLog(owed, { pod: undefined, retentionSeconds, now: at(1) })).toEqual({ action: 'close-runs', runs: 1 });
    // Even past the retention: runs are closed first, and the closing is a write that starts the retention anew.
    expect(judgeRunLog(inFlight, { pod: undefined, retentionSeconds, now: at(100 * HOUR_MS) })).toMatchObject({ action: 'close-runs' });
  });

  it('gives the pending webhook of a cancelled held run, in its App’s RunLog of held runs (no pod), a delivery’s time before closing it', () => {
    const pending = { endpoint: 'https://hooks.example/x', state: 'pending' as const, attempts: 0, lastStatusCode: null, lastError: null };
    const held = runLog([run('cancelled', iso(0), { completedAt: iso(0), webhook: pending })]);
    held.metadata = { ...held.metadata, labels: { [HELD_RUNS_LABEL]: 'true' } };
    expect(judgeRunLog(held, { pod: undefined, retentionSeconds, now: at(60_000) })).toMatchObject({ action: 'keep' });
    expect(judgeRunLog(held, { pod: undefined, retentionSeconds, now: at(HELD_RUN_DELIVERY_GRACE_MS + 1) })).toEqual({ action: 'close-runs', runs: 1 });
  });

  it('keeps the finished runs of a gone pod for the retention after its last write, then deletes the RunLog', () => {
    const log = runLog([run('success', iso(0)), run('failure', iso(10_000), { createdAt: iso(5_000) })]);
    const lastWrite = at(10_000);
    expect(judgeRunLog(log, { pod: undefined, retentionSeconds, now: at(HOUR_MS) })).toEqual({ action: 'keep', why: 'retained', until: at(10_000 + HOUR_MS) });
    expect(judgeRunLog(log, { pod: undefined, retentionSeconds, now: at(10_000 + HOUR_MS - 1) })).toMatchObject({ action: 'keep' });
    expect(judgeRunLog(log, { pod: undefined, retentionSeconds, now: at(10_000 + HOUR_MS) })).toEqual({ action: 'delete', lastWrite });
    expect(judgeRunLog(log, { pod: pod('Succeeded'), retentionSeconds: 60, now: at(10_000 + 60_000) })).toEqual({ action: 'delete', lastWrite });
  });

  it('counts an empty RunLog from its creation', () => {
    const empty = runLog([]);
    expect(judgeRunLog(empty, { pod: undefined, retentionSeconds, now: at(HOUR_MS - 1) })).toMatchObject({ action: 'keep', why: 'retained' });
    expect(judgeRunLog(empty, { pod: undefined, retentionSeconds, now: at(HOUR_MS) })).toEqual({ action: 'delete', lastWrite: at(0) });
  });
});

describe('the last write of a RunLog', () => {
  it('is the latest time any of its runs shows: created, started or completed; never before its creation', () => {
    const runs = [
      run('success', iso(3_000), { createdAt: iso(1_000), startedAt: iso(2_000) }),
      run('running', iso(4_000), { createdAt: iso(4_000), startedAt: iso(4_500) }),
      run('pending', iso(2_500)),
    ];
    expect(lastWriteTime(runLog(runs))).toEqual(at(4_500));
    expect(lastWriteTime(runLog([run('success', '2029-12-31T00:00:00Z')]))).toEqual(at(0));
  });
});
