// A call of a Python function, up to the point where an answer (or a failure) is recorded on the run.
// Shared by the sync and async modes and by a stream request whose function did not return an iterator.
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { ActiveRun } from '../active-runs.ts';
import type { AppTarget } from '../apps.ts';
import type { RunRecorder } from '../runs/recorder.ts';
import {
  callFunction,
  describeUpstreamError,
  isResultTooLarge,
  upstreamFailureReason,
  type RuntimeAnswer,
} from './runtime-client.ts';

/** Calls the function; a failed exchange is recorded and thrown as the problem the caller gets. */
export async function callRecorded(
  run: ActiveRun,
  target: AppTarget,
  recorder: RunRecorder,
  body: Buffer,
  stream: boolean,
  relayLargeBody = false,
): Promise<RuntimeAnswer> {
  try {
    return await callFunction(target, run.record.functionName, body, run.record.id, stream, run, relayLargeBody);
  } catch (err) {
    throw recordFailedExchange(run, recorder, err);
  }
}

/** Records a run whose exchange with the runtime failed, and returns the problem to answer with. */
export function recordFailedExchange(run: ActiveRun, recorder: RunRecorder, err: unknown): ProblemError {
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
  const detail = describeUpstreamError(err, reason);
  const problem = new ProblemError(reason === 'timeout' ? Problems.timeout : reason === 'shutdown' ? Problems.draining : Problems.upstreamFailed, detail, {
    cause: err,
  });
  recorder.finish(run.record, {
    statusCode: problem.status,
    error: { type: reason === 'timeout' ? 'Timeout' : 'RuntimeError', message: detail },
    reason,
  });
  return problem;
}
