// Sync mode: the caller waits for `200 {"run_id","result","run_time_ms"}` or `500 {"run_id","error",...}`.
// The envelope is concatenated around the runtime's JSON text, never parsed and re-serialised. A large result
// is passed on as it arrives, with backpressure, so the sidecar never holds it whole (unless a webhook needs it).
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { PROBLEM_CONTENT_TYPE } from '../../crds/problem.ts';
import type { ActiveRun } from '../active-runs.ts';
import type { AnswerSink } from '../../run-request/answer-sink.ts';
import type { AppTarget } from '../apps.ts';
import { streamedResponse, type Exchange } from '../exchange.ts';
import type { RunRecorder } from '../runs/recorder.ts';
import type { RuntimeAnswer } from '../runtimes/runtime-client.ts';
import type { RunOutcome } from './outcome.ts';
import { callRecorded, recordFailedExchange } from '../runtimes/python-call.ts';

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

export async function runSync(
  run: ActiveRun,
  target: AppTarget,
  recorder: RunRecorder,
  body: Buffer,
  exchange: Exchange,
  /** A webhook will be sent the result: a large one is relayed keeping one copy of it. */
  keepResult: boolean,
): Promise<RunOutcome> {
  const answer = await callRecorded(run, target, recorder, body, false, true);
  if (answer.kind === 'relayed-result') return relayResult(run, recorder, answer.body, streamedResponse(exchange), keepResult);
  const outcome = settle(run, recorder, answer);
  sendPlainAnswer(exchange.answer, run.record.id, answer, outcome);
  return outcome;
}

/** Writes a large result into the caller's answer as the runtime sends it, then records the run. */
async function relayResult(run: ActiveRun, recorder: RunRecorder, result: Readable, response: ServerResponse, keepResult: boolean): Promise<RunOutcome> {
  const runId = run.record.id;
  // Chunked: the run time, in the envelope's last member, is known only once the result has passed.
  response.writeHead(200, ['content-type', JSON_CONTENT_TYPE, 'x-request-id', runId]);
  run.watchCaller(response.socket);
  response.write('{"run_id":"' + runId + '","result":');
  const decoder = keepResult ? new StringDecoder('utf8') : null;
  let kept = '';
  let cut = false;
  try {
    for await (const chunk of result) {
      if (decoder) kept += decoder.write(chunk as Buffer);
      if (!response.write(chunk) && !(await drained(response, run.signal))) {
        cut = true;
        break;
      }
    }
  } catch (err) {
    response.destroy();
    throw recordFailedExchange(run, recorder, err);
  }
  if (cut || response.destroyed) {
    // Cut while it waited for the caller to read: the caller left, read nothing for the client stall timeout,
    // or the run's time ran out.
    result.destroy();
    response.destroy();
    if (run.stoppedFor !== null && run.stoppedFor !== 'client_stalled' && run.stoppedFor !== 'client_closed') {
      throw recordFailedExchange(run, recorder, run.stopReason);
    }
    const reason = run.stoppedFor ?? 'client_closed';
    const runTimeMs = recorder.finish(run.record, { statusCode: 200, cancelled: true, reason });
    const message =
      reason === 'client_closed'
        ? 'the caller closed the connection before the result was sent'
        : 'the caller read nothing of the result for the client stall timeout; the result was cut';
    return { statusCode: 200, success: false, resultJson: null, error: { type: 'Cancelled', message }, runTimeMs };
  }
  const runTimeMs = recorder.finish(run.record, { statusCode: 200 });
  response.end(',"run_time_ms":' + runTimeMs + '}');
  return { statusCode: 200, success: true, resultJson: decoder ? kept + decoder.end() : null, error: null, runTimeMs };
}

/**
 * Resolves true once the response can take more, false if the caller went away first or the run was stopped
 * (its caller read nothing for the client stall timeout, or its time ran out).
 */
function drained(response: ServerResponse, stopped: AbortSignal): Promise<boolean> {
  if (stopped.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const settle = (writable: boolean): void => {
      response.off('drain', onDrain);
      response.off('close', onClose);
      stopped.removeEventListener('abort', onClose);
      resolve(writable);
    };
    const onDrain = (): void => settle(true);
    const onClose = (): void => settle(false);
    response.once('drain', onDrain);
    response.once('close', onClose);
    stopped.addEventListener('abort', onClose, { once: true });
  });
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
    case 'relayed-result':
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
    case 'relayed-result':
      throw new Error('a streamed answer cannot be sent plainly');
  }
}
