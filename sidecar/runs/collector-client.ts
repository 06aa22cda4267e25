// How the results shipper POSTs a batch to the collector: node:http over one kept-alive connection, not the
// global fetch. fetch is Node's bundled undici, loaded on its first call and ~13 MB of the sidecar's RSS (its
// target is 80 MB; see ../node-http.ts), for one request a second at most.
import type { Agent, IncomingMessage } from 'node:http';
import { http, nodeHttps } from '../node-http.ts';

/** The collector answers a few hundred bytes; a longer answer is cut here, so no answer can fill the sidecar's memory. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface CollectorAnswer {
  status: number;
  /** The answer's body, at most MAX_ANSWER_BYTES of it. */
  text: string;
}

export class CollectorClient {
  readonly #url: URL;
  readonly #timeoutMs: number;
  /** One batch is in flight at a time: one connection, kept between batches. */
  readonly #agent: Agent;

  constructor(url: string, timeoutMs: number) {
    this.#url = new URL(url);
    if (this.#url.protocol !== 'http:' && this.#url.protocol !== 'https:') throw new Error(`the results collector's URL must be http or https, got ${url}`);
    this.#timeoutMs = timeoutMs;
    this.#agent = this.#url.protocol === 'https:' ? new (nodeHttps().Agent)({ keepAlive: true, maxSockets: 1 }) : new http.Agent({ keepAlive: true, maxSockets: 1 });
  }

  /** POSTs `body`; resolves with the answer, rejects when the collector cannot be reached or does not answer within the timeout. */
  post(body: Buffer, headers: Record<string, string>): Promise<CollectorAnswer> {
    const send = this.#url.protocol === 'https:' ? nodeHttps().request : http.request;
    return new Promise((resolve, reject) => {
      const request = send(this.#url, {
        method: 'POST',
        agent: this.#agent,
        headers: { ...headers, 'content-length': String(body.length) },
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      request.once('error', (error) => reject(new Error(`the results collector ${this.#url.href} could not be reached: ${error.message}`, { cause: error })));
      request.once('response', (response: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let length = 0;
        response.on('data', (chunk: Buffer) => {
          if (length >= MAX_ANSWER_BYTES) return;
          chunks.push(chunk);
          length += chunk.length;
        });
        response.once('error', (error) => reject(new Error(`the answer of the results collector ${this.#url.href} was cut: ${error.message}`, { cause: error })));
        response.once('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8', 0, MAX_ANSWER_BYTES) }));
      });
      request.end(body);
    });
  }

  /** Closes the kept connection. */
  close(): void {
    this.#agent.destroy();
  }
}
