// A real webhook receiver on loopback whose answer the test scripts per attempt, recording every request.
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedDelivery {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  receivedAt: number;
}

/** How to answer: a status, 'hang' (never answer), or 'reset' (destroy the connection). */
export type ScriptedAnswer = number | 'hang' | 'reset';

export class WebhookReceiver {
  readonly deliveries: ReceivedDelivery[] = [];
  readonly #server: Server;
  readonly #hanging = new Set<ServerResponse>();
  readonly #waiters: Array<{ count: number; resolve: () => void }> = [];
  /** Decides the answer to each request; default 200. */
  answer: (delivery: ReceivedDelivery, index: number) => ScriptedAnswer = () => 200;

  private constructor() {
    this.#server = createServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const delivery = { path: request.url ?? '/', headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), receivedAt: performance.now() };
      const index = this.deliveries.push(delivery) - 1;
      const answer = this.answer(delivery, index);
      if (answer === 'reset') request.socket.destroy();
      else if (answer === 'hang') this.#hanging.add(response);
      else response.writeHead(answer, { 'content-type': 'text/plain' }).end('ok');
      for (const waiter of this.#waiters.filter((w) => this.deliveries.length >= w.count)) {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    });
  }

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    receiver.#server.listen(0, '127.0.0.1');
    await once(receiver.#server, 'listening');
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Resolves once `count` requests in all have arrived. */
  received(count: number): Promise<void> {
    if (this.deliveries.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ count, resolve }));
  }

  async close(): Promise<void> {
    for (const response of this.#hanging) response.destroy();
    this.#server.closeAllConnections();
    this.#server.close();
    await once(this.#server, 'close');
  }
}
