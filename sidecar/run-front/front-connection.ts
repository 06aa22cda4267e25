// One connection of the run port, read by the front. Requests are answered one at a time, in order (the
// bytes of a pipelined next request wait for the answer before), by the run interface; a stream's answer
// goes out through node:http's response, lent the socket until it finishes (front-answer.ts). The first
// request the front does not answer itself (request-head.ts says which, and so does
// `RunInterface.handleWhole`) hands the socket, with every byte not yet answered put back, to node:http for
// the rest of its life.
import type { Socket } from 'node:net';
import type { RunInterface, WholeRequest } from '../run-interface.ts';
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
  /**
   * A request still incomplete after this long is passed on to node:http, whose header and request timeouts
   * then apply: the front never holds a slow sender itself.
   */
  incompleteRequestMs: number;
}

const HEAD_END = Buffer.from('\r\n\r\n');
/** Longer heads are left to node:http, which allows up to 16 KiB. */
const MAX_HEAD_BYTES = 8 * 1024;
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
  /** The server is closing: no more requests are read after the one being answered. */
  #closing = false;
  #incompleteTimer: NodeJS.Timeout | null = null;

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
    if (this.#socket.destroyed) return;
    if (closeAfter || this.#closing) return this.#finish();
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
    if (!this.#answering) this.#readNext();
    else if (this.#pending.length > MAX_HELD_BYTES) this.#socket.pause();
  }

  #readNext(): void {
    const data = this.#pending;
    if (data === null) return;
    let head = this.#head;
    if (head === null) {
      const headEnd = data.indexOf(HEAD_END);
      if (headEnd === -1 && data.length <= MAX_HEAD_BYTES) return this.#waitForRest();
      if (headEnd === -1 || headEnd > MAX_HEAD_BYTES) return this.#passOn();
      head = readRequestHead(data.toString('latin1', 0, headEnd));
      if (head === null || head.contentLength > this.#settings.maxBodyBytes) return this.#passOn();
      this.#head = head;
      this.#bodyStart = headEnd + HEAD_END.length;
    }
    const end = this.#bodyStart + head.contentLength;
    if (data.length < end) return this.#waitForRest();

    this.#head = null;
    this.#stopWaiting();
    const request: WholeRequest = { method: 'POST', url: head.url, headers: head.headers, body: data.subarray(this.#bodyStart, end) };
    const answer = new FrontAnswer(this.#socket, this, head.keepAlive && !this.#closing, this.#keepAliveSeconds);
    // Set before the handler runs: its answer may come back (answered()) before it returns.
    this.#answering = true;
    this.#pending = end === data.length ? null : data.subarray(end);
    if (!this.#settings.runInterface.handleWhole(request, answer)) {
      this.#answering = false;
      this.#pending = data;
      this.#passOn();
    }
  }

  #waitForRest(): void {
    this.#incompleteTimer ??= setTimeout(() => {
      this.#incompleteTimer = null;
      if (!this.#answering && !this.#socket.destroyed) this.#passOn();
    }, this.#settings.incompleteRequestMs);
  }

  #stopWaiting(): void {
    if (this.#incompleteTimer !== null) {
      clearTimeout(this.#incompleteTimer);
      this.#incompleteTimer = null;
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
    this.#stopWaiting();
    const socket = this.#socket;
    socket.setTimeout(0);
    socket.off('timeout', this.#onTimeout);
    socket.off('data', this.#onData);
    socket.off('end', this.#onEnd);
  }
}
