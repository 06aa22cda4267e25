// The sidecar's HTTP client for the Kubernetes API: JSON requests over one pooled connection, each bounded
// by a timeout, failures as KubeRequestError with the server's Status.
//
// Why not client-node's generated CustomObjectsApi: client-node 2.0 builds a new undici Agent for every
// request — a new connection, and in a cluster a new TLS handshake — which an async run's durable save would
// pay on top of its one round trip; and it re-serialises bodies, while the RunLog status is sent as the exact
// bytes measured against its budget. Authentication headers are read per request (service-account tokens are
// rotated on disk). Requests go through node:http(s) with a keep-alive agent; undici (~13 MB of RSS in a
// sidecar whose target is 80 MB) is loaded only to reach the API server through a proxy.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { KubeCredentials, KubeTls } from './kube-credentials.ts';

/** A failed API call: the HTTP status and the Status the server answered, or the transport error as `cause`. */
export class KubeRequestError extends Error {
  /** HTTP status; 0 when no answer arrived (connection refused or reset, timeout). */
  readonly status: number;
  readonly reason: string | undefined;
  /** From `Retry-After` (429, 503). */
  readonly retryAfterMs: number | undefined;

  constructor(
    what: string,
    status: number,
    detail: string,
    extra: { reason?: string; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    const answer = status === 0 ? 'no answer' : `${status}${extra.reason ? ` ${extra.reason}` : ''}`;
    super(`${what}: ${answer}: ${detail}`, { cause: extra.cause });
    this.name = 'KubeRequestError';
    this.status = status;
    this.reason = extra.reason;
    this.retryAfterMs = extra.retryAfterMs;
  }
}

export interface KubeRequest {
  /** Already serialised JSON. */
  body?: string;
  contentType?: string;
}

/** An answer read whole. */
interface KubeAnswer {
  status: number;
  retryAfter: string | null;
  text: string;
}

/** How requests reach the API server: directly, or through a proxy. */
interface Transport {
  send(method: string, url: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number): Promise<KubeAnswer>;
  close(): Promise<void>;
}

export class KubeJsonClient {
  readonly #credentials: KubeCredentials;
  readonly #timeoutMs: number;
  #transport: Promise<Transport> | undefined;

  constructor(credentials: KubeCredentials, options: { requestTimeoutMs: number }) {
    this.#credentials = credentials;
    this.#timeoutMs = options.requestTimeoutMs;
  }

  /** The parsed JSON answer of a 2xx response; KubeRequestError otherwise. */
  async request(method: string, path: string, request: KubeRequest = {}): Promise<unknown> {
    const what = `${method} ${path}`;
    let answer: KubeAnswer;
    try {
      const headers = await this.#credentials.authHeaders();
      headers.accept = 'application/json';
      if (request.body !== undefined) headers['content-type'] = request.contentType ?? 'application/json';
      const transport = await this.#pooledTransport();
      answer = await transport.send(method, this.#credentials.server + path, headers, request.body, this.#timeoutMs);
    } catch (error) {
      throw new KubeRequestError(what, 0, describeTransportError(error), { cause: error });
    }
    const { status: httpStatus, text } = answer;
    if (httpStatus < 200 || httpStatus > 299) {
      const status = parseStatus(text);
      throw new KubeRequestError(what, httpStatus, status.message ?? text.slice(0, 500), {
        reason: status.reason,
        retryAfterMs: parseRetryAfter(answer.retryAfter),
      });
    }
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new KubeRequestError(what, httpStatus, `answer is not JSON: ${text.slice(0, 200)}`, { cause: error });
    }
  }

  async close(): Promise<void> {
    const transport = await this.#transport?.catch(() => undefined);
    await transport?.close();
  }

  /** One keep-alive pool for the client's life, with the cluster's TLS settings. */
  #pooledTransport(): Promise<Transport> {
    this.#transport ??= this.#createTransport();
    return this.#transport;
  }

  async #createTransport(): Promise<Transport> {
    const tls = await this.#credentials.tls();
    const proxyUrl = this.#credentials.proxyUrl;
    if (proxyUrl === undefined) return directTransport(this.#credentials.server, tls);
    if (!proxyUrl.startsWith('http')) throw new Error(`the sidecar supports HTTP(S) proxies to the API server only, not ${proxyUrl}`);
    return proxyTransport(proxyUrl, tls);
  }
}

function directTransport(server: string, tls: KubeTls): Transport {
  const secure = server.startsWith('https:');
  const agent = secure ? new HttpsAgent({ ...tls, keepAlive: true, keepAliveMsecs: 30_000 }) : new HttpAgent({ keepAlive: true, keepAliveMsecs: 30_000 });
  const send = secure ? httpsRequest : httpRequest;
  return {
    send(method, url, headers, body, timeoutMs) {
      return new Promise((resolve, reject) => {
        const onResponse = (response: IncomingMessage): void => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, retryAfter: single(response.headers['retry-after']), text }));
          response.on('error', reject);
        };
        const outgoing = send(url, { method, headers, agent, signal: AbortSignal.timeout(timeoutMs) }, onResponse);
        outgoing.on('error', reject);
        outgoing.end(body);
      });
    },
    async close() {
      agent.destroy();
    },
  };
}

async function proxyTransport(proxyUrl: string, tls: KubeTls): Promise<Transport> {
  const { ProxyAgent, fetch } = await import('undici');
  const dispatcher = new ProxyAgent({ uri: proxyUrl, requestTls: tls });
  return {
    async send(method, url, headers, body, timeoutMs) {
      const response = await fetch(url, { method, headers, body, dispatcher, signal: AbortSignal.timeout(timeoutMs) });
      return { status: response.status, retryAfter: response.headers.get('retry-after'), text: await response.text() };
    },
    close: () => dispatcher.close(),
  };
}

function single(value: string | string[] | undefined): string | null {
  return value === undefined ? null : Array.isArray(value) ? (value[0] ?? null) : value;
}

function parseStatus(text: string): { reason?: string; message?: string } {
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body !== 'object' || body === null) return {};
    const { reason, message } = body as Record<string, unknown>;
    return { reason: typeof reason === 'string' ? reason : undefined, message: typeof message === 'string' ? message : undefined };
  } catch {
    return {};
  }
}

function parseRetryAfter(header: string | null): number | undefined {
  const seconds = Number(header);
  return header !== null && Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/**
 * A timeout reads as one (node:http aborts with an AbortError whose cause is the timeout); undici reports
 * "fetch failed" and keeps the reason (ECONNRESET, a timeout) in `cause`.
 */
function describeTransportError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.name === 'TimeoutError') return error.message;
  if (error.name === 'AbortError' && error.cause instanceof Error && error.cause.name === 'TimeoutError') return error.cause.message;
  const cause = error.cause;
  if (cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code;
    return `${error.message} (${code ?? cause.message})`;
  }
  // node:http's own errors carry their code (ECONNREFUSED, ERR_TLS_CERT_ALTNAME_INVALID) beside the message.
  const code = (error as NodeJS.ErrnoException).code;
  return code && !error.message.includes(code) ? `${error.message} (${code})` : error.message;
}
