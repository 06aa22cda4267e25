// Held sync and stream calls go to an App's replicas as each becomes ready, at most `perPod` at once on each (the
// App's replica_concurrency), the rest waiting here in arrival order for a free slot: Knative's activator
// throttler, a breaker per pod sized to containerConcurrency. A call waiting here can still go to the next pod
// to become ready; one handed over to a pod's own queue could not (docs/scale-to-zero.md argues the choice).
// Slots count only this holder's calls: a pod's other callers (other holders, callers reaching it once the
// Endpoints switched) are the pod's own queue's business, and a 503 over-capacity from it is retried.
import { objectKey } from '../kube/watch.ts';
import type { HeldReplica, ReadyReplicas } from './hold-replicas.ts';

/** A slot on a ready replica: the call may be relayed to `replica`; `release()` once its answer has ended (or it was refused). */
export interface PodSlot {
  readonly replica: HeldReplica;
  release(): void;
}

interface SlotWaiter {
  perPod: number;
  settle(slot: PodSlot | null): void;
}

interface AppSlots {
  namespace: string;
  app: string;
  /** Calls waiting for a slot, first come first served. */
  waiters: SlotWaiter[];
  /** Calls relayed and not yet ended, by pod name. */
  busy: Map<string, number>;
}

export class PodSlots {
  readonly #replicas: ReadyReplicas;
  /** By `namespace/app`: only Apps with a call waiting or relayed. */
  readonly #apps = new Map<string, AppSlots>();
  #stopped = false;

  constructor(replicas: ReadyReplicas) {
    this.#replicas = replicas;
    replicas.onReady((key) => this.#pump(key));
  }

  /**
   * A slot on a ready pod of the App with fewer than `perPod` of this holder's calls, or null when none is free
   * within `timeoutMs`, once `signal` aborts (the caller went away) or once stopped.
   */
  async acquire(namespace: string, app: string, perPod: number, timeoutMs: number, signal?: AbortSignal): Promise<PodSlot | null> {
    if (this.#ended(signal)) return null;
    const deadline = performance.now() + timeoutMs;
    if (!(await this.#replicas.whenSynced(namespace, timeoutMs, signal)) || this.#ended(signal)) return null;
    const key = objectKey(namespace, app);
    let slots = this.#apps.get(key);
    if (slots === undefined) this.#apps.set(key, (slots = { namespace, app, waiters: [], busy: new Map() }));
    const appSlots = slots;
    return new Promise<PodSlot | null>((resolve) => {
      const leave = () => {
        const index = appSlots.waiters.indexOf(waiter);
        if (index !== -1) appSlots.waiters.splice(index, 1);
        waiter.settle(null);
        this.#forgetIfIdle(key, appSlots);
      };
      const timer = setTimeout(leave, Math.max(0, deadline - performance.now()));
      const waiter: SlotWaiter = {
        perPod,
        settle: (slot) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', leave);
          resolve(slot);
        },
      };
      signal?.addEventListener('abort', leave, { once: true });
      appSlots.waiters.push(waiter);
      this.#pump(key);
    });
  }

  #ended(signal: AbortSignal | undefined): boolean {
    return this.#stopped || signal?.aborted === true;
  }

  /** Calls of the App relayed through this holder and not yet ended, on each pod (for tests and logs). */
  busy(namespace: string, app: string): ReadonlyMap<string, number> {
    return this.#apps.get(objectKey(namespace, app))?.busy ?? new Map();
  }

  /** Ends every wait with null; slots in use are released by their calls as they end. */
  stop(): void {
    this.#stopped = true;
    for (const slots of this.#apps.values()) for (const waiter of slots.waiters.splice(0)) waiter.settle(null);
  }

  /** Hands free slots to the waiters in order, each to the least busy ready pod with room. */
  #pump(key: string): void {
    const slots = this.#apps.get(key);
    if (slots === undefined || slots.waiters.length === 0) return;
    const ready = this.#replicas.readyReplicas(slots.namespace, slots.app);
    while (slots.waiters.length > 0) {
      const waiter = slots.waiters[0]!;
      const replica = leastBusy(ready, slots.busy, waiter.perPod);
      if (replica === undefined) return;
      slots.waiters.shift();
      waiter.settle(this.#take(key, slots, replica));
    }
  }

  #take(key: string, slots: AppSlots, replica: HeldReplica): PodSlot {
    const { name } = replica;
    slots.busy.set(name, (slots.busy.get(name) ?? 0) + 1);
    let released = false;
    return {
      replica,
      release: () => {
        if (released) return;
        released = true;
        const left = (slots.busy.get(name) ?? 1) - 1;
        if (left === 0) slots.busy.delete(name);
        else slots.busy.set(name, left);
        this.#pump(key);
        this.#forgetIfIdle(key, slots);
      },
    };
  }

  #forgetIfIdle(key: string, slots: AppSlots): void {
    if (slots.waiters.length === 0 && slots.busy.size === 0 && this.#apps.get(key) === slots) this.#apps.delete(key);
  }
}

function leastBusy(ready: HeldReplica[], busy: ReadonlyMap<string, number>, perPod: number): HeldReplica | undefined {
  let best: HeldReplica | undefined;
  let bestCalls = perPod;
  for (const replica of ready) {
    const calls = busy.get(replica.name) ?? 0;
    if (calls < bestCalls) {
      best = replica;
      bestCalls = calls;
    }
  }
  return best;
}
