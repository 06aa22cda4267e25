// A held call's run id is taken once. A header is good for minutes (held-run.ts), so one seen on the cluster
// network could otherwise be sent again, as another run under the same id: a second record overwriting the
// first (run stores upsert by id), a second webhook. So a replica takes a held run id only when its run store
// holds no record of it and no call took it before — remembered for as long as a header that names it can be
// good — and refuses the call otherwise (409, not recorded: held-refusal.ts). The check and the taking happen
// in one turn of the event loop, so two copies of one header arriving together cannot both pass. A call refused
// with nothing recorded (503 at capacity, 401) gives its id back: the holder hands it over again under it.
import type { RunStore } from '../runs/store.ts';
import { HELD_RUN_MAX_AGE_MS } from '../../run-request/auth/held-run.ts';

/** A header is good HELD_RUN_MAX_AGE_MS either side of the sidecar's clock: a run id outlives every header naming it. */
const REMEMBERED_MS = 2 * HELD_RUN_MAX_AGE_MS;

export class HeldRunClaims {
  readonly #store: Pick<RunStore, 'has'>;
  readonly #now: () => number;
  /** Run ids taken, by when they may be forgotten; in taking order, so the oldest are first. */
  readonly #taken = new Map<string, number>();

  constructor(store: Pick<RunStore, 'has'>, now: () => number = Date.now) {
    this.#store = store;
    this.#now = now;
  }

  /** Takes the run id for a held call: false when a record of it exists or another call took it. */
  take(runId: string): boolean {
    const now = this.#now();
    for (const [id, forgetAt] of this.#taken) {
      if (forgetAt > now) break;
      this.#taken.delete(id);
    }
    if (this.#taken.has(runId) || this.#store.has(runId)) return false;
    this.#taken.set(runId, now + REMEMBERED_MS);
    return true;
  }

  /** Gives back a run id whose call was refused with nothing recorded: its holder may hand it over again. */
  giveBack(runId: string): void {
    this.#taken.delete(runId);
  }
}
