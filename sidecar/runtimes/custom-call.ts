// An async call of a custom app: the request was buffered at acceptance (the caller has its 202 and is gone),
// and the app's answer is kept for the webhook rather than streamed to anyone.
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ActiveRun } from '../active-runs.ts';
import type { AppTarget } from '../apps.ts';
import type { RunRecorder } from '../runs/recorder.ts';
import { capturedAsJson, connectionLost, connectionRefused } from './custom-proxy.ts';
import type { RunOutcome } from '../modes/outcome.ts';
import { recordFailedExchange, waitForRuntime } from './python-call.ts';

export interface BufferedCall {
  method: string;
  forwardPath: string;
  headers: IncomingHttpHeaders;
  body: Buffer | null;
  /** The answer is kept up to this many bytes; a longer one fails the run rather than forward a torn body. */
  answerLimitBytes: number;
}

export async function callCustomBuffered(
  run: ActiveRun,
  target: AppTarget,
  recorder: RunRecorder,
  call: BufferedCall,
): Promise<RunOutcome> {
  let answer: BufferedAnswer;
  for (;;) {
    const pool = target.ready ? target.pool : null;
    // The runtime is down (restarting): the run, which never reached it, waits for its return.
    if (!pool) {
      await waitForRuntime(run, target, recorder);
      continue;
    }
    try {
      answer = await exchange(pool, run, call);
      break;
    } catch (err) {
      if (!connectionRefused(err)) {
        if (connectionLost(err) && target.pool === pool) target.runtimeGone();
        throw recordFailedExchange(run, recorder, err);
      }
      if (target.pool === pool) target.runtimeGone();
      await waitForRuntime(run, target, recorder);
    }
  }
  const { statusCode, contentType, chunks } = answer;
  const success = statusCode < 400;
  const error = success ? null : { type: `HTTP ${statusCode}`, message: `The app answered ${statusCode}` };
  const runTimeMs = recorder.finish(run.record, { statusCode, error });
  return { statusCode, success, resultJson: capturedAsJson(chunks, contentType), error, runTimeMs };
}

interface BufferedAnswer {
  statusCode: number;
  contentType: string | string[] | undefined;
  chunks: Buffer[];
}

async function exchange(pool: Dispatcher, run: ActiveRun, call: BufferedCall): Promise<BufferedAnswer> {
  const response = await pool.request({
    method: call.method as Dispatcher.HttpMethod,
    path: call.forwardPath,
    headers: call.headers,
    body: call.body,
    signal: run.signal,
  });
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of response.body) {
    length += (chunk as Buffer).length;
    if (length > call.answerLimitBytes) {
      response.body.destroy();
      throw new Error(`the app's answer is larger than ${call.answerLimitBytes} bytes, too large to record and forward`);
    }
    chunks.push(chunk as Buffer);
  }
  return { statusCode: response.statusCode, contentType: response.headers['content-type'], chunks };
}
