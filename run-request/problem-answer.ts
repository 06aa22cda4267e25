// A refused call's answer, as the run interface gives it wherever the call is refused: the sidecar's run port,
// its front, or the holder while the app is at zero. The body is the problem's JSON (crds/problem.ts).
import { PROBLEM_CONTENT_TYPE, type ProblemError } from '../crds/problem.ts';
import type { AnswerSink } from './answer-sink.ts';

/** Answers with a problem; once an answer has begun, the connection is cut instead (the body is torn). */
export function sendProblem(response: AnswerSink, runId: string, problem: ProblemError): void {
  if (response.headersSent || response.destroyed) {
    response.destroy();
    return;
  }
  response.writeHead(problem.status, { ...problem.headers, 'content-type': PROBLEM_CONTENT_TYPE, 'x-request-id': runId });
  response.end(JSON.stringify(problem.toBody()));
}
