// Helpers for the fake API server's own tests: a server per test, waiting on events with a bound (never
// sleeping), watch recording through client-node's Watch, and reading the Status of a failed client-node call.

import { ApiException, Watch, type KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeEach } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from './index.ts';

/**
 * A fresh in-memory API server for every test of the calling file, closed after it: the returned object holds
 * it (`server`) and the clients `connect` makes of it, replaced before each test.
 */
export function serverPerTest<Clients extends object>(connect: (kubeConfig: KubeConfig) => Clients): { readonly server: KubeApiServer } & Clients {
  const fixture = {} as { server: KubeApiServer } & Clients;
  beforeEach(async () => {
    const server = await startKubeApiServer();
    Object.assign(fixture, connect(server.kubeConfig()), { server });
  });
  afterEach(async () => {
    await fixture.server.close();
  });
  return fixture;
}

/** Generous: the tests must pass on a loaded 2-core machine; they only wait this long when failing. */
export const EVENT_TIMEOUT_MS = 15_000;

/** Items arriving over time, and bounded waits for one that matches. */
export class EventLog<T> {
  readonly items: T[] = [];
  private readonly waiters = new Set<{ predicate: (item: T) => boolean; resolve: (item: T) => void }>();

  push(item: T): void {
    this.items.push(item);
    for (const waiter of this.waiters) {
      if (waiter.predicate(item)) {
        this.waiters.delete(waiter);
        waiter.resolve(item);
      }
    }
  }

  /** The first item (already logged or still to come) matching `predicate`. */
  waitFor(predicate: (item: T) => boolean, what: string, timeoutMs = EVENT_TIMEOUT_MS): Promise<T> {
    const logged = this.items.find(predicate);
    if (logged !== undefined) return Promise.resolve(logged);
    return new Promise((resolve, reject) => {
      const waiter = {
        predicate,
        resolve: (item: T) => {
          clearTimeout(timer);
          resolve(item);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; got ${JSON.stringify(this.items)}`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }
}

export interface WatchEvent {
  type: string;
  object: {
    kind?: string;
    code?: number;
    reason?: string;
    metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
    data?: Record<string, string>;
  };
}

export interface RecordedWatch {
  events: EventLog<WatchEvent>;
  /** Resolves with the done callback's error (null for a clean end of stream). */
  ended: Promise<unknown>;
  abort(): void;
}

export async function recordWatch(
  config: KubeConfig,
  path: string,
  query: Record<string, string | number | boolean>,
): Promise<RecordedWatch> {
  const events = new EventLog<WatchEvent>();
  let finish: (error: unknown) => void = () => {};
  const ended = new Promise<unknown>((resolve) => (finish = resolve));
  const controller = await new Watch(config).watch(
    path,
    query,
    (type, object: WatchEvent['object']) => events.push({ type, object }),
    (error) => finish(error),
  );
  return { events, ended, abort: () => controller.abort() };
}

/** Rejects unless `promise` rejects within the bound; resolves with how it settled. */
export async function withinBound<T>(promise: Promise<T>, what: string, timeoutMs = EVENT_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface FailedCall {
  code: number;
  status: { kind?: string; reason?: string; message?: string; code?: number; details?: Record<string, unknown> };
}

/** The HTTP code and Status body of a client-node call that must fail. */
export async function failureOf(call: Promise<unknown>): Promise<FailedCall> {
  try {
    await call;
  } catch (error) {
    if (!(error instanceof ApiException)) throw error;
    const body: unknown = error.body;
    return { code: error.code, status: typeof body === 'string' ? JSON.parse(body) : (body as FailedCall['status']) };
  }
  throw new Error('expected the call to fail, but it succeeded');
}
