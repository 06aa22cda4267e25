// A resilient list+watch of one resource, keeping a cache of its objects and telling handlers what changed.
//
// It lists (in pages), then watches from the list's resourceVersion with bookmarks, and keeps watching:
// - a watch the server ends (its timeout, a restart, a load balancer) resumes at once from the last version;
// - 410 Gone (the version left the server's history) relists, and handlers see the difference as events;
// - errors resume after an exponential backoff, only when watches keep failing quickly;
// - the watchdog: a watch that delivers no event and no bookmark for `watchdogMs` is abandoned and
//   restarted. Node watches are known to die silently — the connection stays open, nothing arrives, no error
//   ever comes (kubernetes-client/javascript#596, #958) — and an operator that stops hearing about its
//   objects looks healthy while doing nothing.
// client-node's own ListWatch gives up on the first error that is not a 410 or a timeout; hence this loop
// around client-node's Watch.
import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeApi } from './client.ts';
import type { KubeObject } from './objects.ts';
import type { KubePath } from './paths.ts';

export type RestartReason =
  /** The server ended the watch cleanly. */
  | 'closed'
  /** 410 Gone: relisted. */
  | 'expired'
  /** No event and no bookmark within the watchdog period. */
  | 'silent'
  /** client-node's inactivity timeout ended the stream. */
  | 'idle'
  | 'error'
  | 'list-error';

export interface ResourceWatchHandlers<T> {
  /** Added or changed; `previous` is the cached version it replaces, if any. */
  onUpsert?(object: T, previous: T | undefined): void;
  onDelete?(object: T): void;
}

export interface ResourceWatchOptions<T> {
  /** For logs and metrics: `apps`, `deployments`. */
  name: string;
  api: KubeApi;
  /** The collection, all namespaces: `KubePath.of({ group: 'apps', version: 'v1', resource: 'deployments' })`. */
  path: KubePath;
  labelSelector?: string;
  /** E.g. `metadata.name=runlet-holder`: one object of a namespace's collection. */
  fieldSelector?: string;
  watchdogMs: number;
  handlers: ResourceWatchHandlers<T>;
  logger: Logger;
  onRestart?(reason: RestartReason): void;
  /**
   * What the cache keeps of each object (client-go's transform): only what the caller reads, since every
   * cached object lives for good. Default: all but managedFields.
   */
  transform?(object: T): T;
  pageSize?: number;
  backoff?: { initialMs: number; maxMs: number };
}

/** A watch that ended this fast without delivering anything did not really work: back off before the next. */
const MIN_HEALTHY_WATCH_MS = 1_000;
const DEFAULT_BACKOFF = { initialMs: 250, maxMs: 30_000 };

interface WatchOutcome {
  reason: Exclude<RestartReason, 'list-error'>;
  events: number;
  error?: unknown;
}

export function objectKey(namespace: string | undefined, name: string | undefined): string {
  return `${namespace ?? ''}/${name ?? ''}`;
}

export class ResourceWatch<T extends KubeObject> {
  readonly #options: ResourceWatchOptions<T>;
  readonly #cache = new Map<string, T>();
  readonly #synced: Promise<void>;
  #markSynced: () => void = () => {};
  #isSynced = false;
  #resourceVersion: string | undefined;
  #stopped = true;
  #loop: Promise<void> | undefined;
  /** Ends the current watch or backoff pause early (stop()). */
  #interrupt: (() => void) | undefined;
  /** The list in flight, aborted by stop(). */
  #listing: AbortController | undefined;

  constructor(options: ResourceWatchOptions<T>) {
    this.#options = options;
    this.#synced = new Promise((resolve) => (this.#markSynced = resolve));
  }

  get synced(): boolean {
    return this.#isSynced;
  }

  /** Resolves once the first list has filled the cache. */
  whenSynced(): Promise<void> {
    return this.#synced;
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#cache.get(objectKey(namespace, name));
  }

