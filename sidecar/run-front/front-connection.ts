// One connection of the run port, read by the front. Requests are answered one at a time, in order (the
// bytes of a pipelined next request wait for the answer before), by the run interface; a stream's answer
// goes out through node:http's response, lent the socket until it finishes (front-answer.ts). The first
// request the front does not answer itself (request-head.ts says which, and so does
// `RunInterface.handleWhole`) hands the socket, with every byte not yet answered put back, to node:http for
// the rest of its life. Like node:http, it reads no further request while the caller leaves answers unread,
// and bounds how long a request may take to arrive.
import type { Socket } from 'node:net';
import { bodyStalled, HEAD_TIMEOUT_ANSWER } from '../request-timeouts.ts';
import { sendProblem, type WholeRequest } from '../exchange.ts';
import type { RunInterface } from '../run-interface.ts';
import { newRunId } from '../runs/recorder.ts';
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

export class FrontConnection implements AnswerListener {
  readonly #socket: Socket;
  readonly #settings: FrontSettings;
  readonly #keepAliveSeconds: number;
  readonly #gone: (connection: FrontConnection) => void;
  /** Bytes received and not yet answered: the request being read, and any after it. */
  #pending: Buffer | null = null;
  /** The head of the request being read, once it is whole and its body is not yet. */
  #head: RequestHead | null = null;
  #bodyStart = 0;
  #answering = false;
  /** The request being answered asked to close the connection after its answer. */
  #answeringLast = false;
  /** The caller is not reading its answers: nothing more is read until the socket's output drains. */
  #awaitingDrain = false;
  /** The server is closing: no more requests are read after the one being answered. */
  #closing = false;
  #headTimer: NodeJS.Timeout | null = null;
  #bodyTimer: NodeJS.Timeout | null = null;

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
    this.#answerBodyStalled();
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
    if (!this.#answering && this.#pending === null) this.#socket.destroy();
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
    this.#pending = this.#pending === null ? chunk : Buffer.concat([this.#pending, chunk]);
    if (this.#answering) {
      // llhttp refuses any byte after a request that asked to close: node:http answers 400 and closes.
      if (this.#answeringLast) return this.#refuse(BAD_REQUEST_ANSWER);
      if (this.#pending.length > MAX_HELD_BYTES) this.#socket.pause();
    } else if (!this.#awaitingDrain) {
      this.#readNext();
    }
  }

  #readNext(): void {
    const data = this.#pending;
    if (data === null) return;
    let head = this.#head;
    if (head === null) {
      const headEnd = data.indexOf(HEAD_END);
      if (headEnd === -1) {
        // A head that can no longer be one the front reads (a bare LF, say) goes to node:http at once, which
        // refuses it at once: not after the head timeout.
        if (data.length > MAX_HEAD_BYTES || !hasOnlyCrlfLineEnds(data)) return this.#passOn();
        this.#headTimer ??= setTimeout(this.#onHeadTimeout, this.#settings.headTimeoutMs);
        return;
      }
      if (headEnd > MAX_HEAD_BYTES) return this.#passOn();
      head = readRequestHead(data.toString('latin1', 0, headEnd));
      if (head === null || head.contentLength > this.#settings.maxBodyBytes) return this.#passOn();
      this.#head = head;
      this.#bodyStart = headEnd + HEAD_END.length;
      this.#stopHeadTimer();
    }
    const end = this.#bodyStart + head.contentLength;
    if (data.length < end) {
      if (this.#bodyTimer === null) this.#bodyTimer = setTimeout(this.#onBodyTimeout, this.#settings.bodyTimeoutMs);
      else this.#bodyTimer.refresh();
      return;
    }
    // llhttp refuses bytes after a request that asks to close the connection; node:http answers them.
    if (!head.keepAlive && data.length > end) return this.#passOn();

    this.#head = null;
    this.#stopBodyTimer();
    const request: WholeRequest = { method: 'POST', url: head.url, headers: head.headers, body: data.subarray(this.#bodyStart, end) };
    const answer = new FrontAnswer(this.#socket, this, head.keepAlive && !this.#closing, this.#keepAliveSeconds);
    // Set before the handler runs: its answer may come back (answered()) before it returns.
    this.#answering = true;
    this.#answeringLast = !head.keepAlive;
    this.#pending = end === data.length ? null : data.subarray(end);
    if (!this.#settings.runInterface.handleWhole(request, answer)) {
      this.#answering = false;
      this.#answeringLast = false;
      this.#pending = data;
      this.#passOn();
    }
  }

  /** The body stopped arriving: `408`, with a run id like every answer of the run interface, then closed. */
  #answerBodyStalled(): void {
    const received = (this.#pending?.length ?? 0) - this.#bodyStart;
    this.#head = null;
    this.#pending = null;
    sendProblem(new FrontAnswer(this.#socket, this, false, this.#keepAliveSeconds), newRunId(), bodyStalled(this.#settings.bodyTimeoutMs, received));
  }

  /** Refuses the connection's bytes as node:http does (its answer, then the connection destroyed). */
  #refuse(answer: string): void {
    this.#stopReading();
    this.#socket.write(answer);
    this.#socket.destroy();
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

  /** node:http reads this connection from here on, starting at the first byte not yet answered. */
  #passOn(): void {
    this.#stopReading();
    this.#socket.off('error', this.#onError);
    this.#socket.off('close', this.#onClose);
    this.#head = null;
    const data = this.#pending;
    this.#pending = null;
    if (data !== null) this.#socket.unshift(data);
    this.#settings.passOn(this.#socket);
    this.#gone(this);
  }

  /** Stops reading requests; the error and close listeners stay until the socket is passed on or gone. */
  #stopReading(): void {
    this.#stopHeadTimer();
    this.#stopBodyTimer();
    const socket = this.#socket;
    socket.setTimeout(0);
    socket.off('timeout', this.#onTimeout);
    socket.off('data', this.#onData);
    socket.off('end', this.#onEnd);
    socket.off('drain', this.#onDrain);
  }
}

/** False once `data` holds a line end other than CRLF (a CR may still await its LF at the very end). */
function hasOnlyCrlfLineEnds(data: Buffer): boolean {
  for (let at = data.indexOf(LF); at !== -1; at = data.indexOf(LF, at + 1)) {
    if (at === 0 || data[at - 1] !== CR) return false;
  }
  for (let at = data.indexOf(CR); at !== -1 && at + 1 < data.length; at = data.indexOf(CR, at + 1)) {
    if (data[at + 1] !== LF) return false;
  }
  return true;
}
