// The one JSON client for the Kubernetes API: reads, lists, creates, replaces, server-side applies, merge
// patches and deletes, each bounded by a timeout, over one pooled connection (transport.ts); failures are
// KubeApiError with the server's Status. Every call names its target by a KubePath (paths.ts), built from
// encoded segments: no caller joins strings into a path.
//
// Why not client-node's generated clients: their ObjectSerializer drops every field its models do not know
// and turns timestamps into Date objects, while server-side apply must send exactly the rendered object and
// callers compare plain JSON; client-node 2.0 builds a new undici Agent (a new connection, a new TLS
// handshake) for every request, which a 500-object resync or a durable save would pay for; and loading it costs
// a process ~46 MB of RSS. Authentication headers are read per request (tokens rotate). Watches use
// client-node's Watch (watch.ts) with the credentials' KubeConfig.
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeCredentials } from './credentials.ts';
import { KubeApiError, isNotFound } from './errors.ts';
import { refOf, resourcePath, type KubeList, type KubeObject } from './objects.ts';
import type { KubePath } from './paths.ts';
import { createTransport, describeTransportError, type Transport } from './transport.ts';

export interface KubeApiOptions {
  /** Bound on every call, so a hung connection cannot stall a caller forever. Default 30 s. */
  requestTimeoutMs?: number;
  /** Who owns the fields this client applies and patches; apply needs one. */
  fieldManager?: string;
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface KubeRequest {
  query?: Query;
  /** Already serialised JSON: sent as these exact bytes. */
  body?: string;
  /** Default application/json. */
  contentType?: string;
  /** This call's bound instead of the client's `requestTimeoutMs` (a Lease call must end by the renew deadline). */
  timeoutMs?: number;
  /** Ends the call early (a watch stopped while it lists). */
  signal?: AbortSignal;
}

/** Per-call settings of the typed calls. */
export interface CallOptions {
  timeoutMs?: number;
}

export class KubeApi {
  readonly credentials: KubeCredentials;
  readonly #timeoutMs: number;
  readonly #fieldManager: string | undefined;
  #transport: Promise<Transport> | undefined;
  #kubeConfig: Promise<KubeConfig> | undefined;

  constructor(credentials: KubeCredentials, options: KubeApiOptions = {}) {
    this.credentials = credentials;
    this.#timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.#fieldManager = options.fieldManager;
  }

  get<T extends KubeObject>(path: KubePath, options: CallOptions = {}): Promise<T> {
    return this.request('GET', path, { timeoutMs: options.timeoutMs }) as Promise<T>;
  }

