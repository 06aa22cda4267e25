// Keep-alive HTTP/1.1 connections to the Python runtime, the one server every run of a Python app calls
// (runtime/python/PROTOCOL.md). Purpose-built for that internal protocol because a general client costs several
// times the CPU per call: undici's Pool.request measured ~45 µs of user CPU per call under load (~110 µs unloaded)
// where this measures ~10 µs (~25 µs). A request is one write of its head and body; an answer is parsed from the
// few headers the runtime sends: content-type, content-length or chunked, connection, allow.
import { connect, type Socket } from 'node:net';
import { Readable } from 'node:stream';

/**
 * A connection to the runtime failed or closed mid-call (the runtime exited, or the app was detached), or the
 * call never reached it: `RUNTIME_UNREACHABLE`, its connection refused (nothing listens: the runtime is down) or
 * the app detached before the call was sent. Only that one is sure to have run nothing.
 */
export class RuntimeConnectionError extends Error {
  readonly code: 'RUNTIME_CONNECTION_CLOSED' | 'RUNTIME_DETACHED' | 'RUNTIME_UNREACHABLE' | 'RUNTIME_PROTOCOL_ERROR' | 'RESULT_TOO_LARGE';

  constructor(code: RuntimeConnectionError['code'], message: string) {
    super(message);
    this.name = 'RuntimeConnectionError';
    this.code = code;
  }
}

/**
 * What can stop a call in flight: the run's time limit, a shutdown, the caller leaving. An AbortSignal would do,
 * but a listener added and removed on one for every call measured ~15% of a sync run's CPU in the sidecar
 * (EventTarget bookkeeping and its garbage); this is one handler slot the connection fills for its exchange.
 */
export interface CallStopper {
  /** Why the call was stopped; null while it may go on. */
  readonly stopReason: Error | null;
  /** Called once when the call is stopped; the connection sets it for its exchange and clears it after. */
  onStop: ((reason: Error) => void) | null;
}

/** A stopper driven by an AbortSignal, for callers that have one (a timeout, a test). */
export function stopperOf(signal: AbortSignal): CallStopper {
  const stopper: CallStopper = {
    get stopReason() {
      return signal.aborted ? asError(signal.reason) : null;
    },
    onStop: null,
  };
  signal.addEventListener('abort', () => stopper.onStop?.(asError(signal.reason)), { once: true });
  return stopper;
}

function asError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error('the call was aborted', { cause: reason });
}

export interface RuntimeRequest {
  /** `/{function}`; the caller has checked it is a plain identifier. */
  path: string;
  runId: string;
  /** Sends `x-runlet-stream: 1`: an iterator result is streamed. */
  stream: boolean;
  /** Sends `x-runlet-validate: 1`: the runtime only checks the call (an async call, before its 202). */
  validateOnly?: boolean;
  /**
   * A content-length answer over RELAY_BODY_BYTES is handed over as `stream` as it arrives (for the sidecar to
   * pass on without holding it whole) rather than read whole into `body`.
   */
  relayLargeBody?: boolean;
  body: Buffer;
  /** Stopping it closes the connection (the runtime then closes a streaming generator). */
  stopper: CallStopper;
}

export interface RuntimeResponse {
  statusCode: number;
  contentType: string;
  /** The `Allow` header (405 answers). */
  allow: string | null;
  /** The whole body of a content-length answer; null for a chunked or relayed one. */
  body: Buffer | null;
  /** The decoded body of a chunked answer (a stream), or a relayed one, as it arrives; null otherwise. */
  stream: Readable | null;
  /** The declared length of a content-length answer; null for a chunked one. */
  contentLength: number | null;
}

/** An answer head larger than this is not the runtime's: the connection is dropped. */
const MAX_HEAD_BYTES = 64 * 1024;
/**
 * The largest result a function may return. A caller's answer, a run record's webhook copy and the runtime's
 * own encoding each hold it once: 32 MiB keeps a replica of the default concurrency (4) within a few hundred MB
 * even when every call returns that much, and is well past any JSON answer meant for an HTTP caller.
 */
