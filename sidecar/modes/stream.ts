// Stream mode: each item the function yields leaves as one SSE event as soon as the runtime sends it; with
// gzip, the compressor is flushed after every batch of events so nothing waits in its buffer.
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Gzip } from 'node:zlib';
import type { ActiveRun } from '../active-runs.ts';
import { cancelledError } from '../cancelled-run.ts';
import type { AppTarget } from '../apps.ts';
import type { RunRecorder } from '../runs/recorder.ts';
import { upstreamFailureReason, upstreamRunError } from '../runtimes/runtime-client.ts';
import { errorEvent, RuntimeStreamDecoder } from '../sse/runtime-stream.ts';
import type { RunError } from '../../crds/run-record-schema.ts';
import type { RunOutcome } from './outcome.ts';
import { callRecorded } from '../runtimes/python-call.ts';
import { sendPlainAnswer, settle } from './sync.ts';

const require = createRequire(import.meta.url);
let zlib: typeof import('node:zlib') | undefined;

/** node:zlib on the first gzipped stream: 2 MB of RSS a sidecar whose callers never ask for gzip does not hold. */
function loadZlib(): typeof import('node:zlib') {
  zlib ??= require('node:zlib') as typeof import('node:zlib');
  return zlib;
}

export async function runStream(
  run: ActiveRun,
  target: AppTarget,
  recorder: RunRecorder,
  body: Buffer,
  response: ServerResponse,
  /** `keepItems`: a webhook is to receive the items' list, kept up to the app's result limit. */
  options: { gzip: boolean; keepItems: boolean },
): Promise<RunOutcome> {
  const answer = await callRecorded(run, target, recorder, body, true);
  if (answer.kind !== 'stream') {
    // The function returned a value, not an iterator: it is answered like a sync call.
    const outcome = settle(run, recorder, answer);
    sendPlainAnswer(response, run.record.id, answer, outcome);
    return outcome;
  }

  response.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-request-id': run.record.id,
    // Ingress controllers (nginx) would otherwise buffer the stream.
    'x-accel-buffering': 'no',
    ...(options.gzip ? { 'content-encoding': 'gzip', vary: 'accept-encoding' } : {}),
  });
  run.watchCaller(response.socket);
  const sink = new EventSink(response, options.gzip, run.signal);
  const decoder = new RuntimeStreamDecoder({ keepLimitBytes: options.keepItems ? target.resultLimitBytes : null });
  const callerGone = (): void => run.stop('client_closed');
  response.once('close', callerGone);

  let failure: unknown = null;
  try {
    answer.body.setEncoding('utf8');
    for await (const chunk of answer.body) {
      const events = decoder.push(chunk as string);
      if (events) await sink.write(events);
      if (decoder.state !== 'open') break;
    }
  } catch (err) {
    failure = err;
  } finally {
    response.off('close', callerGone);
    if (decoder.state !== 'open') answer.body.destroy();
  }

  const resultJson = decoder.items ? '[' + decoder.items.join(',') + ']' : null;
  if (run.stoppedFor === 'client_closed' || run.stoppedFor === 'client_stalled') {
    // A stalled caller reads nothing more: the stream is cut, not ended.
    if (run.stoppedFor === 'client_stalled') response.destroy();
    const runTimeMs = recorder.finish(run.record, { statusCode: 200, cancelled: true, reason: run.stoppedFor });
    const error = { type: 'Cancelled', message: callerGoneMessage(run.stoppedFor, decoder.itemCount) };
    return { statusCode: 200, success: false, resultJson, error, runTimeMs };
  }
  if (decoder.state === 'done') {
    await sink.end('');
    const runTimeMs = recorder.finish(run.record, { statusCode: 200 });
    // The caller had every item; the webhook cannot: it is told why, as for a sync result over the limit.
    if (decoder.keptOverLimit) return { statusCode: 502, success: false, resultJson: null, error: listTooLarge(decoder, target), runTimeMs };
    return { statusCode: 200, success: true, resultJson, error: null, runTimeMs };
  }
  if (decoder.state === 'error') {
    await sink.end('');
    const runTimeMs = recorder.finish(run.record, { statusCode: 500, error: decoder.error });
    return { statusCode: 500, success: false, resultJson: null, error: decoder.error, runTimeMs };
  }
  if (run.stoppedFor === 'cancel_requested') {
    const error = cancelledError(`The run was cancelled at request after ${decoder.itemCount} items`);
    await sink.end(errorEvent(JSON.stringify(error)));
    const runTimeMs = recorder.finish(run.record, { statusCode: 200, error, reason: 'cancel_requested', cancelled: true });
    return { statusCode: 200, success: false, resultJson: null, error, runTimeMs };
  }
  // The stream was cut: the runtime died, or the platform stopped the run (timeout, shutdown).
  const reason = upstreamFailureReason(failure ?? new Error('stream ended without its last line'), run.stoppedFor);
  const error = upstreamRunError(failure, reason);
  await sink.end(errorEvent(JSON.stringify(error)));
  const runTimeMs = recorder.finish(run.record, { statusCode: 500, error, reason });
  return { statusCode: 500, success: false, resultJson: null, error, runTimeMs };
}

function listTooLarge(decoder: RuntimeStreamDecoder, target: AppTarget): RunError {
  return {
    type: 'ResultTooLarge',
    message:
      `the stream's ${decoder.itemCount} items make a list of ${decoder.listBytes} bytes, over the result limit of ` +
      `${target.resultLimitBytes} bytes: the caller received them all, the webhook receives none; yield less, or store them and yield where they are`,
  };
}

function callerGoneMessage(reason: 'client_closed' | 'client_stalled', itemCount: number): string {
  return reason === 'client_closed'
    ? `the caller closed the stream after ${itemCount} items`
    : `the caller read nothing of the stream for the client stall timeout; cut after ${itemCount} items`;
}

/**
 * Writes SSE text to the caller with backpressure, compressed when the caller accepts gzip. Waits end when the
 * run is stopped (the caller went away, or read nothing for the client stall timeout), so a stalled caller
 * never pins a run.
 */
class EventSink {
  readonly #response: ServerResponse;
  readonly #gzip: Gzip | null;
  readonly #stopped: AbortSignal;

  constructor(response: ServerResponse, gzip: boolean, stopped: AbortSignal) {
    this.#response = response;
    this.#stopped = stopped;
    this.#gzip = gzip ? loadZlib().createGzip() : null;
    this.#gzip?.pipe(response);
  }

  async write(text: string): Promise<void> {
    if (this.#response.destroyed) return;
    this.#stopped.throwIfAborted();
    if (!this.#gzip) {
      if (!this.#response.write(text)) await once(this.#response, 'drain', { signal: this.#stopped });
      return;
    }
    const gzip = this.#gzip;
    const stopped = this.#stopped;
    gzip.write(text);
    await new Promise<void>((resolve, reject) => {
      const onStop = (): void => reject(stopped.reason);
      stopped.addEventListener('abort', onStop, { once: true });
      gzip.flush(loadZlib().constants.Z_SYNC_FLUSH, () => {
        stopped.removeEventListener('abort', onStop);
        resolve();
      });
    });
  }

  async end(text: string): Promise<void> {
    if (this.#response.destroyed) return;
    const target = this.#gzip ?? this.#response;
    target.end(text);
    if (!this.#response.writableFinished) await once(this.#response, 'finish').catch(() => undefined);
  }
}
