// How a run cancelled through the management API ends, whatever stopped it (a wait for a slot or for the
// runtime, a call to the runtime, an answer being written): recorded `cancelled` with reason `cancel_requested`,
// and answered `409 run-cancelled`, or told to its webhook as the error `Cancelled`.
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { RunError } from '../crds/run-record-schema.ts';
import type { ActiveRun } from './active-runs.ts';
import type { RunRecorder } from './runs/recorder.ts';

/** Records the run as cancelled, and returns the problem its caller is answered with. */
export function recordCancelled(run: ActiveRun, recorder: RunRecorder): ProblemError {
  const started = run.record.startedAt !== null;
  const detail = started ? 'The run was cancelled at request and stopped before it finished' : 'The run was cancelled at request before it started';
  const problem = new ProblemError(Problems.runCancelled, detail);
  recorder.finish(run.record, { statusCode: problem.status, error: cancelledError(detail), reason: 'cancel_requested', cancelled: true });
  return problem;
}

export function cancelledError(message: string): RunError {
  return { type: 'Cancelled', message };
}
