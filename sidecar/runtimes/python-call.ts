// A call of a Python function, up to the point where an answer (or a failure) is recorded on the run.
// Shared by the sync and async modes and by a stream request whose function did not return an iterator.
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { ActiveRun } from '../active-runs.ts';
import { recordCancelled } from '../cancelled-run.ts';
import type { AppTarget } from '../apps.ts';
import type { RunRecorder } from '../runs/recorder.ts';
import {
  appUnavailable,
  callFunction,
  isResultTooLarge,
  neverReachedRuntime,
  upstreamFailureReason,
  upstreamRunError,
  type RuntimeAnswer,
} from './runtime-client.ts';

/**
 * Calls the function; a failed exchange is recorded and thrown as the problem the caller gets. A call that never
 * reached the runtime (down, restarting) is `503 app-unavailable`, unless the run waited in the queue: then it
 * waits for the runtime's return (within its time limit) and is sent again.
 */
export async function callRecorded(
  run: ActiveRun,
  target: AppTarget,
  recorder: RunRecorder,
  body: Buffer,
  stream: boolean,
  relayLargeBody = false,
): Promise<RuntimeAnswer> {
  for (;;) {
    try {
      return await callFunction(target, run.record.functionName, body, run.record.id, stream, run, relayLargeBody);
    } catch (err) {
      if (!neverReachedRuntime(err)) throw recordFailedExchange(run, recorder, err);
      await waitForRuntime(run, target, recorder);
    }
  }
}

/**
 * After a call that never reached the runtime: returns once it is back, for a run that waits for it (the
 * runtime marked itself not ready as it went, so this waits for its return, not for a retry at once); else
 * records the run and throws its problem, `503 app-unavailable`, or the reason the run stopped while waiting.
 */
export async function waitForRuntime(run: ActiveRun, target: AppTarget, recorder: RunRecorder): Promise<void> {
  if (!run.waitsForRuntime) throw recordFailedExchange(run, recorder, appUnavailable(target));
  try {
    await target.whenReady(run.signal);
  } catch (stopped) {
    throw recordFailedExchange(run, recorder, stopped);
  }
}

/** Records a run whose exchange with the runtime failed, and returns the problem to answer with. */
export function recordFailedExchange(run: ActiveRun, recorder: RunRecorder, err: unknown): ProblemError {
  if (run.stoppedFor === 'cancel_requested') return recordCancelled(run, recorder);
  if (err instanceof ProblemError) {
    recorder.finish(run.record, {
      statusCode: err.status,
      error: { type: err.spec.title, message: err.detail },
    });
    return err;
  }
  if (isResultTooLarge(err)) {
    const problem = new ProblemError(Problems.resultTooLarge, `${(err as Error).message}; return less, or store it and return where it is`, { cause: err });
    recorder.finish(run.record, { statusCode: problem.status, error: { type: 'ResultTooLarge', message: problem.detail } });
    return problem;
  }
  const reason = upstreamFailureReason(err, run.stoppedFor);
  const error = upstreamRunError(err, reason);
  const problem = new ProblemError(reason === 'timeout' ? Problems.timeout : reason === 'shutdown' ? Problems.draining : Problems.upstreamFailed, error.message, {
    cause: err,
  });
  recorder.finish(run.record, { statusCode: problem.status, error, reason });
  return problem;
}
