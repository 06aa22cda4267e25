// The answer to one request the run port's front read: a head and a whole body, written to the socket at
// once, with the headers node:http would add (Date, Content-Length, Connection, Keep-Alive). An answer that
// is written as it comes (a stream) is node:http's own ServerResponse instead, lent the socket for that one
// answer, as node:http's server does for each of its requests.
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { StreamableAnswerSink } from '../../run-request/answer-sink.ts';
import { http } from '../node-http.ts';

/** Told when the answer is written (or never will be), so the connection can read its next request. */
export interface AnswerListener {
  answered(closeAfter: boolean): void;
}

export class FrontAnswer implements StreamableAnswerSink {
  readonly #socket: Socket;
  readonly #listener: AnswerListener;
  /** The caller asked for `Connection: close`, or the server is closing. */
  readonly #keepAlive: boolean;
  readonly #keepAliveSeconds: number;
  #head: string | null = null;
  #ended = false;
  /** The node:http response the connection is lent to (stream): everything written goes through it. */
  #lent: ServerResponse | null = null;

  constructor(socket: Socket, listener: AnswerListener, keepAlive: boolean, keepAliveSeconds: number) {
    this.#socket = socket;
    this.#listener = listener;
    this.#keepAlive = keepAlive;
    this.#keepAliveSeconds = keepAliveSeconds;
  }

  get headersSent(): boolean {
    return this.#lent !== null ? this.#lent.headersSent : this.#head !== null;
  }

  /** True once nothing written reaches the caller: the connection is gone or ending. */
  get destroyed(): boolean {
    return !this.#socket.writable;
  }

  writeHead(statusCode: number, headers: OutgoingHttpHeaders | string[]): this {
    if (this.#lent !== null) {
      this.#lent.writeHead(statusCode, headers);
      return this;
    }
    if (this.#head !== null) throw new Error(`the answer's head was already written (status ${statusCode} came second)`);
    let head = 'HTTP/1.1 ' + statusCode + ' ' + (http.STATUS_CODES[statusCode] ?? 'Unknown') + '\r\n';
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2) head += headerLine(headers[i]!, headers[i + 1]!);
    } else {
      for (const name in headers) {
        const value = headers[name];
        if (value === undefined) continue;
        if (Array.isArray(value)) for (const each of value) head += headerLine(name, each);
        else head += headerLine(name, String(value));
      }
    }
    this.#head = head + 'date: ' + httpDate() + '\r\n';
    return this;
  }

  end(body: string): this {
    if (this.#lent !== null) {
      this.#lent.end(body);
      return this;
    }
    if (this.#ended) return this;
    this.#ended = true;
    if (this.#head === null) this.writeHead(200, []);
    const connection = this.#keepAlive ? 'connection: keep-alive\r\nkeep-alive: timeout=' + this.#keepAliveSeconds + '\r\n' : 'connection: close\r\n';
    const text = this.#head + connection + 'content-length: ' + Buffer.byteLength(body) + '\r\n\r\n' + body;
    if (this.#socket.writable) this.#socket.write(text);
    this.#listener.answered(!this.#keepAlive);
    return this;
  }

  /**
   * node:http's response on this connection, for an answer written as it comes (chunked); from then on this
   * answer's own methods write through it too. The connection reads its next request once the response has
   * finished; one that cannot finish (the caller went away) ends with the connection. Only before anything
   * else was written.
   */
  stream(requestHeaders: IncomingHttpHeaders): ServerResponse {
    if (this.#lent !== null) return this.#lent;
    if (this.#head !== null || this.#ended) throw new Error('the answer was already begun: it cannot be streamed');
    const socket = this.#socket;
    // What ServerResponse reads of its request: an HTTP/1.1 POST (chunked answers, kept alive by default).
    const request = new http.IncomingMessage(socket);
    request.method = 'POST';
    request.httpVersionMajor = 1;
    request.httpVersionMinor = 1;
    request.httpVersion = '1.1';
    request.headers = requestHeaders;
    const response = new http.ServerResponse(request);
    response.shouldKeepAlive = this.#keepAlive;
    // node:http's server tells a response its socket drained (its connection listener does): without it, a
    // writer waiting for 'drain' once the caller's buffers filled would wait for ever.
    const onDrain = (): void => relayDrain(response);
    socket.on('drain', onDrain);
    response.once('close', () => socket.off('drain', onDrain));
    response.once('finish', () => {
      socket.off('drain', onDrain);
      response.detachSocket(socket);
      this.#ended = true;
      this.#listener.answered(!response.shouldKeepAlive);
    });
    response.assignSocket(socket);
    this.#lent = response;
    return response;
  }

  destroy(): this {
    this.#socket.destroy();
    if (!this.#ended) {
      this.#ended = true;
      this.#listener.answered(true);
    }
    return this;
  }
}

/**
 * ServerResponse's "a write was refused, 'drain' is owed" flag. node:http's server clears it before it emits
 * the response's 'drain' (socketOnDrain in _http_server.js); it has no public setter, so it is found by name.
 */
const NEED_DRAIN: symbol = needDrainFlag();

function needDrainFlag(): symbol {
  const response = new http.ServerResponse(new http.IncomingMessage(new Socket()));
  const flag = Object.getOwnPropertySymbols(response).find((symbol) => symbol.description === 'kNeedDrain');
  if (flag === undefined) throw new Error("node:http's ServerResponse has no kNeedDrain flag: the front cannot relay its socket's 'drain'");
  return flag;
}

/** What node:http's server does when a response's socket drains: the response drains too, if it was owed one. */
function relayDrain(response: ServerResponse): void {
  if (!response.writableNeedDrain) return;
  (response as unknown as Record<symbol, boolean>)[NEED_DRAIN] = false;
  response.emit('drain');
}

/**
 * Refuses what would break the head (CR, LF, other control bytes), as node:http does, and anything outside
 * ASCII too: the head is written as UTF-8 with the body, so it must be one byte a character.
 */
function headerLine(name: string, value: string): string {
  if (!isHeaderText(name) || !isHeaderText(value)) throw new TypeError(`invalid character in header ${JSON.stringify(name)}: ${JSON.stringify(value)}`);
  return name + ': ' + value + '\r\n';
}

function isHeaderText(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code > 0x7e) return false;
  }
  return true;
}

let dateSecond = -1;
let dateText = '';

/** The `Date` header's value, formatted once a second. */
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}
