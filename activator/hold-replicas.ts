// The holder's view of an App's replicas: which are ready, and at what address — read from the core/v1 Endpoints
// of the App's replicas Service (operator/render/service.ts renderReplicasService: headless, the App's selector),
// which Kubernetes' endpoints controller keeps. Never a pod: the activator holds no right to read pods, whose
// specs carry every App's environment (docs/security.md). Endpoints are watched namespace by namespace, in the
// App namespaces its calls are for (its tenant Role grants `list, watch endpoints` there only), each watch begun
// by the first call held for one of the namespace's Apps. It waits — on the watches' events, with a bound — for
// an App's first ready replica; hold-slots.ts is told of each App a change shows ready replicas of, to hand them
// the calls they can admit.
import type { V1EndpointAddress, V1Endpoints } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import { ResourceWatch, objectKey } from '../kube/watch.ts';
import { isReplicasServiceName, replicasServiceName } from '../operator/render/names.ts';

/** A ready replica of an App: its pod's name (the endpoint's target) and IP. */
export interface HeldReplica {
  name: string;
  ip: string;
}

export type ReplicasEndpoints = V1Endpoints & KubeObject;

interface Waiter {
  resolve(replica: HeldReplica | null): void;
  timer: NodeJS.Timeout;
}

export class ReadyReplicas {
  readonly #api: KubeApi;
  readonly #logger: Logger;
  readonly #watchdogMs: number;
  /** One Endpoints watch per App namespace a call was held for. */
  readonly #watches = new Map<string, ResourceWatch<ReplicasEndpoints>>();
  /** The App each replicas Service lists, by `namespace/<Service name>`: the names asked about so far. */
  readonly #appOf = new Map<string, string>();
  /** Waiters by `namespace/app`. */
  readonly #waiters = new Map<string, Set<Waiter>>();
  /** Told the `namespace/app` key of each App that an event shows a ready replica of. */
  readonly #readyListeners = new Set<(key: string) => void>();
  #stopped = false;
  /** Aborted by stop(): ends every wait for a namespace's sync then, not at its call's cold-start limit. */
  readonly #stopping = new AbortController();

