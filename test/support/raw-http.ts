// HTTP/1.1 at the byte level, for tests of how a server reads a connection: requests written as given (split,
// pipelined, malformed), answers read back in order from the one socket.
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface RawAnswer {
  status: number;
  /** Lower-case names; a repeated header's values joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** The head as it came, status line and header lines with their case. */
  head: string;
}

export class RawConnection {
  readonly socket: Socket;
  #buffer = Buffer.alloc(0);
  #ended = false;
  #wake: (() => void) | null = null;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#wake?.();
    });
    socket.on('end', () => {
      this.#ended = true;
      this.#wake?.();
    });
    socket.on('close', () => {
      this.#ended = true;
      this.#wake?.();
    });
    socket.on('error', () => undefined);
  }

  static async open(origin: string): Promise<RawConnection> {
    const { hostname, port } = new URL(origin);
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    socket.setNoDelay(true);
    return new RawConnection(socket);
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** The next answer: a head, then a body of its Content-Length, or chunked. */
  async next(): Promise<RawAnswer> {
    for (;;) {
      const answer = this.#take();
      if (answer) return answer;
      if (this.#ended) throw new Error(`the connection ended with ${this.#buffer.length} bytes of an answer: ${JSON.stringify(this.#buffer.toString('latin1').slice(0, 200))}`);
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  /** Resolves once the server has closed the connection (after any answers, which stay readable). */
  async closedByServer(): Promise<void> {
    while (!this.#ended) await new Promise<void>((resolve) => (this.#wake = resolve));
  }

  close(): void {
    this.socket.destroy();
  }

  /** The bytes received and not yet taken as an answer (an answer without a body, say), as latin1. */
  received(): string {
    return this.#buffer.toString('latin1');
  }

  #take(): RawAnswer | null {
    const headEnd = this.#buffer.indexOf('\r\n\r\n');
    if (headEnd === -1) return null;
    const head = this.#buffer.toString('latin1', 0, headEnd);
    const [statusLine, ...lines] = head.split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    const status = Number(statusLine!.split(' ')[1]);
    const bodyStart = headEnd + 4;
    let body: Buffer;
    let end: number;
    if (headers['transfer-encoding'] === 'chunked') {
      const chunks: Buffer[] = [];
      let at = bodyStart;
      for (;;) {
        const sizeEnd = this.#buffer.indexOf('\r\n', at);
        if (sizeEnd === -1) return null;
        const size = parseInt(this.#buffer.toString('latin1', at, sizeEnd), 16);
        if (this.#buffer.length < sizeEnd + 2 + size + 2) return null;
        chunks.push(this.#buffer.subarray(sizeEnd + 2, sizeEnd + 2 + size));
        at = sizeEnd + 2 + size + 2;
        if (size === 0) break;
      }
      body = Buffer.concat(chunks);
      end = at;
    } else {
      const length = Number(headers['content-length'] ?? 0);
      if (this.#buffer.length < bodyStart + length) return null;
      body = this.#buffer.subarray(bodyStart, bodyStart + length);
      end = bodyStart + length;
    }
    this.#buffer = this.#buffer.subarray(end);
    return { status, headers, body: body.toString('utf8'), head };
  }
}

/** A POST with a JSON body and a Content-Length, as most clients send it. */
export function jsonPost(path: string, body: unknown, extraHeaders = ''): string {
  const text = JSON.stringify(body);
  return `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n${extraHeaders}\r\n${text}`;
}

/**
 * A request whose path goes out byte for byte (fetch would resolve dot segments and re-encode it first), to a
 * server on the loopback; its status and JSON body ({} when empty).
 */
export function sendVerbatim(
  port: number,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ host: '127.0.0.1', port, method, path, headers: options.headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: response.statusCode!, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) });
      });
    });
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}
