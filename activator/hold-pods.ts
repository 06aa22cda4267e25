// The holder's view of app pods: one watch of every Runlet pod (what a held call needs: name, IP, readiness),
// and waiting — on the watch's events, with a bound — for an App's first ready pod; hold-slots.ts is told of
// each pod that becomes ready, to hand it the calls it can admit.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { APP_LABEL } from '../crds/api-group.ts';
import type { KubeApi } from '../kube/client.ts';
import { KubePath } from '../kube/paths.ts';
import { ResourceWatch, metadataOnly, objectKey } from '../kube/watch.ts';
import { isReadyPod } from '../operator/autoscaling/endpoints-switch.ts';

export type HeldPod = V1Pod;

interface Waiter {
  resolve(pod: HeldPod | null): void;
  timer: NodeJS.Timeout;
}

export class ReadyPods {
  readonly #watch: ResourceWatch<HeldPod>;
  /** Waiters by `namespace/app`. */
  readonly #waiters = new Map<string, Set<Waiter>>();
  /** Told the `namespace/app` key of each pod that is ready (again) on an event. */
  readonly #readyListeners = new Set<(key: string) => void>();
  #stopped = false;

  constructor(options: { api: KubeApi; logger: Logger; watchdogMs: number }) {
    this.#watch = new ResourceWatch<HeldPod>({
      name: 'holder-pods',
      api: options.api,
      logger: options.logger,
      watchdogMs: options.watchdogMs,
      path: KubePath.of({ version: 'v1', resource: 'pods' }),
      labelSelector: APP_LABEL,
      // Which App, where, and whether ready: all a held call needs of a pod.
      transform: (pod) => {
        // resourceVersion stays: the watch tells changes from repeats by it.
        const { name, namespace, labels, resourceVersion } = metadataOnly(pod).metadata ?? {};
        return {
          metadata: { name, namespace, labels, resourceVersion, deletionTimestamp: pod.metadata?.deletionTimestamp },
          status: { podIP: pod.status?.podIP, conditions: pod.status?.conditions?.filter((condition) => condition.type === 'Ready') },
        };
      },
      handlers: { onUpsert: (pod) => this.#changed(pod) },
    });
  }

  start(): void {
    this.#watch.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const waiters of this.#waiters.values()) for (const waiter of waiters) this.#settle(waiter, null);
    this.#waiters.clear();
    await this.#watch.stop();
  }

  /** Calls `listener` with the `namespace/app` key (kube/watch.ts objectKey) of each pod that an event shows ready. */
  onReady(listener: (key: string) => void): void {
    this.#readyListeners.add(listener);
  }

  /** Resolves once the pod cache is filled. */
  whenSynced(): Promise<void> {
    return this.#watch.whenSynced();
  }

  /** The App's ready pods in the cache now. */
  readyPods(namespace: string, app: string): HeldPod[] {
    return this.#watch.list().filter((pod) => pod.metadata?.namespace === namespace && pod.metadata.labels?.[APP_LABEL] === app && isReadyPod(pod));
  }

  /** A ready pod of the App, if the cache has one now. */
  readyPod(namespace: string, app: string): HeldPod | undefined {
    return this.#watch.list().find((pod) => pod.metadata?.namespace === namespace && pod.metadata.labels?.[APP_LABEL] === app && isReadyPod(pod));
  }

  /**
   * The App's first ready pod, or null when none is ready within `timeoutMs` or once stopped. A wait that
   * begins after stop() (a hand-over that was waking the app meanwhile) ends at once: the holder's close()
   * waits for its hand-overs, which must not each hold it for a whole cold-start limit.
   */
  async waitForReadyPod(namespace: string, app: string, timeoutMs: number): Promise<HeldPod | null> {
    if (this.#stopped) return null;
    await this.#watch.whenSynced();
    if (this.#stopped) return null;
    const ready = this.readyPod(namespace, app);
    if (ready !== undefined) return ready;
    const key = objectKey(namespace, app);
    return new Promise((resolve) => {
      const waiter: Waiter = { resolve, timer: setTimeout(() => this.#settle(waiter, null, key), timeoutMs) };
      let waiters = this.#waiters.get(key);
      if (waiters === undefined) this.#waiters.set(key, (waiters = new Set()));
      waiters.add(waiter);
    });
  }

  #changed(pod: HeldPod): void {
    const app = pod.metadata?.labels?.[APP_LABEL];
    if (app === undefined || !isReadyPod(pod)) return;
    const key = objectKey(pod.metadata?.namespace, app);
    for (const waiter of this.#waiters.get(key) ?? []) this.#settle(waiter, pod, key);
    for (const listener of this.#readyListeners) listener(key);
  }

  #settle(waiter: Waiter, pod: HeldPod | null, key?: string): void {
    clearTimeout(waiter.timer);
    if (key !== undefined) {
      const waiters = this.#waiters.get(key);
      waiters?.delete(waiter);
      if (waiters?.size === 0) this.#waiters.delete(key);
    }
    waiter.resolve(pod);
  }
}
