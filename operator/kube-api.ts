// A small JSON client for the Kubernetes API: the operator's reads, lists, applies and status patches.
//
// Why not client-node's generated clients: their ObjectSerializer drops every field its models do not know
// and turns timestamps into Date objects, while server-side apply must send exactly the rendered object and
// the reconciler compares plain JSON; and client-node 2.0 builds a new undici Agent (a new connection, a new
// TLS handshake) for every request, which a 500-App resync would feel. Authentication still comes from
// client-node's KubeConfig (token files, exec plugins and client certificates, refreshed per request), and
// watches use client-node's Watch (operator/watch.ts).
import type { RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { Agent, ProxyAgent, request, type Dispatcher } from 'undici';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
}

/** Any object as the API server serves it: only the metadata the operator interprets is typed. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

export interface KubeList<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

/** Where an object lives: enough to build its URL. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

/** URL plurals of the kinds the operator reads or writes (no discovery round trip needed). */
const PLURALS: Record<string, string> = {
  App: 'apps',
  ConfigMap: 'configmaps',
  Deployment: 'deployments',
  Ingress: 'ingresses',
  Lease: 'leases',
  Role: 'roles',
  RoleBinding: 'rolebindings',
  Service: 'services',
  ServiceAccount: 'serviceaccounts',
};

export const FIELD_MANAGER = 'runlet-operator';

/** `/apis/apps/v1/namespaces/ns/deployments/name`, or the collection when name is omitted. */
export function resourcePath(ref: Omit<ObjectRef, 'name'> & { name?: string }, subresource?: 'status'): string {
  const plural = PLURALS[ref.kind];
  if (plural === undefined) throw new Error(`the operator has no URL plural for kind ${ref.kind}`);
  const root = ref.apiVersion.includes('/') ? `/apis/${ref.apiVersion}` : `/api/${ref.apiVersion}`;
  const namespace = ref.namespace === undefined ? '' : `/namespaces/${encodeURIComponent(ref.namespace)}`;
  const name = ref.name === undefined ? '' : `/${encodeURIComponent(ref.name)}`;
  return `${root}${namespace}/${plural}${name}${subresource === undefined ? '' : `/${subresource}`}`;
}

/** The ref of a rendered object (apiVersion, kind and metadata.name must be set). */
export function refOf(object: KubeObject): ObjectRef {
  const { apiVersion, kind } = object;
  const name = object.metadata?.name;
  if (!apiVersion || !kind || !name) throw new Error(`object lacks apiVersion, kind or metadata.name: ${JSON.stringify(object).slice(0, 200)}`);
  return { apiVersion, kind, name, namespace: object.metadata?.namespace };
}

/** A failed API call, with the Status the server answered (or the transport error as `cause`). */
export class KubeApiError extends Error {
  /** HTTP status; 0 when no answer arrived (connection refused, reset, timeout). */
  readonly status: number;
  readonly reason: string | undefined;

  constructor(method: string, path: string, status: number, reason: string | undefined, detail: string, options?: ErrorOptions) {
    super(`${method} ${path}: ${status === 0 ? '' : `${status} ${reason ?? ''} `}${detail}`.replace(/ +/g, ' '), options);
    this.name = 'KubeApiError';
    this.status = status;
    this.reason = reason;
  }
}

export function isNotFound(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 404;
}

export function isConflict(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 409;
}

/** 403 to a write into a namespace being deleted: nothing to retry, since everything in it goes anyway. */
export function isNamespaceTerminating(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 403 && error.message.includes('being terminated');
}

export interface KubeApiOptions {
  /** Bound on every call, so a hung connection cannot stall a reconcile worker forever. Default 30 s. */
  requestTimeoutMs?: number;
  /** Who owns the fields this client applies and patches. Default the operator's (FIELD_MANAGER). */
  fieldManager?: string;
}

interface RequestSpec {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
}

export class KubeApi {
  readonly kubeConfig: KubeConfig;
  readonly #server: string;
  readonly #timeoutMs: number;
  readonly #fieldManager: string;
  #agent: Promise<Dispatcher> | undefined;

  constructor(kubeConfig: KubeConfig, options: KubeApiOptions = {}) {
    const cluster = kubeConfig.getCurrentCluster();
    if (cluster === null) throw new Error('the kubeconfig has no current cluster');
    this.kubeConfig = kubeConfig;
    this.#server = cluster.server.replace(/\/+$/, '');
    this.#timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.#fieldManager = options.fieldManager ?? FIELD_MANAGER;
  }

