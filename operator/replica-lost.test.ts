// What the status of a gone pod's RunLog becomes: runs in flight failed as replica_lost, owed webhooks failed,
// counts moved along, everything else as it was.
import { describe, expect, it } from 'vitest';
import type { RunRecord, WebhookRecord } from '../crds/run-record-schema.ts';
import type { RunLogStatus } from '../crds/runlog-schema.ts';
import { runRecord } from '../test/support/runlog-source-kit.ts';
import { closeUnfinishedRuns } from './replica-lost.ts';

const POD = 'hello-7d9c-aaaaa';
const NOW = new Date('2030-01-01T12:00:00.000Z');
const MESSAGE = `the pod ${POD} went away before the run completed`;

const webhook = (state: WebhookRecord['state']): WebhookRecord => ({ endpoint: 'https://hooks.example/runs', state, attempts: state === 'pending' ? 0 : 1, lastStatusCode: null, lastError: null });
const run = (status: RunRecord['status'], overrides: Partial<RunRecord> = {}): RunRecord => runRecord({ appName: 'hello', replica: POD, status, ...overrides });

describe('closing what a gone pod left unfinished', () => {
  it('fails its pending and running runs as replica_lost at the given time, their pending webhooks as not delivered', () => {
    const pending = run('pending', { async: true, mode: 'async', webhook: webhook('pending') });
    const running = run('running', { async: true, mode: 'async' });
    const done = run('success');
    const status: RunLogStatus = { runs: [running, pending, done], counts: { total: 9, success: 6, failure: 1, inFlight: 2 } };

    const closed = closeUnfinishedRuns(status, POD, NOW)!;
    expect(closed.lost).toEqual([running.id, pending.id]);
    expect(closed.undelivered).toEqual([pending.id]);
    expect(closed.status.runs[0]).toEqual({ ...running, status: 'failure', reason: 'replica_lost', error: { type: 'ReplicaLost', message: MESSAGE }, completedAt: NOW.toISOString() });
    expect(closed.status.runs[1]).toEqual({
      ...pending,
      status: 'failure',
      reason: 'replica_lost',
      error: { type: 'ReplicaLost', message: MESSAGE },
      completedAt: NOW.toISOString(),
      webhook: { ...pending.webhook, state: 'failed', lastError: `not delivered: ${MESSAGE}` },
    });
    expect(closed.status.runs[2]).toBe(done);
    expect(closed.status.counts).toEqual({ total: 9, success: 6, failure: 3, inFlight: 0 });
    // The input is the watch cache's object: left as it was.
    expect(status.runs[0]!.status).toBe('running');
  });

  it('fails the pending webhook of a finished run and leaves the run and the counts alone', () => {
    const delivered = run('success', { webhook: webhook('delivered') });
    const owed = run('failure', { webhook: webhook('pending') });
    const closed = closeUnfinishedRuns({ runs: [owed, delivered], counts: { total: 2, success: 1, failure: 1, inFlight: 0 } }, POD, NOW)!;
    expect(closed).toMatchObject({ lost: [], undelivered: [owed.id] });
    expect(closed.status.runs[0]).toEqual({ ...owed, webhook: { ...owed.webhook, state: 'failed', lastError: `not delivered: ${MESSAGE}` } });
    expect(closed.status.runs[1]).toBe(delivered);
    expect(closed.status.counts).toEqual({ total: 2, success: 1, failure: 1, inFlight: 0 });
  });

  it('writes no counts when the RunLog had none, and nothing at all when nothing is unfinished', () => {
    const closed = closeUnfinishedRuns({ runs: [run('running')] }, POD, NOW)!;
    expect(closed.status.counts).toBeUndefined();
    expect(closeUnfinishedRuns({ runs: [run('success'), run('cancelled'), run('failure')] }, POD, NOW)).toBeUndefined();
    expect(closeUnfinishedRuns(undefined, POD, NOW)).toBeUndefined();
  });
});
