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
//   - from zero, ask for one replica (or minReplicas), however many calls wait;
//   - when it is ready, remember the backlog B (the most calls that waited) and, for one panic window, count
//     only the load above what is left of it. What is left shrinks to the lowest load seen since (a backlog
//     only drains; calls beyond it are new load), so a backlog worked off within the window never counts,
//     and new calls that come on top of it count at once;
//   - after that window, count the load in full: a backlog that one replica could not work off in a panic
//     window is load that needs more replicas, and gets them then.
// The price: a burst at zero that really needs several replicas gets them one panic window (6 s) after the
// first replica is ready, rather than at the cold start. With requests_per_second the backlog, counted in
// calls, is discounted from the calls started per second; calls drained within a second count as B per second.

export class ColdStartBacklog {
  #remaining = 0;
  #until = Number.NEGATIVE_INFINITY;

  /** The first replica became ready at `at` while `calls` had been waiting. */
  begin(at: number, calls: number, graceMs: number): void {
    this.#remaining = calls;
    this.#until = at + graceMs;
  }

  /** The load to count at `at`: what exceeds the part of the backlog not yet worked off. */
  discount(at: number, load: number): number {
    if (!this.active(at)) return load;
    this.#remaining = Math.min(this.#remaining, load);
    return load - this.#remaining;
  }

  active(at: number): boolean {
    return at < this.#until && this.#remaining > 0;
  }

  /** Calls of the backlog possibly still being worked off. */
  get remaining(): number {
    return this.#remaining;
  }
}
