// What all of a run port's connections may hold in memory together of requests still arriving: the front's
// bytes of requests not yet whole, and the bodies node:http reads whole for a Python call or a custom app's
// async call. Without it each connection's own bound (256 KiB at the front, the body limit on node:http) is
// multiplied by however many connections a caller opens, with no token needed: 1,000 such callers took the
// sidecar past its memory limit, and its kubelet would have killed it with every run in flight.
//
// Past the budget a request is refused (503 `request-buffer-full`, `Retry-After`, the connection closed) rather
// than paused: a paused reader waits for bytes others hold, and the holders may be the stalled callers whose
// requests never complete, so backpressure alone would let them starve every caller until their deadlines.
import { Problems } from '../crds/problems.ts';
import { ProblemError } from '../crds/problem.ts';

/**
 * A quarter of the sidecar's rendered 256 Mi memory limit, beside its ~80 MB at rest: room for sixty-four
 * 1 MiB bodies arriving at once, or four at the 16 MiB body limit.
 */
export const DEFAULT_REQUEST_BUFFER_BYTES = 64 * 1024 * 1024;

export class RequestBudget {
  readonly limitBytes: number;
  #usedBytes = 0;

  constructor(limitBytes: number) {
    if (!Number.isSafeInteger(limitBytes) || limitBytes < 1) throw new RangeError(`a request buffer budget must be a positive integer of bytes, got ${limitBytes}`);
    this.limitBytes = limitBytes;
  }

  /** Bytes held now, by all connections. */
  get usedBytes(): number {
    return this.#usedBytes;
  }

  /** Takes `bytes` from the budget; false, taking nothing, when that would overspend it. */
  take(bytes: number): boolean {
    if (this.#usedBytes + bytes > this.limitBytes) return false;
    this.#usedBytes += bytes;
    return true;
  }

  /**
   * Takes `bytes` even past the limit (negative: gives them back): for bytes already received that cannot be
   * refused, such as a pipelined request's, held while the one before it is answered; their holder stops
   * reading instead.
   */
  takeAnyway(bytes: number): void {
    this.#usedBytes += bytes;
  }

  /** Gives back bytes taken before. */
  give(bytes: number): void {
    this.#usedBytes -= bytes;
  }
}

/**
 * The answer to a request refused for want of budget; `heldBytes` is what that request had already sent. The
 * connection is closed after it (node:http's answer is told so by `closeHeader`; the front's says so itself).
 */
export function requestBufferFull(limitBytes: number, heldBytes: number, closeHeader = false): ProblemError {
  return new ProblemError(
    Problems.requestBufferFull,
    `The server holds ${limitBytes} bytes of requests still arriving, its limit; this one (${heldBytes} bytes so far) was not run. Retry shortly`,
    { headers: closeHeader ? { 'retry-after': '1', connection: 'close' } : { 'retry-after': '1' } },
  );
}