export const DEFAULT_RESULT_LIMIT_BYTES = 32 * 1024 * 1024;
/** A relayed answer (`relayLargeBody`) longer than this is streamed as it arrives instead of read whole. */
export const RELAY_BODY_BYTES = 1024 * 1024;
/** Bodies up to this size are copied into the head's buffer for a single write; larger ones are written after it. */
const COALESCE_BODY_BYTES = 64 * 1024;
const CRLF_CRLF = Buffer.from('\r\n\r\n');

export interface RuntimeConnectionsOptions {
  maxConnections: number;
  resultLimitBytes?: number;
  /**
   * Called when the runtime is seen going away: it refused a connection, or closed one it was not asked to (the
   * Python runtime closes connections only as it exits). Sooner than its supervisor or health probe can tell.
   */
  onRuntimeGone?: () => void;
}

export class RuntimeConnections {
  readonly #host: string;
  readonly #port: number;
  readonly #headSuffix: string;
  readonly #maxConnections: number;
  /** An answer body declared longer than this is refused unread (RESULT_TOO_LARGE). */
  readonly resultLimitBytes: number;
  readonly #onRuntimeGone: (() => void) | undefined;
  readonly #idle: RuntimeConnection[] = [];
  readonly #open = new Set<RuntimeConnection>();
  /** Calls waiting for a connection when all `maxConnections` are busy, first come first served. */
  readonly #waiting: Array<() => void> = [];
  #destroyed = false;

  /** `origin`: `http://host:port` of the runtime. */
  constructor(origin: string, options: RuntimeConnectionsOptions) {
    const url = new URL(origin);
    this.#host = url.hostname;
    this.#port = Number(url.port || 80);
    this.#headSuffix = ` HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\nx-request-id: `;
    this.#maxConnections = options.maxConnections;
    this.resultLimitBytes = options.resultLimitBytes ?? DEFAULT_RESULT_LIMIT_BYTES;
    this.#onRuntimeGone = options.onRuntimeGone;
  }

