// What the elected leader alone does, begun when it wins the lease and ended when it loses it: reconcile Apps
// (every App once at the start, then on events and at each resync), look after RunLogs (the janitor and the
// run counters) and scale autoscaled Apps (the scaler): those start only once every cache is filled, since
// they judge by what the caches lack.
import type { Scaler } from './autoscaling/scaler.ts';
import type { ResultsUpkeep } from './results-upkeep.ts';
import type { RunCounters } from './run-counters.ts';
import type { RunLogJanitor } from './runlog-janitor.ts';
import type { SidecarRbacApplier } from './sidecar-rbac.ts';
import type { WorkQueue } from '../kube/work-queue.ts';

export interface LeaderDutiesOptions {
  queue: WorkQueue;
  rbac: SidecarRbacApplier;
  janitor: RunLogJanitor;
  counters: RunCounters;
  scaler: Scaler;
  /** The results store's lost runs and retention, when the operator has one. */
  results?: ResultsUpkeep;
  /** Queues every App the cache knows. */
  reconcileAll(): void;
  /** The App cache is filled. */
  appsSynced(): Promise<void>;
  /** Every cache is filled (the RunLog one too). */
  allSynced(): Promise<unknown>;
  resyncMs: number;
}

export class LeaderDuties {
  readonly #options: LeaderDutiesOptions;
  #resyncTimer: NodeJS.Timeout | undefined;
  #leading = false;
  /** Counts leaderships, so that a start of the RunLog upkeep waiting for the caches knows it is still wanted. */
  #term = 0;
  #queueStopped: Promise<void> = Promise.resolve();
  #upkeepStopped: Promise<unknown> = Promise.resolve();

  constructor(options: LeaderDutiesOptions) {
    this.#options = options;
  }

  begin(): void {
    const { queue, rbac, janitor, counters, scaler } = this.#options;
    this.#leading = true;
    const term = ++this.#term;
    rbac.forget();
    queue.start();
    // Whatever happened while another replica led (or nobody did): every App once.
    void this.#options.appsSynced().then(() => {
      if (this.#stillLeading(term)) this.#options.reconcileAll();
    });
    this.#resyncTimer = setInterval(() => {
      rbac.forget();
      this.#options.reconcileAll();
    }, this.#options.resyncMs);
    this.#resyncTimer.unref();
    // The janitor judges pods gone by their absence from the cache: only a filled cache can say so.
    void this.#options.allSynced().then(() => {
      if (!this.#stillLeading(term)) return;
      janitor.start();
      counters.start();
      this.#options.results?.start();
      // Decisions need every replica's load (RunLogs) and every Deployment's size.
      scaler.start();
    });
  }

  end(): void {
    this.#leading = false;
    this.#term += 1;
    clearInterval(this.#resyncTimer);
    this.#queueStopped = this.#options.queue.stop();
    this.#upkeepStopped = Promise.all([this.#options.janitor.stop(), this.#options.counters.stop(), this.#options.scaler.stop(), this.#options.results?.stop()]);
  }

  /** Resolves once the work of the last leadership has finished (reconciles in hand, RunLog upkeep). */
  async ended(): Promise<void> {
    await this.#queueStopped;
    await this.#upkeepStopped;
  }

  #stillLeading(term: number): boolean {
    return this.#leading && term === this.#term;
  }
}
