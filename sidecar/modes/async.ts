// Async mode: a place in the queue, then the run's `pending` record made durable, then `202 {"run_id"}` — in
// that order, so a crash after the answer still lists the run; the run itself goes on without a caller,
// waiting for a slot like any other.
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { ActiveRun } from '../active-runs.ts';
import type { AnswerSink } from '../../run-request/answer-sink.ts';
import type { Replica } from '../replica.ts';
import { outcomeOf, type Call, type RunLifecycle } from '../run-lifecycle.ts';
import type { RunOutcome } from './outcome.ts';
import { JSON_CONTENT_TYPE } from './sync.ts';

export async function acceptAsync(replica: Replica, lifecycle: RunLifecycle, call: Call, response: AnswerSink): Promise<ActiveRun> {
  lifecycle.reserve(call);
  const run = lifecycle.track(call, 'async', true);
  try {
    await replica.recorder.store.saveDurably(run.record);
  } catch (err) {
    lifecycle.untrack(run, call);
    replica.metrics.refused.labels('run_store').inc();
    replica.storeRefusals.note(run.record.id, err);
    // A store that says why with a problem of its own (the namespace at its run store quota) is answered so.
    if (err instanceof ProblemError) throw err;
    throw new ProblemError(Problems.runStoreUnavailable, 'The run could not be recorded durably, so it was not accepted; retry shortly', {
      cause: err,
      headers: { 'retry-after': '1' },
    });
  }
  answerAccepted(response, call.runId);
  return run;
}

/** `202 {"run_id"}`: the run is recorded durably, and goes on without its caller. */
export function answerAccepted(response: AnswerSink, runId: string): void {
  response.writeHead(202, ['content-type', JSON_CONTENT_TYPE, 'x-request-id', runId]);
  response.end('{"run_id":"' + runId + '"}');
}

/** Runs an accepted async run once it has a slot; never throws (nobody is waiting for an answer). */
export async function executeAsync(lifecycle: RunLifecycle, run: ActiveRun, call: Call, execute: () => Promise<RunOutcome>): Promise<void> {
  try {
    await lifecycle.waitForSlot(run, call);
  } catch {
    lifecycle.finalize(run, call, outcomeOf(run.record));
    return;
  }
  lifecycle.start(run);
  try {
    await lifecycle.complete(run, call, execute());
  } catch {
    // Recorded (and forwarded) by complete().
  }
}
