// Sync mode: the caller waits for `200 {"run_id","result","run_time_ms"}` or `500 {"run_id","error",...}`.
// The envelope is concatenated around the runtime's JSON text, never parsed and re-serialised.
import type { FastifyReply } from 'fastify';
import type { ActiveRun } from '../active-runs.ts';
import type { AppTarget } from '../apps.ts';
import { PROBLEM_CONTENT_TYPE } from '../problem.ts';
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
  reply: FastifyReply,
): Promise<RunOutcome> {
  const answer = await callRecorded(run, target, recorder, body, false);
  const outcome = settle(run, recorder, answer);
  sendPlainAnswer(reply, run.record.id, answer, outcome);
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

export function sendPlainAnswer(reply: FastifyReply, runId: string, answer: RuntimeAnswer, outcome: RunOutcome): void {
  switch (answer.kind) {
    case 'result':
      reply
        .code(200)
        .header('content-type', JSON_CONTENT_TYPE)
        .send('{"run_id":"' + runId + '","result":' + answer.json + ',"run_time_ms":' + outcome.runTimeMs + '}');
      return;
    case 'function-error':
      reply
        .code(answer.statusCode)
        .header('content-type', JSON_CONTENT_TYPE)
        .send('{"run_id":"' + runId + '","error":' + answer.json + ',"run_time_ms":' + outcome.runTimeMs + '}');
      return;
    case 'problem':
      reply.code(answer.statusCode).headers(answer.headers).header('content-type', PROBLEM_CONTENT_TYPE).send(answer.body);
      return;
    case 'stream':
      throw new Error('a streamed answer cannot be sent plainly');
  }
}
