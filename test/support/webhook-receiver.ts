// The tests' webhook receiver: a real server on loopback whose answer the test scripts per attempt (a list of
// answers, or a function), recording every request and counting connections.
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedDelivery {
  method: string;
  /** Path and query. */
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** performance.now() when the request had arrived whole. */
  receivedAt: number;
}

/**
 * How to answer: a status (text/plain `ok`), a status with headers and body, 'hang' (never answer), or 'reset'
 * (destroy the connection).
 */
export type ScriptedAnswer = number | { status: number; headers?: Record<string, string>; body?: string } | 'hang' | 'reset';

/** Generous for a loaded 2-core machine: only a failing test waits this long. */
const RECEIVED_BOUND_MS = 15_000;

export class WebhookReceiver {
  readonly deliveries: ReceivedDelivery[] = [];
  /** TCP connections accepted. */
  connections = 0;
  readonly #server: Server;
  readonly #hanging = new Set<ServerResponse>();
  readonly #waiters: Array<{ count: number; resolve: () => void }> = [];
  /** Decides the answer to each request; default: the script's next answer, then 200. */
  answer: (delivery: ReceivedDelivery, index: number) => ScriptedAnswer;

  private constructor(script: ScriptedAnswer[]) {
    const remaining = [...script];
    this.answer = () => remaining.shift() ?? 200;
    this.#server = createServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const delivery = {
        method: request.method ?? '',
        path: request.url ?? '/',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        receivedAt: performance.now(),
      };
      const index = this.deliveries.push(delivery) - 1;
      const answer = this.answer(delivery, index);
      if (answer === 'reset') request.socket.destroy();
      else if (answer === 'hang') this.#hanging.add(response);
      else if (typeof answer === 'number') response.writeHead(answer, { 'content-type': 'text/plain' }).end('ok');
      else response.writeHead(answer.status, answer.headers).end(answer.body ?? '');
      for (const waiter of this.#waiters.filter((w) => this.deliveries.length >= w.count)) {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    });
    this.#server.on('connection', () => (this.connections += 1));
  }

  /** Listening on 127.0.0.1, answering request n with script[n] (200 once the script runs out). */
  static async start(script: ScriptedAnswer[] = []): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver(script);
    receiver.#server.listen(0, '127.0.0.1');
    await once(receiver.#server, 'listening');
    return receiver;
  }

  /** Listening on the Unix socket `path` (for a relay into a network namespace: test/control-plane/node.ts). */
  static async startOnSocket(path: string, script: ScriptedAnswer[] = []): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver(script);
    receiver.#server.listen(path);
    await once(receiver.#server, 'listening');
    return receiver;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The URL of `path` on the receiver. */
  at(path = '/hooks/in'): URL {
    return new URL(path, this.url);
  }

  /** Resolves once `count` requests in all have arrived; rejects when they have not within the bound. */
  received(count: number, timeoutMs = RECEIVED_BOUND_MS): Promise<void> {
    if (this.deliveries.length >= count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = {
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(new Error(`the receiver saw ${this.deliveries.length} requests within ${timeoutMs} ms, expected ${count}`));
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  async close(): Promise<void> {
    for (const response of this.#hanging) response.destroy();
    this.#server.closeAllConnections();
    this.#server.close();
    await once(this.#server, 'close');
  }
}
