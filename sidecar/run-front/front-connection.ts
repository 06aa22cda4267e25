// One connection of the run port, read by the front. Requests are answered one at a time, in order (the
// bytes of a pipelined next request wait for the answer before), by the run interface; a stream's answer
// goes out through node:http's response, lent the socket until it finishes (front-answer.ts). The first
// request the front does not answer itself (request-head.ts says which, and so does
// `RunInterface.handleWhole`) hands the socket, with every byte not yet answered put back, to node:http for
// the rest of its life. Like node:http, it reads no further request while the caller leaves answers unread,
// and bounds how long a request may take to arrive.
//
// A caller pays for what it sends, not the sidecar: a request whose body is still arriving is screened on its
// head alone (auth, app) and refused before its body is held; what all connections hold together is bounded
// by the run port's budget (request-budget.ts); and the bytes of a request are gathered in one buffer grown by
// doubling and searched only where they are new, so the work is linear in the bytes, however small the reads.
import type { Socket } from 'node:net';
import type { ProblemError } from '../../crds/problem.ts';
import { requestBufferFull, type RequestBudget } from '../../run-request/request-budget.ts';
import { bodyStalled, HEAD_TIMEOUT_ANSWER, requestDeadlinePassed } from '../../run-request/request-timeouts.ts';
import type { WholeRequest } from '../exchange.ts';
import { sendProblem } from '../../run-request/problem-answer.ts';
import { PASS_ON, type RunInterface } from '../run-interface.ts';
import { newRunId } from '../../run-request/run-id.ts';
import { FrontAnswer, type AnswerListener } from './front-answer.ts';
import { readRequestHead, type RequestHead } from './request-head.ts';

export interface FrontSettings {
  runInterface: RunInterface;
  /**
   * node:http's handling of a connection: where the front passes a socket on. It must start reading at once,
   * as node:http does: the bytes put back flow to the first 'data' listener, and only to it.
   */
  passOn(socket: Socket): void;
  /** How long an idle kept-alive connection stays open. */
  keepAliveTimeoutMs: number;
  /** Bodies declared longer are left to node:http, which reads them as they come. */
  maxBodyBytes: number;
  /** A head not whole this long after its first byte is refused as node:http refuses it: `408`, then closed. */
  headTimeoutMs: number;
  /** A body with no byte for this long is answered `408 request-timeout`, and the connection closed. */
  bodyTimeoutMs: number;
  /**
   * A request not whole this long after reading it began is answered `408 request-timeout` (a bare `408` while
   * its head is not whole, as node:http's), and the connection closed.
   */
  deadlineMs: number;
  /** Shared by all the run port's connections: what they may hold of requests still arriving. */
  budget: RequestBudget;
}

const HEAD_END = Buffer.from('\r\n\r\n');
const CR = 0x0d;
const LF = 0x0a;
/** node:http's answer to bytes after a request that asked to close the connection (llhttp refuses them). */
const BAD_REQUEST_ANSWER = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';
/** Longer heads are left to node:http, which allows up to 16 KiB. */
export const MAX_HEAD_BYTES = 8 * 1024;
/** Bytes of later requests held while one is answered; past this the socket stops reading until the answer. */
const MAX_HELD_BYTES = 1024 * 1024;
/**
 * How long a connection refused mid-request stays open after its answer, reading and dropping what the caller
 * still sends: closed at once, with bytes unread, the kernel would answer them with a reset, which may reach
 * the caller before it reads the answer.
 */
const REFUSED_LINGER_MS = 5_000;

export class FrontConnection implements AnswerListener {
  readonly #socket: Socket;
  readonly #settings: FrontSettings;
  readonly #keepAliveSeconds: number;
  readonly #gone: (connection: FrontConnection) => void;
  /**
   * Bytes received and not yet answered — the request being read, and any after it — are the first #length
   * bytes of #buffer: a chunk as the socket gave it, until a second one comes and they are gathered in a
   * buffer of the front's own, which grows by doubling (#ownsBuffer: its bytes past #length may be written).
   */
  #buffer: Buffer | null = null;
  #length = 0;
  #ownsBuffer = false;
  /** Of the run port's budget, what this connection holds: #buffer's size. */
  #charged = 0;
  /** How far the search for the head's end has looked: it goes on from there, never from the start again. */
  #scanned = 0;
  /** The head of the request being read, once it is whole and its body is not yet. */
  #head: RequestHead | null = null;
  #bodyStart = 0;
  /** The run interface is deciding on #head (a new token being verified): nothing is read until it has. */
  #screening = false;
  #answering = false;
  /** The request being answered asked to close the connection after its answer. */
  #answeringLast = false;
  /** The caller is not reading its answers: nothing more is read until the socket's output drains. */
  #awaitingDrain = false;
  /** The server is closing: no more requests are read after the one being answered. */
  #closing = false;
  #headTimer: NodeJS.Timeout | null = null;
  #bodyTimer: NodeJS.Timeout | null = null;
  #deadlineTimer: NodeJS.Timeout | null = null;

