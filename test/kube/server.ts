// The fake API server's transport and test controls: a node:https server on 127.0.0.1 with a self-signed
// certificate (certificate.ts) that accepts any bearer token (or none), logs every request, and lets a test
// inject failures, cut watches, compact history and make the server unreachable for a while. Clients reach
// it as in a pod (a service-account folder with ca.crt and token, KUBERNETES_SERVICE_HOST and _PORT) or
// through a kubeconfig.

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import { Agent, fetch as undiciFetch, type RequestInit, type Response } from 'undici';
import type { KubeCredentials } from '../../kube/credentials.ts';
import { inClusterCredentials } from '../../kube/in-cluster.ts';
import { serverCertificate } from './certificate.ts';
import { DEFAULT_VERSION, handleApiRequest, versionInfo, type ApiContext } from './api.ts';
import { AuthReviews, type AccessRule, type TokenIdentity } from './auth-reviews.ts';
import { FaultInjector, type FailureRule, type HangRule } from './faults.ts';
import { kubeConfigFor, writeKubeconfigFile, type ClientOptions } from './kubeconfig.ts';
import { EndpointsController } from './endpoints-controller.ts';
import { ObjectLifecycle } from './lifecycle.ts';
import { RbacAuthorizer } from './rbac-authorizer.ts';
import { ResourceRegistry } from './resources.ts';
import { KubeError } from './status.ts';
import { ObjectStore } from './store.ts';
import { WatchHub, type WatchCounters } from './watch.ts';

export interface KubeApiServerOptions {
  /** Change events kept for watches to resume from; older versions answer 410. Default 1000. */
  historySize?: number;
  /** Interval of BOOKMARK events on watches that allow them. Default 1000 ms. */
  bookmarkIntervalMs?: number;
  /** End every watch after this long, as real servers do (client-node then re-watches). Default: never. */
  maxWatchSeconds?: number;
  /** Refuse objects in namespaces that do not exist (404), as the real server does. Default true. */
  requireNamespaces?: boolean;
  /** Namespaces that exist at start. Default: default, kube-system, kube-public, kube-node-lease. */
  namespaces?: string[];
  /** The Kubernetes version `/version` reports, as a gitVersion (e.g. `v1.28.4`). Default a recent release. */
  version?: string;
  /**
   * Authorize the requests made with a token of `server.tokens` by the RBAC objects stored here, as a real API
   * server's RBAC authorizer (rbac-authorizer.ts): a request no bound role allows gets its 403. Requests with any
   * other token (the test's own) are served unchecked. Default false: every request is served.
   */
  rbac?: boolean;
}

/** One request, logged when it arrives (requests held by pause('hang') included). */
export interface RequestRecord {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType: string | undefined;
  watch: boolean;
  /** Response status once answered (200 for watches once the stream started); undefined until then. */
  status: number | undefined;
  /** Answered by a failNext rule rather than served. */
  injected: boolean;
  /** The bearer token the client sent: which client made it, when several share the server (any is accepted). */
  token: string | undefined;
}

export interface RequestFilter {
  method?: string;
  /** RegExp or substring matched against the path. */
  pathPattern?: RegExp | string;
  watch?: boolean;
  /** Only requests sent with this bearer token. */
  token?: string;
}

/** `refuse`: connections are reset (ECONNRESET). `hang`: requests wait unanswered until resume(). */
export type PauseMode = 'refuse' | 'hang';

export interface ServerCounters {
  requests: number;
  injectedFailures: number;
  heldRequests: number;
  openWatches: number;
  watches: Readonly<WatchCounters>;
}

const MAX_BODY_BYTES = 3 * 1024 * 1024;
const DEFAULT_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

function isWatchRequest(url: URL): boolean {
  const watch = url.searchParams.get('watch');
  return watch === 'true' || watch === '1' || /\/watch\//.test(url.pathname);
}