  list(): T[] {
    return [...this.#cache.values()];
  }

  get size(): number {
    return this.#cache.size;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#interrupt?.();
    this.#listing?.abort();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const { logger, name } = this.#options;
    let failures = 0;
    while (!this.#stopped) {
      if (this.#resourceVersion === undefined) {
        try {
          await this.#relist();
        } catch (error) {
          if (this.#stopped) break;
          failures += 1;
          this.#options.onRestart?.('list-error');
          const delayMs = this.#backoffMs(failures);
          logger.warn({ resource: name, err: error, retryInMs: delayMs }, 'list failed; retrying');
          await this.#pause(delayMs);
          continue;
        }
      }
      const startedAt = performance.now();
      const outcome = await this.#watchOnce();
      if (this.#stopped) break;
      this.#options.onRestart?.(outcome.reason);
      if (outcome.reason === 'expired') this.#resourceVersion = undefined;
      const healthy = outcome.events > 0 || (outcome.reason !== 'error' && performance.now() - startedAt >= MIN_HEALTHY_WATCH_MS);
      failures = healthy ? 0 : failures + 1;
      const delayMs = failures === 0 ? 0 : this.#backoffMs(failures);
      const level = outcome.reason === 'silent' || outcome.reason === 'error' ? 'warn' : 'debug';
      logger[level]({ resource: name, reason: outcome.reason, events: outcome.events, err: outcome.error, retryInMs: delayMs }, 'watch ended; resuming');
      if (delayMs > 0) await this.#pause(delayMs);
    }
  }

  /** Lists every page, then makes the cache equal to the list, telling the handlers what differs. */
  async #relist(): Promise<void> {
    const { api, path, labelSelector, fieldSelector, pageSize = 100 } = this.#options;
    const items: T[] = [];
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    // A list the server is slow to answer must not hold stop() for the client's whole timeout.
    const listing = (this.#listing = new AbortController());
    do {
      const page = await api.list<T>(path, { labelSelector, fieldSelector, limit: pageSize, continue: continueToken }, { signal: listing.signal });
      items.push(...page.items);
      continueToken = page.metadata?.continue || undefined;
      resourceVersion = page.metadata?.resourceVersion;
    } while (continueToken !== undefined && !this.#stopped);
    if (this.#stopped) return;

    const fresh = new Map(items.map((item) => [objectKey(item.metadata?.namespace, item.metadata?.name), this.#transform(item)]));
    for (const [key, cached] of this.#cache) {
      if (!fresh.has(key)) {
        this.#cache.delete(key);
        this.#notify(() => this.#options.handlers.onDelete?.(cached));
      }
    }
    for (const [key, item] of fresh) this.#upsert(key, item);
    this.#resourceVersion = resourceVersion;
    if (!this.#isSynced) {
      this.#isSynced = true;
      this.#markSynced();
    }
  }

  #watchOnce(): Promise<WatchOutcome> {
    const { api, path, labelSelector, fieldSelector, watchdogMs } = this.#options;
    return new Promise((resolve) => {
      let events = 0;
      let controller: AbortController | undefined;
      let settled = false;
      const finish = (reason: WatchOutcome['reason'], error?: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(watchdog);
        this.#interrupt = undefined;
        controller?.abort();
        resolve({ reason, events, error });
      };
      const watchdog = setTimeout(() => finish('silent'), watchdogMs);
      this.#interrupt = () => finish('closed');

      const onEvent = (type: string, object: T & { code?: number; message?: string }): void => {
        if (settled) return;
        watchdog.refresh();
        if (type === 'ERROR') {
          finish(object.code === 410 ? 'expired' : 'error', new Error(`watch ERROR event: ${object.code ?? '?'} ${object.message ?? ''}`));
          return;
        }
        events += 1;
        const version = object.metadata?.resourceVersion;
        if (type === 'ADDED' || type === 'MODIFIED') {
          this.#upsert(objectKey(object.metadata?.namespace, object.metadata?.name), this.#transform(object));
        } else if (type === 'DELETED') {
          const key = objectKey(object.metadata?.namespace, object.metadata?.name);
          if (this.#cache.delete(key)) this.#notify(() => this.#options.handlers.onDelete?.(this.#transform(object)));
        }
        if (version) this.#resourceVersion = version;
      };
      const onDone = (error: unknown): void => {
        if (error === null || error === undefined) finish('closed');
        else if (isGone(error)) finish('expired', error);
        else if (error instanceof Error && error.name === 'TimeoutError') finish('idle', error);
        else finish('error', error);
      };

      api
        .kubeConfig()
        .then((kubeConfig) => new Watch(kubeConfig).watch(
          path.toString(),
          {
            resourceVersion: this.#resourceVersion,
            allowWatchBookmarks: true,
            labelSelector,
            fieldSelector,
            // Like client-go: the server ends each watch after 5–10 minutes, so none lives forever.
            timeoutSeconds: 300 + Math.floor(Math.random() * 300),
          },
          onEvent,
          onDone,
        ))
        .then(
          (started) => {
            controller = started;
            if (settled) started.abort();
          },
          (error: unknown) => finish('error', error),
        );
    });
  }

  #upsert(key: string, object: T): void {
    const previous = this.#cache.get(key);
    if (previous !== undefined && previous.metadata?.resourceVersion === object.metadata?.resourceVersion) return;
    this.#cache.set(key, object);
    this.#notify(() => this.#options.handlers.onUpsert?.(object, previous));
  }

  /** A handler's bug must not end the watch. */
  #notify(call: () => void): void {
    try {
      call();
    } catch (error) {
      this.#options.logger.error({ resource: this.#options.name, err: error }, 'watch handler failed');
    }
  }

  #transform(object: T): T {
    return this.#options.transform === undefined ? withoutManagedFields(object) : this.#options.transform(object);
  }

  #backoffMs(failures: number): number {
    const { initialMs, maxMs } = this.#options.backoff ?? DEFAULT_BACKOFF;
    return Math.min(maxMs, initialMs * 2 ** (failures - 1));
  }

  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#interrupt = done;
    });
  }
}

function isGone(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { statusCode, code } = error as { statusCode?: unknown; code?: unknown };
  return statusCode === 410 || code === 410;
}

/** managedFields are the bulk of most objects and nothing a controller reads. */
function withoutManagedFields<T extends KubeObject>(object: T): T {
  if (object.metadata?.managedFields !== undefined) delete object.metadata.managedFields;
  return object;
}

/** Identity and ownership only: for caches that serve as indexes of which objects exist. */
export function metadataOnly<T extends KubeObject>(object: T): KubeObject {
  const { name, namespace, uid, resourceVersion, generation, labels, ownerReferences } = object.metadata ?? {};
  return { apiVersion: object.apiVersion, kind: object.kind, metadata: { name, namespace, uid, resourceVersion, generation, labels, ownerReferences } };
}
