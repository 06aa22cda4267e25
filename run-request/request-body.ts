// Reads and validates the JSON object body of a Python-runtime call. The raw bytes are forwarded unchanged:
// parsing here only proves the body is a JSON object, so the runtime never sees a malformed call.
import type { IncomingMessage } from 'node:http';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { requestBufferFull, type RequestBudget } from './request-budget.ts';
import { bodyStalled, requestDeadlinePassed } from './request-timeouts.ts';

/** A call's body limit where none is configured (`--body-limit-bytes`): the sidecar's, and the holder's. */
export const DEFAULT_BODY_LIMIT_BYTES = 16 * 1024 * 1024;
const EMPTY_OBJECT = Buffer.from('{}');

/**
 * How a body is read: refused past `limitBytes`, once no byte of it has come for `idleMs`, once it is not whole
 * `deadlineMs` after its reading began, and when the bytes it holds would overspend the run port's `budget`.
 */
export interface BodyBounds {
  limitBytes: number;
  idleMs: number;
  deadlineMs: number;
  /** Shared with every connection of the run port (request-budget.ts); null: no shared bound. */
  budget: RequestBudget | null;
}

export async function readJsonObjectBody(request: IncomingMessage, bounds: BodyBounds): Promise<Buffer> {
  return checkJsonObjectBody(await readLimitedBody(request, bounds));
}

/** The body to forward: the raw bytes, once they are known to be one JSON object (`{}` for none). */
export function checkJsonObjectBody(raw: Buffer): Buffer {
  if (raw.length === 0) return EMPTY_OBJECT;
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new ProblemError(Problems.invalidJson, `The body could not be parsed as JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ProblemError(
      Problems.bodyNotObject,
      `The body must be a JSON object of named arguments, got ${describeJsonValue(value)}`,
    );
  }
  return raw;
}

/** Refuses (413) a body whose declared length is over the limit, before any of it is read or forwarded. */
export function assertDeclaredLength(request: IncomingMessage, limitBytes: number): void {
  const contentLength = request.headers['content-length'];
  if (contentLength !== undefined && Number(contentLength) > limitBytes) {
    request.resume();
    throw tooLarge(Number(contentLength), limitBytes);
  }
}

/** Refuses (413) a body already read whole (by the run port's front) that is over the limit. */
export function assertBodyWithinLimit(body: Buffer, limitBytes: number): void {
  if (body.length > limitBytes) throw tooLarge(body.length, limitBytes);
}

/**
 * The whole body, refused with 413 as soon as it is known to exceed the limit; with 408 (the connection then
 * closed) once it stops arriving or misses its deadline; with 503 (closed too) when the run port's budget has
 * no room for it. Past the limit the rest is read and dropped, as node:http drops a body nobody reads, so the
 * caller, still sending, receives the 413 rather than a reset. Read with listeners rather than `for await`: an
 * async iterator per request measured ~2% of a sync run's CPU in the sidecar.
 */
export function readLimitedBody(request: IncomingMessage, bounds: BodyBounds): Promise<Buffer> {
  const { limitBytes, idleMs, deadlineMs, budget } = bounds;
  assertDeclaredLength(request, limitBytes);
  return new Promise((resolve, reject) => {
    let first: Buffer | null = null;
    let more: Buffer[] | null = null;
    let length = 0;
    /** Of `length`, what the budget has given. */
    let taken = 0;
    const stalled = setTimeout(() => {
      stop();
      reject(bodyStalled(idleMs, length, CLOSE));
    }, idleMs);
    // Unlike `stalled`, never refreshed: a body trickled just fast enough to keep `stalled` away still ends.
    const late = setTimeout(() => {
      stop();
      reject(requestDeadlinePassed(deadlineMs, length, CLOSE));
    }, deadlineMs);
    const onData = (chunk: Buffer): void => {
      stalled.refresh();
      length += chunk.length;
      if (length > limitBytes) {
        stop();
        request.resume();
        reject(tooLarge(length, limitBytes));
        return;
      }
      if (budget !== null && !budget.take(chunk.length)) {
        stop();
        reject(requestBufferFull(budget.limitBytes, length, true));
        return;
      }
      taken += chunk.length;
      if (first === null) {
        first = chunk;
      } else {
        (more ??= [first]).push(chunk);
      }
    };
    const onEnd = (): void => {
      stop();
      resolve(more ? Buffer.concat(more, length) : (first ?? EMPTY_BODY));
    };
    const onError = (error: Error): void => {
      stop();
      reject(error);
    };
    // Before the end: the caller went away mid-body.
    const onClose = (): void => onError(new Error(`the caller closed the connection after ${length} bytes of the body`));
    function stop(): void {
      clearTimeout(stalled);
      clearTimeout(late);
      // The body is the run's from here (or dropped): the budget bounds bodies still arriving.
      budget?.give(taken);
      taken = 0;
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onError);
      request.off('close', onClose);
    }
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onError);
    request.on('close', onClose);
  });
}

const CLOSE = { connection: 'close' };
const EMPTY_BODY = Buffer.alloc(0);

function tooLarge(bytes: number, limitBytes: number): ProblemError {
  return new ProblemError(
    Problems.bodyTooLarge,
    `The body is larger than the limit of ${limitBytes} bytes (at least ${bytes} bytes were sent)`,
  );
}

function describeJsonValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}
