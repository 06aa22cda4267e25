// How kube/'s client reaches the API server: node:http(s) with one keep-alive pool for the client's life, or
// undici through an HTTP(S) proxy. node:https and not undici for the direct path: measured against a TLS
// server on loopback (keep-alive, a 1 KB PATCH), node:https served as many requests a second as undici
// (~3,900 against 2,800–5,600 alone, ~3,800 against 3,300 at 16 concurrent), with ~55 MB less RSS, since
// undici is not loaded; a sidecar's target is 80 MB. undici is imported only to reach a proxy.
import type { IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import type { KubeCredentials, KubeTls } from './credentials.ts';

// Required, not imported: an ES module's import of node:http reads every export, and three of them are getters
// that load Node's bundled undici with http2, tls and zlib (13 MB of RSS; sidecar/node-http.ts). node:https
// (tls) only once an API server is reached over TLS.
const require = createRequire(import.meta.url);
const http = require('node:http') as typeof import('node:http');

/** An answer read whole. */
export interface KubeAnswer {
  status: number;
  retryAfter: string | null;
  text: string;
}

export interface Transport {
  /** `signal`, when given, ends the request early too (a watch stopped mid-list). */
  send(method: string, url: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<KubeAnswer>;
  close(): Promise<void>;
}

export async function createTransport(credentials: KubeCredentials): Promise<Transport> {
  const tls = await credentials.tls();
  const proxyUrl = credentials.proxyUrl;
  if (proxyUrl === undefined) return directTransport(credentials.server, tls);
  if (!proxyUrl.startsWith('http')) throw new Error(`only HTTP(S) proxies to the API server are supported, not ${proxyUrl}`);
  return proxyTransport(proxyUrl, tls);
}

function directTransport(server: string, tls: KubeTls): Transport {
  const secure = server.startsWith('https:');
  const https = secure ? (require('node:https') as typeof import('node:https')) : undefined;
  const agent = https !== undefined ? new https.Agent({ ...tls, keepAlive: true, keepAliveMsecs: 30_000 }) : new http.Agent({ keepAlive: true, keepAliveMsecs: 30_000 });
  const send = https !== undefined ? https.request : http.request;
  const attempt = (method: string, url: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal, retried: boolean): Promise<KubeAnswer> =>
    new Promise((resolve, reject) => {
      const onResponse = (response: IncomingMessage): void => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, retryAfter: single(response.headers['retry-after']), text }));
        response.on('error', reject);
      };
      // Framed by its length: node:http sends the body of a DELETE (preconditions) unframed without one.
      if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
      const outgoing = send(url, { method, headers, agent, signal }, onResponse);
      outgoing.on('error', (error: NodeJS.ErrnoException) => {
        // A kept-alive connection the server closed as this request went out (its idle timeout): the request never
        // reached it. A read is sent again once, on a new connection; a write is the caller's to judge.
        if (!retried && method === 'GET' && outgoing.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE')) {
          attempt(method, url, headers, body, signal, true).then(resolve, reject);
        } else {
          reject(error);
        }
      });
      outgoing.end(body);
    });
  return {
    send(method, url, headers, body, timeoutMs, signal) {
      return attempt(method, url, headers, body, bounded(timeoutMs, signal), false);
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
    async send(method, url, headers, body, timeoutMs, signal) {
      const response = await fetch(url, { method, headers, body, dispatcher, signal: bounded(timeoutMs, signal) });
      return { status: response.status, retryAfter: response.headers.get('retry-after'), text: await response.text() };
    },
    close: () => dispatcher.close(),
  };
}

/** The request's timeout, and the caller's signal when it gave one. */
function bounded(timeoutMs: number, signal: AbortSignal | undefined): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal === undefined ? timeout : AbortSignal.any([timeout, signal]);
}

function single(value: string | string[] | undefined): string | null {
  return value === undefined ? null : Array.isArray(value) ? (value[0] ?? null) : value;
}

/**
 * A timeout reads as one (node:http aborts with an AbortError whose cause is the timeout); undici reports
 * "fetch failed" and keeps the reason (ECONNRESET, a timeout) in `cause`.
 */
export function describeTransportError(error: unknown): string {
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
