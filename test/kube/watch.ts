// Watch streams: newline-delimited JSON events (ADDED/MODIFIED/DELETED/BOOKMARK/ERROR) over a chunked
// 200 response, as the real API server sends them. A watch starts from a resourceVersion (replaying the
// store's history after it), or with synthetic ADDED events for the current objects when none (or "0")
// is given. A version older than the history window gets an ERROR event carrying a 410 Expired Status,
// then the stream ends — client-node's ListWatch then relists.

import type { ServerResponse } from 'node:http';
import { apiVersionOf, resourceKey, type ResourceType } from './resources.ts';
import type { ObjectPredicate } from './selectors.ts';
import { badRequest, failureStatus, type StatusBody } from './status.ts';
import type { ObjectStore, StoreEvent } from './store.ts';
import type { KubeObject } from './types.ts';

export interface WatchRequest {
  type: ResourceType;
  namespace: string | undefined;
  matches: ObjectPredicate;
  resourceVersion: string | undefined;
  allowBookmarks: boolean;
  /** End the stream cleanly after this long (`timeoutSeconds`, or the server's cap). */
  timeoutMs: number | undefined;
  /** The object as this request's API version presents it. */
  render: (object: KubeObject) => KubeObject;
}

export interface WatchCounters {
  started: number;
  /** Watches answered with a 410 ERROR event. */
  expired: number;
  bookmarks: number;
}

type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

interface Delivery {
  type: WatchEventType;
  object: KubeObject | StatusBody;
}

interface ObjectDelivery extends Delivery {
  object: KubeObject;
}

/** The event a watcher with this filter sees: objects moving in or out of the filter appear added/deleted. */
function deliveryFor(request: WatchRequest, event: StoreEvent): ObjectDelivery | undefined {
  if (event.key !== resourceKey(request.type)) return undefined;
  const visible = (object: KubeObject | undefined): boolean =>
    object !== undefined &&
    (request.namespace === undefined || object.metadata.namespace === request.namespace) &&
    request.matches(object);
  const now = visible(event.object);
  const before = visible(event.previous);
  switch (event.type) {
    case 'ADDED':
      return now ? { type: 'ADDED', object: event.object } : undefined;
    case 'DELETED':
      return now ? { type: 'DELETED', object: event.object } : undefined;
    case 'MODIFIED':
      if (now) return { type: before ? 'MODIFIED' : 'ADDED', object: event.object };
      if (!before) return undefined;
      // Left the filter: the watcher sees it deleted, in its last visible state at this revision.
      return {
        type: 'DELETED',
        object: {
          ...event.previous!,
          metadata: { ...event.previous!.metadata, resourceVersion: String(event.revision) },
        },
      };
  }
}

export function parseWatchVersion(resourceVersion: string | undefined): number | undefined {
  if (resourceVersion === undefined || resourceVersion === '' || resourceVersion === '0') return undefined;
  if (!/^\d+$/.test(resourceVersion)) throw badRequest(`invalid resource version "${resourceVersion}"`);
  return Number(resourceVersion);
}

export class WatchHub {
  private readonly store: ObjectStore;
  private readonly bookmarkIntervalMs: number;
  private readonly open = new Set<ServerResponse>();
  readonly counters: WatchCounters = { started: 0, expired: 0, bookmarks: 0 };

  constructor(store: ObjectStore, bookmarkIntervalMs: number) {
    this.store = store;
    this.bookmarkIntervalMs = bookmarkIntervalMs;
  }

  get openCount(): number {
    return this.open.size;
  }

  serve(res: ServerResponse, request: WatchRequest): void {
    const since = parseWatchVersion(request.resourceVersion);
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache' });
    res.flushHeaders();
    this.counters.started += 1;
    const send = (delivery: Delivery): void => {
      if (!res.writableEnded) res.write(`${JSON.stringify(delivery)}\n`);
    };
    const deliver = (event: StoreEvent): void => {
      const delivery = deliveryFor(request, event);
      if (delivery !== undefined) send({ type: delivery.type, object: request.render(delivery.object) });
    };

    if (since === undefined) {
      for (const object of this.store.list(resourceKey(request.type), request.namespace)) {
        if (request.matches(object)) send({ type: 'ADDED', object: request.render(object) });
      }
    } else {
      const backlog = this.store.eventsAfter(since);
      if (backlog === undefined) {
        this.counters.expired += 1;
        const oldest = this.store.oldestWatchableRevision;
        const message = `too old resource version: ${since} (${oldest})`;
        send({ type: 'ERROR', object: failureStatus(410, 'Expired', message) });
        res.end();
        return;
      }
      backlog.forEach(deliver);
    }

    const unsubscribe = this.store.subscribe(deliver);
    const timers: NodeJS.Timeout[] = [];
    if (request.allowBookmarks) {
      timers.push(setInterval(() => this.sendBookmark(request, send), this.bookmarkIntervalMs));
    }
    if (request.timeoutMs !== undefined) timers.push(setTimeout(() => res.end(), request.timeoutMs));
    this.open.add(res);
    res.once('close', () => {
      unsubscribe();
      timers.forEach((timer) => clearTimeout(timer));
      this.open.delete(res);
    });
  }

  /** Ends every open watch cleanly, as an API server restart or load-balancer timeout would. */
  cutAll(): number {
    const cut = this.open.size;
    for (const res of this.open) res.end();
    return cut;
  }

  private sendBookmark(request: WatchRequest, send: (delivery: Delivery) => void): void {
    this.counters.bookmarks += 1;
    const metadata = { resourceVersion: String(this.store.currentRevision) };
    send({ type: 'BOOKMARK', object: { apiVersion: apiVersionOf(request.type), kind: request.type.kind, metadata } });
  }
}