  /** GET, or undefined on 404. */
  async find<T extends KubeObject>(path: KubePath, options: CallOptions = {}): Promise<T | undefined> {
    try {
      return await this.get<T>(path, options);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  list<T>(path: KubePath, query: Query = {}, options: { signal?: AbortSignal } = {}): Promise<KubeList<T>> {
    return this.request('GET', path, { query, signal: options.signal }) as Promise<KubeList<T>>;
  }

  create<T extends KubeObject>(path: KubePath, body: T, options: CallOptions = {}): Promise<T> {
    return this.request('POST', path, { body: JSON.stringify(body), timeoutMs: options.timeoutMs }) as Promise<T>;
  }

  /** PUT: fails with 409 when `body.metadata.resourceVersion` is no longer current. */
  replace<T extends KubeObject>(path: KubePath, body: T, options: CallOptions = {}): Promise<T> {
    return this.request('PUT', path, { body: JSON.stringify(body), timeoutMs: options.timeoutMs }) as Promise<T>;
  }

  /** Server-side apply as this client's field manager, taking over fields others changed (force). */
  apply<T extends KubeObject>(object: T): Promise<T> {
    if (this.#fieldManager === undefined) throw new Error('server-side apply needs a field manager: pass fieldManager to the KubeApi');
    return this.request('PATCH', resourcePath(refOf(object)), {
      // JSON is YAML: the apply content type accepts it as is.
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: this.#fieldManager, force: true },
      body: JSON.stringify(object),
    }) as Promise<T>;
  }

  mergePatch<T extends KubeObject>(path: KubePath, patch: unknown): Promise<T> {
    return this.request('PATCH', path, {
      contentType: 'application/merge-patch+json',
      query: { fieldManager: this.#fieldManager },
      body: JSON.stringify(patch),
    }) as Promise<T>;
  }

  delete(path: KubePath, preconditions?: { uid?: string; resourceVersion?: string }): Promise<unknown> {
    const body = preconditions === undefined ? undefined : JSON.stringify({ kind: 'DeleteOptions', apiVersion: 'v1', preconditions });
    return this.request('DELETE', path, { body, query: { propagationPolicy: 'Background' } });
  }

  /**
   * The parsed JSON answer of a 2xx response (undefined when empty); KubeApiError otherwise. The GET of a named
   * object must answer that object — its metadata's name and namespace the path's — or the call fails: whatever
   * the path, a caller never acts on another namespace's object thinking it its own.
   */
  async request(method: string, path: KubePath, request: KubeRequest = {}): Promise<unknown> {
    const what = `${method} ${path.toString()}`;
    const target = withQuery(path.toString(), request.query);
    let answer;
    try {
      const headers = await this.credentials.authHeaders();
      headers.accept = 'application/json';
      if (request.body !== undefined) headers['content-type'] = request.contentType ?? 'application/json';
      const transport = await this.#pooledTransport();
      answer = await transport.send(method, this.credentials.server + target, headers, request.body, request.timeoutMs ?? this.#timeoutMs, request.signal);
    } catch (error) {
      throw new KubeApiError(what, 0, describeTransportError(error), { cause: error });
    }
    const { status: httpStatus, text } = answer;
    if (httpStatus < 200 || httpStatus > 299) {
      const status = parseStatus(text);
      throw new KubeApiError(what, httpStatus, status.message ?? text.slice(0, 500), {
        reason: status.reason,
        retryAfterMs: parseRetryAfter(answer.retryAfter),
      });
    }
    if (text === '') return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new KubeApiError(what, httpStatus, `answer is not JSON: ${text.slice(0, 200)}`, { cause: error });
    }
    if (method === 'GET') checkIdentity(what, path, parsed as KubeObject | undefined);
    return parsed;
  }

  /** The credentials as a client-node KubeConfig, made once: for client-node's Watch. */
  kubeConfig(): Promise<KubeConfig> {
    this.#kubeConfig ??= this.credentials.kubeConfig();
    return this.#kubeConfig;
  }

  /** Closes pooled connections. */
  async close(): Promise<void> {
    const transport = await this.#transport?.catch(() => undefined);
    await transport?.close();
  }

  #pooledTransport(): Promise<Transport> {
    this.#transport ??= createTransport(this.credentials);
    return this.#transport;
  }
}

/** The GET of a named object answered with another (a path that walked elsewhere, a proxy's mistake): refused. */
function checkIdentity(what: string, path: KubePath, answer: KubeObject | undefined): void {
  const asked = path.parts;
  if (asked?.name === undefined) return;
  const { name, namespace } = answer?.metadata ?? {};
  if (name !== asked.name || (asked.namespace !== undefined && namespace !== asked.namespace)) {
    const got = name === undefined ? 'an object without a name' : `${namespace === undefined ? '' : `${namespace}/`}${name}`;
    throw new KubeApiError(what, 200, `the answer is ${got}, not the object asked for (${asked.namespace === undefined ? '' : `${asked.namespace}/`}${asked.name}); refused`, {
      reason: 'WrongObject',
    });
  }
}

function withQuery(path: string, query: Query | undefined): string {
  if (query === undefined) return path;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) params.set(key, String(value));
  }
  const search = params.toString();
  return search === '' ? path : `${path}?${search}`;
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
