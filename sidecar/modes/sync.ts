// Sync mode: the caller waits for `200 {"run_id","result","run_time_ms"}` or `500 {"run_id","error",...}`.
// The envelope is concatenated around the runtime's JSON text, never parsed and re-serialised.
import { PROBLEM_CONTENT_TYPE } from '../../crds/problem.ts';
import type { ActiveRun } from '../active-runs.ts';
import type { AnswerSink } from '../answer-sink.ts';
import type { AppTarget } from '../apps.ts';
import type { RunRecorder } from '../runs/recorder.ts';
import type { RuntimeAnswer } from '../runtime-client.ts';
import type { RunOutcome } from './outcome.ts';
import { callRecorded, recordFailedExchange } from './python-call.ts';

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

export async function runSync(
  run: ActiveRun,
  target: AppTarget,
  recorder: RunRecorder,
  body: Buffer,
  response: AnswerSink,
): Promise<RunOutcome> {
  const answer = await callRecorded(run, target, recorder, body, false);
  const outcome = settle(run, recorder, answer);
  sendPlainAnswer(response, run.record.id, answer, outcome);
  return outcome;
}

/** Records how a non-streamed call ended. */
export function settle(run: ActiveRun, recorder: RunRecorder, answer: RuntimeAnswer): RunOutcome {
  switch (answer.kind) {
    case 'result': {
      const runTimeMs = recorder.finish(run.record, { statusCode: 200 });
      return { statusCode: 200, success: true, resultJson: answer.json, error: null, runTimeMs };
    }
    case 'function-error':
    case 'problem': {
      const runTimeMs = recorder.finish(run.record, { statusCode: answer.statusCode, error: answer.error });
      return { statusCode: answer.statusCode, success: false, resultJson: null, error: answer.error, runTimeMs };
    }
    case 'stream':
      answer.body.destroy();
      throw recordFailedExchange(run, recorder, new Error('the runtime streamed an answer that was not asked for'));
  }
}

export function sendPlainAnswer(response: AnswerSink, runId: string, answer: RuntimeAnswer, outcome: RunOutcome): void {
  switch (answer.kind) {
    case 'result':
      // A flat header list: Node writes it as given, without building and walking a header object.
      response.writeHead(200, ['content-type', JSON_CONTENT_TYPE, 'x-request-id', runId]);
      response.end('{"run_id":"' + runId + '","result":' + answer.json + ',"run_time_ms":' + outcome.runTimeMs + '}');
      return;
    case 'function-error':
      response.writeHead(answer.statusCode, ['content-type', JSON_CONTENT_TYPE, 'x-request-id', runId]);
      response.end('{"run_id":"' + runId + '","error":' + answer.json + ',"run_time_ms":' + outcome.runTimeMs + '}');
      return;
    case 'problem':
      response.writeHead(answer.statusCode, { ...answer.headers, 'content-type': PROBLEM_CONTENT_TYPE, 'x-request-id': runId });
      response.end(answer.body);
      return;
    case 'stream':
      throw new Error('a streamed answer cannot be sent plainly');
  }
}