  constructor(options: { api: KubeApi; logger: Logger; watchdogMs: number }) {
    this.#api = options.api;
    this.#logger = options.logger;
    this.#watchdogMs = options.watchdogMs;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopping.abort();
    for (const waiters of this.#waiters.values()) for (const waiter of waiters) this.#settle(waiter, null);
    this.#waiters.clear();
    await Promise.all([...this.#watches.values()].map((watch) => watch.stop()));
  }

  /** Calls `listener` with the `namespace/app` key (kube/watch.ts objectKey) of each App an event shows a ready replica of. */
  onReady(listener: (key: string) => void): void {
    this.#readyListeners.add(listener);
  }

  /**
   * Whether the namespace's Endpoints are in the cache (its watch begun if need be) within `timeoutMs`; false
   * past it, once stopped, or once `signal` aborts. A namespace the activator may not read (not enrolled) is
   * never synced: its watch retries with backoff, and its calls wait out their bound.
   */
  async whenSynced(namespace: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#stopped) return false;
    const watch = this.#watch(namespace);
    if (watch.synced) return true;
    let timer: NodeJS.Timeout | undefined;
    let aborted = (): void => {};
    const ended = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
      aborted = () => resolve(false);
      signal?.addEventListener('abort', aborted, { once: true });
      this.#stopping.signal.addEventListener('abort', aborted, { once: true });
    });
    try {
      return await Promise.race([watch.whenSynced().then(() => !this.#stopped), ended]);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', aborted);
      this.#stopping.signal.removeEventListener('abort', aborted);
    }
  }

  /** The App's ready replicas in the cache now (none while its namespace's watch is not synced). */
  readyReplicas(namespace: string, app: string): HeldReplica[] {
    const name = replicasServiceName(app);
    this.#appOf.set(objectKey(namespace, name), app);
    return readyOf(this.#watch(namespace).get(namespace, name));
  }

  /**
   * The App's first ready replica, or null when none is ready within `timeoutMs` or once stopped. A wait that
   * begins after stop() (a hand-over that was waking the app meanwhile) ends at once: the holder's close()
   * waits for its hand-overs, which must not each hold it for a whole cold-start limit.
   */
  async waitForReadyReplica(namespace: string, app: string, timeoutMs: number): Promise<HeldReplica | null> {
    const deadline = performance.now() + timeoutMs;
    if (!(await this.whenSynced(namespace, timeoutMs)) || this.#stopped) return null;
    const ready = this.readyReplicas(namespace, app)[0];
    if (ready !== undefined) return ready;
    const key = objectKey(namespace, app);
    return new Promise((resolve) => {
      const waiter: Waiter = { resolve, timer: setTimeout(() => this.#settle(waiter, null, key), Math.max(0, deadline - performance.now())) };
      let waiters = this.#waiters.get(key);
      if (waiters === undefined) this.#waiters.set(key, (waiters = new Set()));
      waiters.add(waiter);
    });
  }

  #watch(namespace: string): ResourceWatch<ReplicasEndpoints> {
    let watch = this.#watches.get(namespace);
    if (watch !== undefined) return watch;
    watch = new ResourceWatch<ReplicasEndpoints>({
      name: `holder-endpoints/${namespace}`,
      api: this.#api,
      logger: this.#logger,
      watchdogMs: this.#watchdogMs,
      path: KubePath.of({ version: 'v1', namespace, resource: 'endpoints' }),
      // Which replicas are ready, and where: all a held call needs of the Endpoints.
      transform: replicasView,
      handlers: { onUpsert: (endpoints) => this.#changed(endpoints) },
    });
    this.#watches.set(namespace, watch);
    if (!this.#stopped) watch.start();
    return watch;
  }

  #changed(endpoints: ReplicasEndpoints): void {
    const namespace = endpoints.metadata?.namespace;
    const app = this.#appOf.get(objectKey(namespace, endpoints.metadata?.name));
    if (app === undefined) return;
    const ready = readyOf(endpoints)[0];
    if (ready === undefined) return;
    const key = objectKey(namespace, app);
    for (const waiter of this.#waiters.get(key) ?? []) this.#settle(waiter, ready, key);
    for (const listener of this.#readyListeners) listener(key);
  }

  #settle(waiter: Waiter, replica: HeldReplica | null, key?: string): void {
    clearTimeout(waiter.timer);
    if (key !== undefined) {
      const waiters = this.#waiters.get(key);
      waiters?.delete(waiter);
      if (waiters?.size === 0) this.#waiters.delete(key);
    }
    waiter.resolve(replica);
  }
}

/**
 * The ready addresses of an App's replicas Service, once each: the endpoints controller lists a pod once per
 * port, and the Service has one. An address without a target pod (not the controller's writing) is named by
 * its IP.
 */
function readyOf(endpoints: Pick<V1Endpoints, 'subsets'> | undefined): HeldReplica[] {
  const replicas = new Map<string, HeldReplica>();
  for (const subset of endpoints?.subsets ?? []) {
    for (const address of subset.addresses ?? []) {
      const replica = replicaOf(address);
      replicas.set(replica.name, replica);
    }
  }
  return [...replicas.values()];
}

function replicaOf(address: V1EndpointAddress): HeldReplica {
  return { name: address.targetRef?.kind === 'Pod' && address.targetRef.name ? address.targetRef.name : address.ip, ip: address.ip };
}

/** The most addresses kept of one Endpoints: more replicas than any App scales to, so a tenant's huge Endpoints costs no more. */
const MAX_ADDRESSES = 1000;

/**
 * Which replicas are ready, and where: all a held call needs of the Endpoints. The watch sees every Endpoints of
 * the namespace (any Service's), so only those named as a replicas Service keep their addresses: a tenant's
 * other Services cost the shared activator their names, not their pods.
 */
export function replicasView(endpoints: ReplicasEndpoints): ReplicasEndpoints {
  const metadata = { name: endpoints.metadata?.name, namespace: endpoints.metadata?.namespace, resourceVersion: endpoints.metadata?.resourceVersion };
  if (!isReplicasServiceName(metadata.name ?? '')) return { metadata, subsets: [] };
  let kept = 0;
  const subsets = (endpoints.subsets ?? []).map((subset) => {
    const addresses = (subset.addresses ?? []).slice(0, Math.max(0, MAX_ADDRESSES - kept)).map(({ ip, targetRef }) => ({ ip, targetRef: targetRef && { kind: targetRef.kind, name: targetRef.name } }));
    kept += addresses.length;
    return { addresses };
  });
  return { metadata, subsets };
}
