// The one thing the autoscaler reads from the holder: how many calls to an App wait there for a replica — its
// demand at zero, while its first replicas start, and while calls wait at the holder for a free slot on a
// replica (decide.ts: counted with the replicas' load). In the operator's own holder it is read in-process
// (Holder.held); `runlet activator` pods answer it at their admin port's `/load` (HeldLoadReport), which the
// leader scrapes (activator-loads.ts). Nothing else of the holder need cross.

/** Where an activator answers its HeldLoadReport: its admin port. */
export const HELD_LOAD_PATH = '/load';

/** The calls waiting at one holder for one App. */
export interface HeldCount {
  namespace: string;
  app: string;
  held: number;
}

/** An activator's answer at `/load`: every App with a call waiting there, and no other. */
export interface HeldLoadReport {
  apps: HeldCount[];
}

export interface HeldDemand {
  /**
   * Calls to the App waiting for a replica now: sync and stream calls without a slot on a pod, async calls
   * not yet handed over. A call on a pod counts no more here: that pod's sidecar reports it, so none is
   * counted twice.
   */
  held(namespace: string, app: string): number;
}

/** The holder's count of waiting calls, per App. */
export class WaitingCalls implements HeldDemand {
  /** By `namespace/app`: only Apps with a call waiting. */
  readonly #counts = new Map<string, number>();

  held(namespace: string, app: string): number {
    return this.#counts.get(`${namespace}/${app}`) ?? 0;
  }

  /** Every App with a call waiting, and how many. */
  report(): HeldLoadReport {
    const apps: HeldCount[] = [];
    for (const [key, held] of this.#counts) {
      // A namespace's name has no slash: the first one ends it.
      const slash = key.indexOf('/');
      apps.push({ namespace: key.slice(0, slash), app: key.slice(slash + 1), held });
    }
    return { apps };
  }

  /** Counts a call to the App as waiting until the returned function is called (later calls of it do nothing). */
  start(namespace: string, app: string): () => void {
    const key = `${namespace}/${app}`;
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.#counts.get(key) ?? 1) - 1;
      if (left === 0) this.#counts.delete(key);
      else this.#counts.set(key, left);
    };
  }
}
