// What a vanished pod left unfinished, recorded as what it has become: its runs in flight are failures that
// nothing will complete, and webhook deliveries it still owed will never be made. Pure: the RunLog janitor
// decides when (the pod is gone) and writes the result; this says what the status becomes. The same record a
// sidecar writes when it restarts in its pod and finds its predecessor's runs (markAbandoned in
// sidecar/runs/recorder.ts), with the operator's message.
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { RunLogCounts, RunLogStatus } from '../crds/runlog-schema.ts';

export interface ClosedRuns {
  /** The whole status to write: every run (a merge patch replaces the list whole), the counts moved along. */
  status: RunLogStatus;
  /** Ids of the runs in flight now recorded as `failure`, reason `replica_lost`. */
  lost: string[];
  /**
   * Ids of the runs whose pending webhook delivery is now recorded as failed, in flight or finished: the pod
   * took the whole endpoint (kept only in its own storage) with it, so nothing can deliver them.
   */
  undelivered: string[];
}

export function isInFlight(run: RunRecord): boolean {
  return run.status === 'pending' || run.status === 'running';
}

/** Something only the run's pod could have finished: the run itself, or its webhook delivery. */
export function isUnfinished(run: RunRecord): boolean {
  return isInFlight(run) || run.webhook?.state === 'pending';
}

/** The status with everything unfinished closed at `now`; undefined when nothing is unfinished. */
export function closeUnfinishedRuns(status: RunLogStatus | undefined, podName: string, now: Date): ClosedRuns | undefined {
  const runs = status?.runs ?? [];
  if (!runs.some(isUnfinished)) return undefined;
  const message = `the pod ${podName} went away before the run completed`;
  const completedAt = now.toISOString();
  const lost: string[] = [];
  const undelivered: string[] = [];
  const closed = runs.map((run): RunRecord => {
    if (!isUnfinished(run)) return run;
    if (run.webhook?.state === 'pending') undelivered.push(run.id);
    if (isInFlight(run)) lost.push(run.id);
    return closeRun(run, message, completedAt);
  });
  const counts = status?.counts === undefined ? {} : { counts: movedToFailure(status.counts, lost.length) };
  return { status: { ...status, runs: closed, ...counts }, lost, undelivered };
}

/** An unfinished run as its pod's loss leaves it: a failure if in flight, its owed webhook failed. */
export function closeRun(run: RunRecord, message: string, completedAt: string): RunRecord {
  const webhook = run.webhook?.state === 'pending' ? { ...run.webhook, state: 'failed' as const, lastError: `not delivered: ${message}` } : run.webhook;
  if (!isInFlight(run)) return { ...run, webhook };
  return { ...run, status: 'failure', reason: 'replica_lost', error: { type: 'ReplicaLost', message }, completedAt, webhook };
}

/** The sidecar counts a run in flight until it ends: `n` of them have now ended as failures. */
function movedToFailure(counts: RunLogCounts, n: number): RunLogCounts {
  return { ...counts, inFlight: Math.max(0, counts.inFlight - n), failure: counts.failure + n };
}
