// The one thing the autoscaler reads from the holder: how many calls to an App wait there for a replica — its
// demand at zero and while its first replicas start (decide.ts: ceil(waiting ÷ target)). In-process today
// (Holder.held, the scaler's `held`); when the holder becomes an activator of its own, this is what it reports
// across processes, and nothing else of it need cross.
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
