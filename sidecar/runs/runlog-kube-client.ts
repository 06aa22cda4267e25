// The sidecar's HTTP client for the Kubernetes API: JSON requests over one pooled connection, each bounded
// by a timeout, failures as KubeRequestError with the server's Status.
//
// Why not client-node's generated CustomObjectsApi: client-node 2.0 builds a new undici Agent for every
// request — a new connection, and in a cluster a new TLS handshake — which an async run's durable save would
// pay on top of its one round trip; and it re-serialises bodies, while the RunLog status is sent as the exact
// bytes measured against its budget. Authentication headers are read per request (service-account tokens are
// rotated on disk).
import { Agent, ProxyAgent, fetch, type Dispatcher } from 'undici';
import type { KubeCredentials } from './kube-credentials.ts';

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

export class KubeJsonClient {
  readonly #credentials: KubeCredentials;
  readonly #timeoutMs: number;
  #dispatcher: Promise<Dispatcher> | undefined;

  constructor(credentials: KubeCredentials, options: { requestTimeoutMs: number }) {
    this.#credentials = credentials;
    this.#timeoutMs = options.requestTimeoutMs;
  }

  /** The parsed JSON answer of a 2xx response; KubeRequestError otherwise. */
  async request(method: string, path: string, request: KubeRequest = {}): Promise<unknown> {
    const what = `${method} ${path}`;
    let response;
    let text;
    try {
      const headers = await this.#credentials.authHeaders();
      headers.accept = 'application/json';
      if (request.body !== undefined) headers['content-type'] = request.contentType ?? 'application/json';
      response = await fetch(this.#credentials.server + path, {
        method,
        headers,
        body: request.body,
        dispatcher: await this.#pooledDispatcher(),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      text = await response.text();
    } catch (error) {
      throw new KubeRequestError(what, 0, describeTransportError(error), { cause: error });
    }
    if (!response.ok) {
      const status = parseStatus(text);
      throw new KubeRequestError(what, response.status, status.message ?? text.slice(0, 500), {
        reason: status.reason,
        retryAfterMs: parseRetryAfter(response.headers.get('retry-after')),
      });
    }
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new KubeRequestError(what, response.status, `answer is not JSON: ${text.slice(0, 200)}`, { cause: error });
    }
  }

  async close(): Promise<void> {
    const dispatcher = await this.#dispatcher?.catch(() => undefined);
    await dispatcher?.close();
  }

  /** One keep-alive agent for the client's life, with the cluster's TLS settings. */
  #pooledDispatcher(): Promise<Dispatcher> {
    this.#dispatcher ??= this.#createDispatcher();
    return this.#dispatcher;
  }

  async #createDispatcher(): Promise<Dispatcher> {
    const connect = await this.#credentials.tls();
    const proxyUrl = this.#credentials.proxyUrl;
    if (proxyUrl === undefined) return new Agent({ connect: { ...connect, keepAlive: true, keepAliveInitialDelay: 30_000 } });
    if (!proxyUrl.startsWith('http')) throw new Error(`the sidecar supports HTTP(S) proxies to the API server only, not ${proxyUrl}`);
    return new ProxyAgent({ uri: proxyUrl, requestTls: connect });
  }
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

/** undici reports "fetch failed" and keeps the reason (ECONNRESET, a timeout) in `cause`. */
function describeTransportError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.name === 'TimeoutError') return error.message;
  const cause = error.cause;
  if (cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code;
    return `${error.message} (${code ?? cause.message})`;
  }
  return error.message;
}