  readonly #onData = (chunk: Buffer): void => this.#received(chunk);
  // A caller that half-closes is taken as gone, as node:http takes it (its httpAllowHalfOpen is off): the
  // connection ends at once, an answer in progress is not sent, and a stream's run sees its caller leave.
  readonly #onEnd = (): void => this.#finish();
  readonly #onTimeout = (): void => {
    // A run in progress has its own time limit; only an idle connection times out.
    if (!this.#answering) this.#socket.destroy();
  };
  readonly #onError = (): void => {
    this.#socket.destroy();
  };
  readonly #onClose = (): void => {
    this.#stopReading();
    this.#drop();
    this.#gone(this);
  };
  readonly #onDrain = (): void => {
    this.#awaitingDrain = false;
    this.#readOn();
  };
  readonly #onHeadTimeout = (): void => {
    this.#headTimer = null;
    this.#refuse(HEAD_TIMEOUT_ANSWER);
  };
  readonly #onBodyTimeout = (): void => {
    this.#bodyTimer = null;
    this.#refuseRequest(bodyStalled(this.#settings.bodyTimeoutMs, this.#bodyReceived()));
  };
  readonly #onDeadline = (): void => {
    this.#deadlineTimer = null;
    if (this.#head === null) this.#refuse(HEAD_TIMEOUT_ANSWER);
    else this.#refuseRequest(requestDeadlinePassed(this.#settings.deadlineMs, this.#bodyReceived()));
  };
  readonly #onLingerTimeout = (): void => {
    this.#socket.destroy();
  };

  constructor(socket: Socket, settings: FrontSettings, gone: (connection: FrontConnection) => void) {
    this.#socket = socket;
    this.#settings = settings;
    this.#keepAliveSeconds = Math.ceil(settings.keepAliveTimeoutMs / 1000);
    this.#gone = gone;
    // A listener of its own, not setTimeout's callback, which is called only once: a timeout during an answer
    // is ignored, and the next idle one must still close the connection.
    socket.setTimeout(settings.keepAliveTimeoutMs);
    socket.on('timeout', this.#onTimeout);
    socket.on('data', this.#onData);
    socket.on('end', this.#onEnd);
    socket.on('error', this.#onError);
    socket.on('close', this.#onClose);
  }

  /** The server is closing: an idle connection is closed now, a busy one after its answer. */
  closeIdle(): void {
    this.#closing = true;
    if (!this.#answering && this.#buffer === null) this.#socket.destroy();
  }

  destroy(): void {
    this.#socket.destroy();
  }

  answered(closeAfter: boolean): void {
    this.#answering = false;
    this.#answeringLast = false;
    if (this.#socket.destroyed) return;
    if (closeAfter || this.#closing) return this.#finish();
    // node:http's rule: a caller that does not read its answers gets no more of them until it does, so the
    // sidecar never holds more of them than the socket's buffer (nor more of its requests than MAX_HELD_BYTES).
    if (this.#socket.writableNeedDrain) {
      this.#awaitingDrain = true;
      this.#socket.pause();
      this.#socket.once('drain', this.#onDrain);
      return;
    }
    this.#readOn();
  }

  #readOn(): void {
    if (this.#socket.isPaused()) this.#socket.resume();
    this.#readNext();
  }

  /** Ends the connection once what was written is sent; nothing more is read. */
  #finish(): void {
    this.#stopReading();
    this.#socket.end();
  }

  #received(chunk: Buffer): void {
    if (this.#answering) {
      // llhttp refuses any byte after a request that asked to close: node:http answers 400 and closes.
      if (this.#answeringLast) return this.#refuse(BAD_REQUEST_ANSWER);
      // Held for the next request while this one is answered: they cannot be refused without cutting the
      // answer short, so they are taken even past the budget, and the socket stops reading until the answer.
      this.#hold(chunk, true);
      if (this.#length > MAX_HELD_BYTES || this.#settings.budget.usedBytes > this.#settings.budget.limitBytes) this.#socket.pause();
    } else if (!this.#hold(chunk, this.#awaitingDrain)) {
      this.#refuseRequest(requestBufferFull(this.#settings.budget.limitBytes, this.#length + chunk.length));
    } else if (!this.#awaitingDrain) {
      this.#readNext();
    }
  }

  /**
   * Appends `chunk` to the bytes held, growing the buffer by doubling (never past the request being read, when
   * its length is known): each byte is copied a bounded number of times. False, holding nothing more, when the
   * budget has no room for it, unless `anyway`.
   */
  #hold(chunk: Buffer, anyway: boolean): boolean {
    const buffer = this.#buffer;
    if (buffer === null) {
      if (!this.#charge(chunk.length, anyway)) return false;
      this.#buffer = chunk;
      this.#length = chunk.length;
      this.#ownsBuffer = false;
      return true;
    }
    const needed = this.#length + chunk.length;
    if (this.#ownsBuffer && needed <= buffer.length) {
      chunk.copy(buffer, this.#length);
      this.#length = needed;
      return true;
    }
    let size = Math.max(needed, 2 * this.#length);
    if (this.#head !== null) size = Math.max(needed, Math.min(size, this.#bodyStart + this.#head.contentLength));
    if (!this.#charge(size - this.#charged, anyway)) return false;
    const grown = Buffer.allocUnsafeSlow(size);
    buffer.copy(grown, 0, 0, this.#length);
    chunk.copy(grown, this.#length);
    this.#buffer = grown;
    this.#length = needed;
    this.#ownsBuffer = true;
    return true;
  }

  /** Takes `bytes` more from the budget (negative: gives them back), past its limit if `anyway`. */
  #charge(bytes: number, anyway: boolean): boolean {
    const budget = this.#settings.budget;
    if (anyway) budget.takeAnyway(bytes);
    else if (!budget.take(bytes)) return false;
    this.#charged += bytes;
    return true;
  }

  /** The bytes held, nothing past them. */
  #held(): Buffer {
    const buffer = this.#buffer!;
    return buffer.length === this.#length ? buffer : buffer.subarray(0, this.#length);
  }

  #readNext(): void {
    if (this.#buffer === null || this.#screening) return;
    const data = this.#held();
    let head = this.#head;
    if (head === null) {
      // From three bytes back: the head's end may have begun in the bytes already searched.
      const headEnd = data.indexOf(HEAD_END, this.#scanned > 3 ? this.#scanned - 3 : 0);
      if (headEnd === -1) {
        // A head that can no longer be one the front reads (a bare LF, say) goes to node:http at once, which
        // refuses it at once: not after the head timeout.
        if (data.length > MAX_HEAD_BYTES || !hasOnlyCrlfLineEnds(data, this.#scanned)) return this.#passOn();
        this.#scanned = data.length;
        this.#headTimer ??= setTimeout(this.#onHeadTimeout, this.#settings.headTimeoutMs);
        this.#deadlineTimer ??= setTimeout(this.#onDeadline, this.#settings.deadlineMs);
        return;
      }
      this.#scanned = 0;
      if (headEnd > MAX_HEAD_BYTES) return this.#passOn();
      head = readRequestHead(data.toString('latin1', 0, headEnd));
      if (head === null || head.contentLength > this.#settings.maxBodyBytes) return this.#passOn();
      this.#head = head;
      this.#bodyStart = headEnd + HEAD_END.length;
      this.#stopHeadTimer();
      // The body is still to come: the caller is let in, or not, before the front holds it.
      if (data.length < this.#bodyStart + head.contentLength && !this.#screen(head)) return;
    }
    const end = this.#bodyStart + head.contentLength;
    if (data.length < end) {
      if (this.#bodyTimer === null) this.#bodyTimer = setTimeout(this.#onBodyTimeout, this.#settings.bodyTimeoutMs);
      else this.#bodyTimer.refresh();
      this.#deadlineTimer ??= setTimeout(this.#onDeadline, this.#settings.deadlineMs);
      return;
    }
    // llhttp refuses bytes after a request that asks to close the connection; node:http answers them.
    if (!head.keepAlive && data.length > end) return this.#passOn();

    this.#head = null;
    this.#stopBodyTimer();
    this.#stopDeadlineTimer();
    const request: WholeRequest = { method: 'POST', url: head.url, headers: head.headers, body: data.subarray(this.#bodyStart, end) };
    const answer = new FrontAnswer(this.#socket, this, head.keepAlive && !this.#closing, this.#keepAliveSeconds);
    // Set before the handler runs: its answer may come back (answered()) before it returns.
    this.#answering = true;
    this.#answeringLast = !head.keepAlive;
    const charged = this.#charged;
    const ownsBuffer = this.#ownsBuffer;
    // The request is the run's now, and leaves the budget; what follows it is held as a buffer of its own size,
    // which is never written into (the request's body shares its memory).
    if (end === data.length) {
      this.#buffer = null;
      this.#length = 0;
    } else {
      this.#buffer = data.subarray(end);
      this.#length = data.length - end;
    }
    this.#ownsBuffer = false;
    this.#charge(this.#length - charged, true);
    if (!this.#settings.runInterface.handleWhole(request, answer)) {
      this.#answering = false;
      this.#answeringLast = false;
      this.#charge(charged - this.#charged, true);
      this.#buffer = data;
      this.#length = data.length;
      this.#ownsBuffer = ownsBuffer;
      this.#passOn();
    }
  }

  /**
   * Asks the run interface about a request whose body is still to come. True to read its body now; false when
   * the connection was passed on or refused, or while the answer is awaited (the socket paused until then).
   */
  #screen(head: RequestHead): boolean {
    const screening = this.#settings.runInterface.screenHead(head.url, head.headers);
    if (screening === null) return true;
    if (screening === PASS_ON) {
      this.#passOn();
      return false;
    }
    if (!(screening instanceof Promise)) {
      this.#refuseRequest(screening);
      return false;
    }
    this.#screening = true;
    this.#socket.pause();
    this.#deadlineTimer ??= setTimeout(this.#onDeadline, this.#settings.deadlineMs);
    void screening.then((problem: ProblemError | typeof PASS_ON | null) => {
      this.#screening = false;
      // The request ended while it was screened: its deadline passed, or the caller left.
      if (this.#head !== head || this.#socket.destroyed) return;
      if (problem !== null && problem !== PASS_ON) return this.#refuseRequest(problem);
      // Unshifted bytes come before any the socket reads once resumed, on a later tick.
      this.#socket.resume();
      if (problem === PASS_ON) this.#passOn();
      else this.#readNext();
    });
    return false;
  }

  #bodyReceived(): number {
    return Math.max(0, this.#length - this.#bodyStart);
  }

  /**
   * Refuses the request being read with a problem (with a run id, like every answer of the run interface): the
   * bytes held are dropped, and the connection closed after the answer, lingering a little to drop what the
   * caller is still sending (REFUSED_LINGER_MS).
   */
  #refuseRequest(problem: ProblemError): void {
    this.#settings.runInterface.requestRefused(problem);
    this.#drop();
    sendProblem(new FrontAnswer(this.#socket, this, false, this.#keepAliveSeconds), newRunId(), problem);
    // The answer ended the connection (answered → #finish): only the caller's last bytes are still read.
    const socket = this.#socket;
    if (socket.destroyed) return;
    socket.setTimeout(REFUSED_LINGER_MS, this.#onLingerTimeout);
    if (socket.isPaused()) socket.resume();
  }

  /** Refuses the connection's bytes as node:http does (its answer, then the connection destroyed). */
  #refuse(answer: string): void {
    this.#stopReading();
    this.#drop();
    this.#socket.write(answer);
    this.#socket.destroy();
  }

  /** Lets go of every byte held, and of the request being read. */
  #drop(): void {
    this.#charge(-this.#charged, true);
    this.#buffer = null;
    this.#length = 0;
    this.#ownsBuffer = false;
    this.#scanned = 0;
    this.#head = null;
  }

  #stopHeadTimer(): void {
    if (this.#headTimer !== null) {
      clearTimeout(this.#headTimer);
      this.#headTimer = null;
    }
  }

  #stopBodyTimer(): void {
    if (this.#bodyTimer !== null) {
      clearTimeout(this.#bodyTimer);
      this.#bodyTimer = null;
    }
  }

  #stopDeadlineTimer(): void {
    if (this.#deadlineTimer !== null) {
      clearTimeout(this.#deadlineTimer);
      this.#deadlineTimer = null;
    }
  }

  /** node:http reads this connection from here on, starting at the first byte not yet answered. */
  #passOn(): void {
    this.#stopReading();
    this.#socket.off('error', this.#onError);
    this.#socket.off('close', this.#onClose);
    const data = this.#buffer === null ? null : this.#held();
    this.#drop();
    if (data !== null) this.#socket.unshift(data);
    this.#settings.passOn(this.#socket);
    this.#gone(this);
  }

  /** Stops reading requests; the error and close listeners stay until the socket is passed on or gone. */
  #stopReading(): void {
    this.#stopHeadTimer();
    this.#stopBodyTimer();
    this.#stopDeadlineTimer();
    const socket = this.#socket;
    socket.setTimeout(0);
    socket.off('timeout', this.#onTimeout);
    socket.off('data', this.#onData);
    socket.off('end', this.#onEnd);
    socket.off('drain', this.#onDrain);
  }
}

/**
 * False once `data` holds a line end other than CRLF (a CR may still await its LF at the very end). Bytes
 * before `from` were checked before, save a CR just before it, which may have been waiting for its LF.
 */
function hasOnlyCrlfLineEnds(data: Buffer, from: number): boolean {
  const start = from > 0 ? from - 1 : 0;
  for (let at = data.indexOf(LF, start); at !== -1; at = data.indexOf(LF, at + 1)) {
    if (at === 0 || data[at - 1] !== CR) return false;
  }
  for (let at = data.indexOf(CR, start); at !== -1 && at + 1 < data.length; at = data.indexOf(CR, at + 1)) {
    if (data[at + 1] !== LF) return false;
  }
  return true;
}
