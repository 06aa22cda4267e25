// An async call of a custom app: the request was buffered at acceptance (the caller has its 202 and is gone),
// and the app's answer is kept for the webhook rather than streamed to anyone.
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ActiveRun } from '../active-runs.ts';
import type { AppTarget } from '../apps.ts';
import type { RunRecorder } from '../runs/recorder.ts';
import { appUnavailable } from './runtime-client.ts';
import { capturedAsJson } from './custom-proxy.ts';
import type { RunOutcome } from '../modes/outcome.ts';
import { recordFailedExchange } from './python-call.ts';

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
  const pool = target.pool;
  if (!pool) throw recordFailedExchange(run, recorder, appUnavailable(target));
  let statusCode: number;
  let contentType: string | string[] | undefined;
  const chunks: Buffer[] = [];
  try {
    const response = await pool.request({
      method: call.method as Dispatcher.HttpMethod,
      path: call.forwardPath,
      headers: call.headers,
      body: call.body,
      signal: run.signal,
    });
    statusCode = response.statusCode;
    contentType = response.headers['content-type'];
    let length = 0;
    for await (const chunk of response.body) {
      length += (chunk as Buffer).length;
      if (length > call.answerLimitBytes) {
        response.body.destroy();
        throw new Error(`the app's answer is larger than ${call.answerLimitBytes} bytes, too large to record and forward`);
      }
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    throw recordFailedExchange(run, recorder, err);
  }
  const success = statusCode < 400;
  const error = success ? null : { type: `HTTP ${statusCode}`, message: `The app answered ${statusCode}` };
  const runTimeMs = recorder.finish(run.record, { statusCode, error });
  return { statusCode, success, resultJson: capturedAsJson(chunks, contentType), error, runTimeMs };
}