  async request(request: RuntimeRequest): Promise<RuntimeResponse> {
    if (request.stopper.stopReason) throw request.stopper.stopReason;
    const connection = this.#idle.pop() ?? this.#connectIfAllowed() ?? (await this.#waitForConnection(request.stopper));
    return connection.exchange(request, this.#head(request));
  }

  /** Closes every connection; calls in flight fail with RUNTIME_DETACHED, later ones (never sent) RUNTIME_UNREACHABLE. */
  destroy(): void {
    this.#destroyed = true;
    for (const connection of [...this.#open]) connection.destroy(new RuntimeConnectionError('RUNTIME_DETACHED', 'the app was detached from its runtime'));
    for (const wake of this.#waiting.splice(0)) wake();
  }

  /** Called by a connection whose exchange ended cleanly and that may carry the next one. */
  release(connection: RuntimeConnection): void {
    const wake = this.#waiting.shift();
    this.#idle.push(connection);
    wake?.();
  }

  /** Called by a connection whose runtime refused it or closed it unasked. */
  runtimeGone(): void {
    if (!this.#destroyed) this.#onRuntimeGone?.();
  }

  /** Called by a connection once its socket has closed. */
  forget(connection: RuntimeConnection): void {
    this.#open.delete(connection);
    const at = this.#idle.indexOf(connection);
    if (at !== -1) this.#idle.splice(at, 1);
    this.#waiting.shift()?.();
  }

  #head(request: RuntimeRequest): string {
    return (
      'POST ' +
      request.path +
      this.#headSuffix +
      request.runId +
      (request.stream ? '\r\nx-runlet-stream: 1' : request.validateOnly ? '\r\nx-runlet-validate: 1' : '') +
      '\r\ncontent-length: ' +
      request.body.length +
      '\r\n\r\n'
    );
  }

  #connectIfAllowed(): RuntimeConnection | null {
    if (this.#destroyed) throw new RuntimeConnectionError('RUNTIME_UNREACHABLE', 'the app was detached from its runtime before the call was sent');
    if (this.#open.size >= this.#maxConnections) return null;
    const connection = new RuntimeConnection(this, connect({ host: this.#host, port: this.#port, noDelay: true }));
    this.#open.add(connection);
    return connection;
  }

  async #waitForConnection(stopper: CallStopper): Promise<RuntimeConnection> {
    for (;;) {
      await new Promise<void>((resolve, reject) => {
        const onStop = (reason: Error): void => {
          if (stopper.onStop === onStop) stopper.onStop = null;
          const at = this.#waiting.indexOf(wake);
          if (at !== -1) this.#waiting.splice(at, 1);
          reject(reason);
        };
        const wake = (): void => {
          if (stopper.onStop === onStop) stopper.onStop = null;
          resolve();
        };
        stopper.onStop = onStop;
        this.#waiting.push(wake);
      });
      const connection = this.#idle.pop() ?? this.#connectIfAllowed();
      if (connection) return connection;
    }
  }
}

type ParseState = 'idle' | 'head' | 'body' | 'relayed-body' | 'chunk-size' | 'chunk-data' | 'chunk-crlf' | 'last-crlf';

/** One socket to the runtime, carrying one exchange at a time. */
class RuntimeConnection {
  readonly #pool: RuntimeConnections;
  readonly #socket: Socket;
  #state: ParseState = 'idle';
  /** Unparsed bytes carried over to the next chunk. */
  #pending: Buffer | null = null;
  #closeAfter = false;
  #closed = false;
  /** The socket connected: until then, a failure means the runtime never saw the call. */
  #connected = false;
  // The exchange in flight.
  #resolve: ((response: RuntimeResponse) => void) | null = null;
  #reject: ((error: Error) => void) | null = null;
  #stopper: CallStopper | null = null;
  #response: RuntimeResponse | null = null;
  #bodyParts: Buffer[] = [];
  #remaining = 0;
  #stream: Readable | null = null;
  #relayLargeBody = false;

  constructor(pool: RuntimeConnections, socket: Socket) {
    this.#pool = pool;
    this.#socket = socket;
    socket.once('connect', () => (this.#connected = true));
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (error) => this.#lost(error));
    socket.on('end', () => this.#lost(new RuntimeConnectionError('RUNTIME_CONNECTION_CLOSED', 'the runtime closed the connection')));
    socket.on('close', () => this.#lost(new RuntimeConnectionError('RUNTIME_CONNECTION_CLOSED', 'the connection to the runtime closed')));
  }

  /**
   * The socket failed or closed without this side ending it. Refused (nothing listens), or closed by the runtime
   * once connected: the runtime is going away. Any other failure to connect (this process out of sockets, say)
   * says nothing about the runtime.
   */
  #lost(error: Error): void {
    if (this.#closed) return;
    const refused = !this.#connected && (error as { code?: string }).code === 'ECONNREFUSED';
    this.destroy(refused ? new RuntimeConnectionError('RUNTIME_UNREACHABLE', 'the runtime refused the connection: it is not listening') : error);
    if (refused || this.#connected) this.#pool.runtimeGone();
  }

  exchange(request: RuntimeRequest, head: string): Promise<RuntimeResponse> {
    return new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
      this.#stopper = request.stopper;
      this.#relayLargeBody = request.relayLargeBody === true;
      this.#state = 'head';
      request.stopper.onStop = this.#onStop;
      const body = request.body;
      if (body.length <= COALESCE_BODY_BYTES) {
        const headLength = Buffer.byteLength(head, 'latin1');
        const message = Buffer.allocUnsafe(headLength + body.length);
        message.write(head, 0, 'latin1');
        body.copy(message, headLength);
        this.#socket.write(message);
      } else {
        this.#socket.cork();
        this.#socket.write(head, 'latin1');
        this.#socket.write(body);
        this.#socket.uncork();
      }
    });
  }

  /** Ends the connection; an exchange in flight fails with `error`. Idempotent. */
  destroy(error: Error): void {
    if (!this.#closed) {
      this.#closed = true;
      this.#socket.destroy();
      this.#pool.forget(this);
    }
    this.#fail(error);
  }

  readonly #onStop = (reason: Error): void => {
    this.destroy(reason);
  };

  #fail(error: Error): void {
    const reject = this.#reject;
    const stream = this.#stream;
    this.#endExchange();
    if (reject) reject(error);
    else if (stream && !stream.readableEnded) stream.destroy(error);
  }

  #endExchange(): void {
    if (this.#stopper?.onStop === this.#onStop) this.#stopper.onStop = null;
    this.#stopper = null;
    this.#resolve = null;
    this.#reject = null;
    this.#response = null;
    this.#bodyParts = [];
    this.#stream = null;
    this.#state = 'idle';
  }

  #onData(chunk: Buffer): void {
    const data = this.#pending === null ? chunk : Buffer.concat([this.#pending, chunk]);
    this.#pending = null;
    let offset = 0;
    // Decoded stream bytes of this chunk, pushed as one piece after parsing it.
    const streamed: Buffer[] = [];
    while (offset < data.length || this.#state === 'body') {
      switch (this.#state) {
        case 'idle':
          this.destroy(new RuntimeConnectionError('RUNTIME_PROTOCOL_ERROR', 'the runtime sent bytes nobody asked for'));
          return;
        case 'head': {
          const end = data.indexOf(CRLF_CRLF, offset);
          if (end === -1) {
            if (data.length - offset > MAX_HEAD_BYTES) {
              this.destroy(new RuntimeConnectionError('RUNTIME_PROTOCOL_ERROR', `the runtime's answer head exceeds ${MAX_HEAD_BYTES} bytes`));
              return;
            }
            this.#pending = data.subarray(offset);
            return;
          }
          if (!this.#parseHead(data.toString('latin1', offset, end))) return;
          offset = end + 4;
          break;
        }
        case 'body': {
          const take = Math.min(this.#remaining, data.length - offset);
          if (take > 0) this.#bodyParts.push(data.subarray(offset, offset + take));
          this.#remaining -= take;
          offset += take;
          if (this.#remaining > 0) return;
          const response = this.#response!;
          response.body = this.#bodyParts.length === 1 ? this.#bodyParts[0]! : Buffer.concat(this.#bodyParts);
          const resolve = this.#resolve!;
          this.#complete(data, offset);
          resolve(response);
          return;
        }
        case 'relayed-body': {
          const take = Math.min(this.#remaining, data.length - offset);
          streamed.push(data.subarray(offset, offset + take));
          this.#remaining -= take;
          offset += take;
          if (this.#remaining > 0) break;
          const stream = this.#stream!;
          this.#push(streamed);
          this.#complete(data, offset);
          stream.push(null);
          return;
        }
        case 'chunk-size': {
          const end = data.indexOf(13 /* \r */, offset);
          if (end === -1 || end + 1 >= data.length) {
            this.#pending = data.subarray(offset);
            this.#push(streamed);
            return;
          }
          const size = parseInt(data.toString('latin1', offset, end), 16);
          if (!Number.isInteger(size) || size < 0) {
            this.destroy(new RuntimeConnectionError('RUNTIME_PROTOCOL_ERROR', 'the runtime sent a malformed chunk size'));
            return;
          }
          offset = end + 2;
          this.#remaining = size;
          this.#state = size === 0 ? 'last-crlf' : 'chunk-data';
          break;
        }
        case 'chunk-data': {
          const take = Math.min(this.#remaining, data.length - offset);
          streamed.push(data.subarray(offset, offset + take));
          this.#remaining -= take;
          offset += take;
          if (this.#remaining === 0) this.#state = 'chunk-crlf';
          break;
        }
        case 'chunk-crlf':
        case 'last-crlf': {
          if (data.length - offset < 2) {
            this.#pending = data.subarray(offset);
            this.#push(streamed);
            return;
          }
          offset += 2;
          if (this.#state === 'chunk-crlf') {
            this.#state = 'chunk-size';
            break;
          }
          const stream = this.#stream!;
          this.#push(streamed);
          this.#complete(data, offset);
          stream.push(null);
          return;
        }
      }
    }
    this.#push(streamed);
  }

  /** Reads the status and the headers that matter; false when the connection had to be dropped. */
  #parseHead(head: string): boolean {
    const statusCode = Number(head.slice(9, 12));
    if (!head.startsWith('HTTP/1.') || !Number.isInteger(statusCode)) {
      this.destroy(new RuntimeConnectionError('RUNTIME_PROTOCOL_ERROR', `the runtime answered with a malformed status line: ${head.slice(0, 80)}`));
      return false;
    }
    let contentType = '';
    let allow: string | null = null;
    let contentLength = 0;
    let chunked = false;
    for (let start = head.indexOf('\r\n') + 2; start > 1; ) {
      const end = head.indexOf('\r\n', start);
      const line = end === -1 ? head.slice(start) : head.slice(start, end);
      start = end + 2;
      const colon = line.indexOf(':');
      if (colon === -1) continue;
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'content-length') contentLength = Number(value);
      else if (name === 'content-type') contentType = value;
      else if (name === 'transfer-encoding') chunked = value.toLowerCase() === 'chunked';
      else if (name === 'connection') this.#closeAfter = value.toLowerCase() === 'close';
      else if (name === 'allow') allow = value;
    }
    if (!chunked && !(Number.isInteger(contentLength) && contentLength >= 0)) {
      this.destroy(new RuntimeConnectionError('RUNTIME_PROTOCOL_ERROR', 'the runtime answered with an invalid content-length'));
      return false;
    }
    if (!chunked && contentLength > this.#pool.resultLimitBytes) {
      this.destroy(
        new RuntimeConnectionError('RESULT_TOO_LARGE', `the result of ${contentLength} bytes is over the limit of ${this.#pool.resultLimitBytes} bytes`),
      );
      return false;
    }
    const response: RuntimeResponse = { statusCode, contentType, allow, body: null, stream: null, contentLength: chunked ? null : contentLength };
    const relayed = !chunked && this.#relayLargeBody && contentLength > RELAY_BODY_BYTES;
    if (chunked || relayed) {
      const stream = new Readable({
        read: () => this.#socket.resume(),
        destroy: (error, callback) => {
          // The consumer stopped reading mid-answer: the connection cannot carry another call.
          if (this.#stream === stream) this.destroy(error ?? new RuntimeConnectionError('RUNTIME_CONNECTION_CLOSED', 'the stream was closed before its end'));
          callback(error);
        },
      });
      response.stream = stream;
      this.#stream = stream;
      this.#state = chunked ? 'chunk-size' : 'relayed-body';
      this.#remaining = contentLength;
      const resolve = this.#resolve!;
      // The exchange goes on (the stream's chunks), but nobody waits for the head any more.
      this.#resolve = null;
      this.#reject = null;
      resolve(response);
      return true;
    }
    this.#response = response;
    this.#remaining = contentLength;
    this.#state = 'body';
    return true;
  }

  #push(parts: Buffer[]): void {
    if (parts.length === 0 || !this.#stream) return;
    const piece = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    parts.length = 0;
    if (!this.#stream.push(piece)) this.#socket.pause();
  }

  /** The answer is complete at `offset`: the connection is released, or closed if it cannot be reused. */
  #complete(data: Buffer, offset: number): void {
    this.#endExchange();
    // A stream's consumer may have paused the socket; the next exchange must be read whatever it does.
    this.#socket.resume();
    if (this.#closeAfter || offset < data.length) {
      // `connection: close`, or bytes after the answer (the runtime never pipelines answers unasked).
      this.destroy(new RuntimeConnectionError('RUNTIME_CONNECTION_CLOSED', 'the runtime closed the connection after its answer'));
      return;
    }
    this.#pool.release(this);
  }
}