function matchesFilter(record: RequestRecord, filter: RequestFilter): boolean {
  if (filter.method !== undefined && record.method !== filter.method.toUpperCase()) return false;
  if (filter.watch !== undefined && record.watch !== filter.watch) return false;
  if (filter.token !== undefined && record.token !== filter.token) return false;
  const pattern = filter.pathPattern;
  if (pattern === undefined) return true;
  return typeof pattern === 'string' ? record.path.includes(pattern) : pattern.test(record.path);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new KubeError(413, 'RequestEntityTooLarge', `request body larger than ${MAX_BODY_BYTES} bytes`));
        req.destroy();
      } else {
        chunks.push(chunk);
      }
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export class KubeApiServer {
  readonly tokens: Map<string, TokenIdentity>;
  readonly requests: RequestRecord[] = [];
  private readonly http: Server;
  private readonly store: ObjectStore;
  private readonly watches: WatchHub;
  private readonly reviews = new AuthReviews();
  private readonly faults = new FaultInjector();
  private readonly context: ApiContext;
  private readonly sockets = new Set<Duplex>();
  private readonly held: (() => void)[] = [];
  private readonly requestWaiters = new Set<(record: RequestRecord) => void>();
  private pauseMode: PauseMode | undefined;
  private injectedFailures = 0;
  private address: AddressInfo | undefined;
  private fetchAgent: Agent | undefined;
  private serviceAccounts: string | undefined;
  private serviceAccountCount = 0;
  private readonly authorizer: RbacAuthorizer | undefined;
  private readonly endpointsController: EndpointsController;

  constructor(options: KubeApiServerOptions = {}) {
    const registry = new ResourceRegistry();
    this.store = new ObjectStore(options.historySize ?? 1000);
    this.watches = new WatchHub(this.store, options.bookmarkIntervalMs ?? 1000);
    const requireNamespaces = options.requireNamespaces ?? true;
    const lifecycle = new ObjectLifecycle(this.store, registry, { requireNamespaces });
    this.tokens = this.reviews.tokens;
    this.authorizer = options.rbac === true ? new RbacAuthorizer(this.store) : undefined;
    this.reviews.serviceAccountUid = (namespace, name) => this.store.get('serviceaccounts', namespace, name)?.metadata.uid;
    this.reviews.podUid = (namespace, name) => this.store.get('pods', namespace, name)?.metadata.uid;
    this.context = {
      registry,
      store: this.store,
      lifecycle,
      watches: this.watches,
      reviews: this.reviews,
      serverAddress: '127.0.0.1',
      maxWatchSeconds: options.maxWatchSeconds,
      version: versionInfo(options.version ?? DEFAULT_VERSION),
    };
    this.endpointsController = new EndpointsController(this.store, lifecycle, registry);
    const namespaceType = registry.find('', 'v1', 'namespaces')!;
    for (const name of options.namespaces ?? DEFAULT_NAMESPACES) {
      lifecycle.create(namespaceType, undefined, { metadata: { name } });
    }
    this.http = createServer(serverCertificate(), (req, res) => this.onRequest(req, res));
    this.http.on('connection', (socket) => this.onConnection(socket));
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.http.once('error', reject);
      this.http.listen(0, '127.0.0.1', () => resolve());
    });
    this.address = this.http.address() as AddressInfo;
    this.context.serverAddress = `127.0.0.1:${this.address.port}`;
  }

  get url(): string {
    if (this.address === undefined) throw new Error('the fake API server is not listening yet');
    return `https://127.0.0.1:${this.address.port}`;
  }

  /** The CA that verifies the server's certificate (PEM). */
  get ca(): string {
    return serverCertificate().cert;
  }

  /** What a pod finds in its environment to reach the API server. */
  get inClusterEnv(): { KUBERNETES_SERVICE_HOST: string; KUBERNETES_SERVICE_PORT: string } {
    const { port } = new URL(this.url);
    return { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port };
  }

  /** Writes what kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount: `ca.crt` and `token`. */
  async writeServiceAccount(dir: string, options: ClientOptions = {}): Promise<void> {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'ca.crt'), this.ca);
    await writeFile(join(dir, 'token'), `${options.token ?? 'fake-token'}\n`, { mode: 0o600 });
  }

  /**
   * kube/'s in-cluster credentials, as a pod's: a service account (written to a folder of the server's,
   * removed on close) with the CA and the token, and the server's address in KUBERNETES_SERVICE_HOST/_PORT.
   */
  async credentials(options: ClientOptions = {}): Promise<KubeCredentials> {
    this.serviceAccounts ??= await mkdtemp(join(tmpdir(), 'runlet-fake-kube-sa-'));
    const dir = join(this.serviceAccounts, String(this.serviceAccountCount++));
    await this.writeServiceAccount(dir, options);
    return inClusterCredentials({ env: this.inClusterEnv, serviceAccountDir: dir });
  }

  /** fetch against the server (`path` with its query), trusting its certificate. */
  fetch(path: string, init: RequestInit = {}): Promise<Response> {
    this.fetchAgent ??= new Agent({ connect: { ca: this.ca } });
    return undiciFetch(`${this.url}${path}`, { ...init, dispatcher: this.fetchAgent });
  }

  /** The store's current resourceVersion (the last write's). */
  get resourceVersion(): string {
    return String(this.store.currentRevision);
  }

  get counters(): ServerCounters {
    return {
      requests: this.requests.length,
      injectedFailures: this.injectedFailures,
      heldRequests: this.held.length,
      openWatches: this.watches.openCount,
      watches: { ...this.watches.counters },
    };
  }

  kubeConfig(options?: ClientOptions): KubeConfig {
    return kubeConfigFor(this.url, options, this.ca);
  }

  /** Writes a kubeconfig file for child processes (point KUBECONFIG at it). */
  async writeKubeconfig(path: string, options?: ClientOptions): Promise<void> {
    await writeKubeconfigFile(path, this.url, options, this.ca);
  }

  /** Grants access that SubjectAccessReviews will report as allowed. */
  allow(rule: AccessRule): void {
    this.reviews.allow(rule);
  }

  failNext(rule: FailureRule): void {
    this.faults.failNext(rule);
  }

  /** The next matching requests (`times`, default 1; Infinity for all) are never answered: the client must time out. */
  hangNext(rule: HangRule): void {
    this.faults.hangNext(rule);
  }

  /** Ends every open watch cleanly (clients re-watch from their last resourceVersion). Returns how many. */
  cutWatches(): number {
    return this.watches.cutAll();
  }

  /** Drops all watch history, as an etcd compaction: any watch from an older resourceVersion gets 410. */
  compact(): void {
    this.store.compact();
  }

  /**
   * Makes the server unreachable until resume(). `refuse` resets every connection, open watches included;
   * `hang` ends open watches and leaves every new request unanswered until resume() serves it.
   */
  pause(mode: PauseMode = 'refuse'): void {
    this.pauseMode = mode;
    if (mode === 'refuse') {
      for (const socket of this.sockets) socket.destroy();
    } else {
      this.watches.cutAll();
    }
  }

  resume(): void {
    this.pauseMode = undefined;
    for (const serve of this.held.splice(0)) serve();
  }

  countRequests(filter: RequestFilter = {}): number {
    return this.requests.filter((record) => matchesFilter(record, filter)).length;
  }

  /** The first logged request (already arrived, or the next to arrive) matching `filter`. */
  waitForRequest(filter: RequestFilter = {}, timeoutMs = 15_000): Promise<RequestRecord> {
    const logged = this.requests.find((record) => matchesFilter(record, filter));
    if (logged !== undefined) return Promise.resolve(logged);
    return new Promise((resolve, reject) => {
      const waiter = (record: RequestRecord): void => {
        if (!matchesFilter(record, filter)) return;
        this.requestWaiters.delete(waiter);
        clearTimeout(timer);
        resolve(record);
      };
      const timer = setTimeout(() => {
        this.requestWaiters.delete(waiter);
        reject(new Error(`no request matching ${filter.method ?? 'any method'} ${String(filter.pathPattern ?? 'any path')} arrived within ${timeoutMs} ms`));
      }, timeoutMs);
      this.requestWaiters.add(waiter);
    });
  }

  clearRequests(): void {
    this.requests.length = 0;
  }

  async close(): Promise<void> {
    this.pauseMode = 'refuse';
    this.endpointsController.stop();
    this.held.length = 0;
    this.faults.clear();
    this.watches.cutAll();
    const closed = new Promise<void>((resolve) => this.http.close(() => resolve()));
    this.http.closeAllConnections();
    for (const socket of this.sockets) socket.destroy();
    await closed;
    await this.fetchAgent?.close();
    if (this.serviceAccounts !== undefined) await rm(this.serviceAccounts, { recursive: true, force: true });
  }

  private onConnection(socket: Duplex): void {
    if (this.pauseMode === 'refuse') {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    if (this.pauseMode === 'refuse') {
      req.socket.destroy();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://fake-kube-api');
    const method = req.method ?? 'GET';
    const record: RequestRecord = {
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      contentType: req.headers['content-type'],
      watch: method === 'GET' && isWatchRequest(url),
      status: undefined,
      injected: false,
      token: /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1],
    };
    this.requests.push(record);
    for (const waiter of this.requestWaiters) waiter(record);
    if (this.pauseMode === 'hang') this.held.push(() => void this.serve(req, res, url, record));
    else void this.serve(req, res, url, record);
  }

  private async serve(req: IncomingMessage, res: ServerResponse, url: URL, record: RequestRecord): Promise<void> {
    const { method, contentType } = record;
    if (this.faults.takeHang(method, url.pathname + url.search)) {
      record.injected = true;
      req.resume(); // the body is read and dropped; the response never comes
      return;
    }
    const refused = this.reviews.refusesAsCredential(record.token);
    if (refused !== undefined) {
      req.resume();
      this.respond(res, record, 401, new KubeError(401, 'Unauthorized', `Unauthorized: ${refused}`).toStatus());
      return;
    }
    const injected = this.faults.take(method, url.pathname + url.search);
    if (injected !== undefined) {
      record.injected = true;
      this.injectedFailures += 1;
      req.resume(); // discard the body
      this.respond(res, record, injected.code, injected.toStatus(), injected.details?.retryAfterSeconds);
      return;
    }
    try {
      const body = await readBody(req);
      const user = record.token === undefined ? undefined : this.tokens.get(record.token);
      if (user !== undefined) this.authorizer?.authorize(user, { method, path: url.pathname, watch: record.watch, contentType: contentType ?? '', body });
      const request = { method, url, contentType: contentType ?? '', accept: req.headers.accept ?? '', userAgent: req.headers['user-agent'], body };
      const reply = handleApiRequest(this.context, request, res);
      if ('streamed' in reply) {
        record.status = 200;
      } else if ('bytes' in reply) {
        record.status = reply.status;
        res.writeHead(reply.status, { 'content-type': reply.contentType });
        res.end(reply.bytes);
      } else {
        this.respond(res, record, reply.status, reply.body);
      }
    } catch (error) {
      const failure =
        error instanceof KubeError
          ? error
          : new KubeError(500, 'InternalError', `fake API server bug: ${(error as Error).stack ?? String(error)}`);
      this.respond(res, record, failure.code, failure.toStatus(), failure.details?.retryAfterSeconds);
    }
  }

  private respond(
    res: ServerResponse,
    record: RequestRecord,
    status: number,
    body: unknown,
    retryAfter?: number,
  ): void {
    record.status = status;
    if (res.headersSent || res.destroyed) return;
    const text = typeof body === 'string';
    const headers: Record<string, string> = { 'content-type': text ? 'text/plain' : 'application/json' };
    if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
    res.writeHead(status, headers);
    res.end(text ? body : JSON.stringify(body));
  }
}

export async function startKubeApiServer(options: KubeApiServerOptions = {}): Promise<KubeApiServer> {
  const server = new KubeApiServer(options);
  await server.listen();
  return server;
}
