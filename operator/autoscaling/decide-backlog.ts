// The cold-start burst rule.
//
// While an app is at zero its calls wait (held). When the first replica becomes ready they all reach it at
// once, and its load report shows them as in flight and queued: 30 calls held during a 3 s start look like a
// sustained load of 30, which asks for 3 replicas at a target of 10, and — 3 being over twice the one ready
// replica — sets off panic mode, which then never scales down for a whole stable window. Knative's users saw
// exactly this: several replicas started for what one replica finished in a fraction of a second.
//
// A held call is a backlog, not a rate, and how long a backlog lasts depends on how long calls take, which
// nobody knows before a replica has served one. So:
//   - from zero, ask for the replicas the calls waiting now need, ceil(waiting ÷ target) within maxReplicas (the
//     holder asks so itself, settings.ts replicasForWaiting): a count of calls waiting at one moment, never an
//     average that grows for as long as the start lasts, and no panic while none is ready;
//   - when it is ready, remember the backlog B (the most calls that waited) and, for one panic window, count
//     only the load above what is left of it. What is left shrinks to the lowest load seen since (a backlog
//     only drains; calls beyond it are new load), so a backlog worked off within the window never counts,
//     and new calls that come on top of it count at once;
//   - B is at least the peak of the replicas' first load report after that: calls held by another operator
//     replica's holder, which this one does not count, reach the replica with the rest. Until that report
//     comes (a replica writes its load at most once a second), the zero load of no report drains nothing;
//   - after that window, count the load in full: a backlog that one replica could not work off in a panic
//     window is load that needs more replicas, and gets them then.
// The price: a burst at zero larger than its waiting calls showed (more calls come once a replica is ready)
// gets the rest of its replicas one panic window (6 s) after the first is ready. With requests_per_second the backlog, counted in
// calls, is discounted from the calls started per second; calls drained within a second count as B per second.

/** What the replicas' reports say at one moment, beside the load being counted. */
export interface BacklogReport {
  /** Replicas whose load report is in the sample: none, and the sample's zero load means nothing yet. */
  replicasReporting: number;
  /** The most calls running and queued at once in the replicas' last second. */
  peakCalls: number;
}

export class ColdStartBacklog {
  #remaining = 0;
  #until = Number.NEGATIVE_INFINITY;
  #awaitingFirstReport = false;

  /** The first replica became ready at `at` while `calls` had been waiting (at this operator replica's holder). */
  begin(at: number, calls: number, graceMs: number): void {
    this.#remaining = calls;
    this.#until = at + graceMs;
    this.#awaitingFirstReport = true;
  }

  /** The load to count at `at`: what exceeds the part of the backlog not yet worked off. */
  discount(at: number, load: number, report: BacklogReport): number {
    if (!this.active(at) || report.replicasReporting === 0) return load;
    if (this.#awaitingFirstReport) {
      // The first report's average covers a second the held calls may have reached only part of: its peak
      // is the backlog's size, and it drains nothing.
      this.#awaitingFirstReport = false;
      this.#remaining = Math.max(this.#remaining, report.peakCalls);
      return Math.max(0, load - this.#remaining);
    }
    this.#remaining = Math.min(this.#remaining, load);
    return load - this.#remaining;
  }

  active(at: number): boolean {
    return at < this.#until && (this.#remaining > 0 || this.#awaitingFirstReport);
  }

  /** Calls of the backlog possibly still being worked off. */
  get remaining(): number {
    return this.#remaining;
  }
}
