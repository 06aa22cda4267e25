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