  get<T extends KubeObject>(path: string): Promise<T> {
    return this.#request<T>('GET', path, {});
  }

  /** GET, or undefined on 404. */
  async find<T extends KubeObject>(path: string): Promise<T | undefined> {
    try {
      return await this.get<T>(path);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  list<T>(path: string, query: RequestSpec['query'] = {}): Promise<KubeList<T>> {
    return this.#request<KubeList<T>>('GET', path, { query });
  }

  create<T extends KubeObject>(path: string, body: T): Promise<T> {
    return this.#request<T>('POST', path, { body });
  }

  /** PUT: fails with 409 when `body.metadata.resourceVersion` is no longer current. */
  replace<T extends KubeObject>(path: string, body: T): Promise<T> {
    return this.#request<T>('PUT', path, { body });
  }

  /** Server-side apply as this client's field manager, taking over fields others changed (force). */
  apply<T extends KubeObject>(object: T): Promise<T> {
    return this.#request<T>('PATCH', resourcePath(refOf(object)), {
      // JSON is YAML: the apply content type accepts it as is.
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: this.#fieldManager, force: true },
      body: object,
    });
  }

  mergePatch<T extends KubeObject>(path: string, patch: unknown): Promise<T> {
    return this.#request<T>('PATCH', path, { contentType: 'application/merge-patch+json', query: { fieldManager: this.#fieldManager }, body: patch });
  }

  delete(path: string, preconditions?: { uid?: string; resourceVersion?: string }): Promise<unknown> {
    const body = preconditions === undefined ? undefined : { kind: 'DeleteOptions', apiVersion: 'v1', preconditions };
    return this.#request('DELETE', path, { body, query: { propagationPolicy: 'Background' } });
  }

  /** Closes pooled connections. */
  async close(): Promise<void> {
    const agent = await this.#agent?.catch(() => undefined);
    await agent?.close();
  }

  async #request<T>(method: Dispatcher.HttpMethod, path: string, spec: RequestSpec): Promise<T> {
    const url = new URL(this.#server + path);
    for (const [key, value] of Object.entries(spec.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    let status: number;
    let text: string;
    try {
      const headers = await this.#headers();
      headers.accept = 'application/json';
      if (spec.body !== undefined) headers['content-type'] = spec.contentType ?? 'application/json';
      const response = await request(url, {
        method,
        headers,
        body: spec.body === undefined ? undefined : JSON.stringify(spec.body),
        dispatcher: await this.#dispatcher(),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      status = response.statusCode;
      text = await response.body.text();
    } catch (error) {
      throw new KubeApiError(method, path, 0, undefined, (error as Error).message, { cause: error });
    }
    if (status < 200 || status > 299) {
      const failure = parseStatus(text);
      throw new KubeApiError(method, path, status, failure?.reason, failure?.message ?? text.slice(0, 500));
    }
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }

  /** Authentication headers, fetched per request: tokens rotate (projected service-account tokens, exec plugins). */
  async #headers(): Promise<Record<string, string>> {
    const options: RequestOptions = {};
    await this.kubeConfig.applyToHTTPSOptions(options);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(options.headers ?? {})) {
      if (value !== undefined) headers[name.toLowerCase()] = String(value);
    }
    if (typeof options.auth === 'string') headers.authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
    return headers;
  }

  /** One pooled agent (or HTTP proxy agent) for the cluster's TLS settings, kept for the client's life. */
  #dispatcher(): Promise<Dispatcher> {
    this.#agent ??= this.#createDispatcher();
    return this.#agent;
  }

  async #createDispatcher(): Promise<Dispatcher> {
    const tls: RequestOptions = {};
    await this.kubeConfig.applyToHTTPSOptions(tls);
    const { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername } = tls;
    const connect = { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername };
    const proxyUrl = this.kubeConfig.getCurrentCluster()?.proxyUrl;
    if (proxyUrl === undefined) return new Agent({ connect: { ...connect, keepAlive: true, keepAliveInitialDelay: 30_000 } });
    if (!proxyUrl.startsWith('http')) throw new Error(`the operator supports HTTP(S) proxies only, not ${proxyUrl}`);
    return new ProxyAgent({ uri: proxyUrl, requestTls: connect });
  }
}

function parseStatus(text: string): { reason?: string; message?: string } | undefined {
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body !== 'object' || body === null) return undefined;
    const { reason, message } = body as Record<string, unknown>;
    return { reason: typeof reason === 'string' ? reason : undefined, message: typeof message === 'string' ? message : undefined };
  } catch {
    return undefined;
  }
}
