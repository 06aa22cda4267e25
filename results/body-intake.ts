// Reading one batch's body into memory, metered: every chunk is counted into the collector's byte budget as it
// arrives (byte-budget.ts), the body may not pass its size limit (a chunked one is stopped at the first chunk
// past it), and it must keep arriving: after a grace, a body that receives less than `minBytesPerSecond` in a
// window is cut, its bytes given back. A sender that trickles, or stops once it holds its bytes, holds them for
// a few seconds, not for the server's whole request timeout.
import type { Readable } from 'node:stream';
import type { BodyHolding } from './byte-budget.ts';

/** How fast a body must arrive once its grace is over. */
export interface BodyPace {
  /** Bytes a second, at least, over each window after the grace. */
  minBytesPerSecond: number;
  /** From the request's start, before the rate is asked for. */
  graceMs: number;
  /** What the rate is measured over. */
  windowMs: number;
}

/** A sidecar on a working network sends a batch in well under a second: these cut only the stalled. */
export const DEFAULT_BODY_PACE: BodyPace = { minBytesPerSecond: 32 * 1024, graceMs: 5_000, windowMs: 5_000 };

export type BodyRefusalReason = 'too-large' | 'budget' | 'preempted' | 'slow' | 'aborted';

/** Why a body was not read whole: answered with `status`, the connection closed. */
export class BodyRefusal extends Error {
  readonly status: 400 | 408 | 413 | 503;
  readonly reason: BodyRefusalReason;

  constructor(status: 400 | 408 | 413 | 503, reason: BodyRefusalReason, message: string) {
    super(message);
    this.name = 'BodyRefusal';
    this.status = status;
    this.reason = reason;
  }
}

export interface BodyIntake {
  holding: BodyHolding;
  /** The largest body taken. */
  maxBytes: number;
  pace: BodyPace;
  /** Aborted when the budget cut this body for another namespace's. */
  preempted: AbortSignal;
  /** When the request arrived (performance.now() ms): the grace runs from it. */
  startedAt: number;
}

/** The whole body, or a BodyRefusal; either way the stream is no longer read by this function. */
export function readMeteredBody(body: Readable, intake: BodyIntake): Promise<Buffer> {
  const { holding, maxBytes, pace, preempted, startedAt } = intake;
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let windowStart = { at: startedAt, received: 0 };
    let paceTimer: NodeJS.Timeout | undefined;

    const finish = (): void => {
      clearTimeout(paceTimer);
      body.off('data', onData).off('end', onEnd).off('error', onAbort).off('aborted', onAbort).off('close', onClose);
      preempted.removeEventListener('abort', onPreempted);
    };
    const fail = (refusal: BodyRefusal): void => {
      finish();
      // Nothing more is read: the answer closes the connection.
      body.pause();
      holding.release();
      reject(refusal);
    };
    const onData = (chunk: Buffer): void => {
      if (received + chunk.length > maxBytes) return fail(new BodyRefusal(413, 'too-large', `a batch is at most ${maxBytes} bytes; this one has sent more`));
      if (!holding.take(chunk.length)) return fail(new BodyRefusal(503, 'budget', 'the collector holds as many bytes of batches as it may, and this namespace its share of them: send it again shortly'));
      chunks.push(chunk);
      received += chunk.length;
    };
    const onEnd = (): void => {
      finish();
      holding.settle();
      resolve(Buffer.concat(chunks, received));
    };
    const onAbort = (): void => fail(new BodyRefusal(400, 'aborted', 'the connection ended before the body did'));
    const onClose = (): void => {
      if (!body.readableEnded) onAbort();
    };
    const onPreempted = (): void => fail(new BodyRefusal(503, 'preempted', 'another namespace needed the collector\'s room for batches, and this namespace held more than its share: send it again shortly'));
    const checkPace = (): void => {
      const now = performance.now();
      const needed = (pace.minBytesPerSecond * (now - windowStart.at)) / 1000;
      if (received - windowStart.received < needed) {
        return fail(new BodyRefusal(408, 'slow', `the body arrived slower than ${pace.minBytesPerSecond} bytes a second: ${received} bytes in ${Math.round(now - startedAt)} ms`));
      }
      windowStart = { at: now, received };
      paceTimer = setTimeout(checkPace, pace.windowMs);
    };

    if (preempted.aborted) return onPreempted();
    preempted.addEventListener('abort', onPreempted);
    body.on('data', onData).on('end', onEnd).on('error', onAbort).on('aborted', onAbort).on('close', onClose);
    // The grace runs from the request's start; the first window from the grace's end.
    paceTimer = setTimeout(() => {
      windowStart = { at: performance.now(), received };
      paceTimer = setTimeout(checkPace, pace.windowMs);
    }, Math.max(0, startedAt + pace.graceMs - performance.now()));
  });
}
