// The leader's care of the results store (results/): the runs a gone pod left unfinished are closed as its
// loss leaves them (replica-lost.ts, as the RunLog janitor closes them in RunLogs), and runs past their App's
// retention are deleted in bounded batches. A run's pod is gone when the pod cache, filled, has no pod of that
// name in its namespace; a closed run outranks any state its pod could still send (record-version.ts), and a
// pod that is gone sends nothing more.
//
// A run an operator replica recorded itself (a call held at zero and cancelled: its `replica` is that operator
// replica, no pod) is left to it while the store sees it (replica-presence.ts) and its webhook could still be
// under way: for HELD_RUN_DELIVERY_GRACE_MS, as the RunLog janitor leaves a RunLog of held runs. It is closed
// once that replica is gone, or past that time (the replica restarted under the same name, its delivery lost).
import type { Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { PgResults, RunKey } from '../results/pg-results.ts';
import type { AppRetention } from '../results/run-history.ts';
import type { ResultsConfig } from './config.ts';
import { PRESENCE_MARKS_MISSED } from './replica-presence.ts';
import { closeRun, isInFlight } from './replica-lost.ts';
import { HELD_RUN_DELIVERY_GRACE_MS } from './runlog-verdict.ts';

export interface ResultsUpkeepOptions {
  store: Pick<PgResults, 'unfinishedRuns' | 'writeBatch' | 'pruneExpired' | 'dropExpiredResults' | 'operatorReplicas'>;
  config: ResultsConfig;
  /** Whether the pod cache holds this pod (it is filled before the upkeep starts). */
  podExists(namespace: string, name: string): boolean;
  apps(): App[];
  logger: Logger;
  now?: () => Date;
  /** Runs closed: `lost` were in flight, `undelivered` owed a webhook. */
  onRunsClosed?(lost: number, undelivered: number): void;
}

const SWEEP_PAGE = 1000;

export class ResultsUpkeep {
  readonly #options: ResultsUpkeepOptions;
  #timers: NodeJS.Timeout[] = [];
  /** The pass under way, awaited by stop(): one at a time, so a slow database never stacks them. */
  #running: Promise<void> = Promise.resolve();

  constructor(options: ResultsUpkeepOptions) {
    this.#options = options;
  }

  start(): void {
    const { config } = this.#options;
    this.#every(config.sweepSeconds * 1000, () => this.sweepLostRuns());
    this.#every(config.pruneIntervalSeconds * 1000, () => this.prune());
  }

  async stop(): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer);
    this.#timers = [];
    await this.#running;
  }

  /** Closes the unfinished runs of gone pods (and gone operator replicas); resolves with how many were closed. */
  async sweepLostRuns(): Promise<number> {
    const now = (this.#options.now ?? (() => new Date()))();
    let after: RunKey | null = null;
    let closed = 0;
    for (;;) {
      const runs: RunRecord[] = await this.#options.store.unfinishedRuns(after, SWEEP_PAGE);
      // Read after the page, and only when a run has no pod: a replica marks itself before it writes a run of its
      // own, so every replica of the page's runs is there.
      let operators: Map<string, { seen: boolean }> | undefined;
      const gone: { run: RunRecord; why: string }[] = [];
      for (const run of runs) {
        if (this.#options.podExists(run.projectId, run.replica)) continue;
        operators ??= await this.#options.store.operatorReplicas(this.#options.config.presenceSeconds * PRESENCE_MARKS_MISSED);
        const operator = operators.get(run.replica);
        if (operator === undefined) {
          gone.push({ run, why: `the pod ${run.replica} went away before the run completed` });
          continue;
        }
        const delivering = now.getTime() - Date.parse(run.completedAt ?? run.createdAt) <= HELD_RUN_DELIVERY_GRACE_MS;
        if (operator.seen && delivering) continue;
        gone.push({
          run,
          why: operator.seen
            ? `the operator replica ${run.replica} recorded no outcome of the delivery within ${HELD_RUN_DELIVERY_GRACE_MS / 60_000} minutes`
            : `the operator replica ${run.replica} went away before the delivery completed`,
        });
      }
      if (gone.length > 0) {
        await this.#options.store.writeBatch(gone.map(({ run, why }) => closeRun(run, why, now.toISOString())));
        this.#options.onRunsClosed?.(gone.filter(({ run }) => isInFlight(run)).length, gone.filter(({ run }) => run.webhook?.state === 'pending').length);
        closed += gone.length;
      }
      if (runs.length < SWEEP_PAGE) return closed;
      after = runs.at(-1)!;
    }
  }

  /** Deletes the runs past their App's retention, and forgets expired results; resolves with the runs deleted. */
  async prune(): Promise<number> {
    const { config } = this.#options;
    const apps: AppRetention[] = [];
    for (const app of this.#options.apps()) {
      const days = app.spec.runs.retentionDays;
      if (days !== undefined && app.metadata.namespace !== undefined) apps.push({ projectId: app.metadata.namespace, appName: app.metadata.name, days });
    }
    const deleted = await this.#options.store.pruneExpired({ defaultDays: config.retentionDays, apps, batchSize: config.pruneBatchSize, now: this.#options.now?.() });
    if (deleted > 0) this.#options.logger.info({ deleted }, 'deleted runs past their retention from the results store');
    // Expired results are no longer returned already; this gives their space back.
    const dropped = await this.#options.store.dropExpiredResults({ batchSize: config.pruneBatchSize, now: this.#options.now?.() });
    if (dropped > 0) this.#options.logger.info({ dropped }, 'dropped kept run results past their ttl from the results store');
    return deleted;
  }

  #every(intervalMs: number, pass: () => Promise<number>): void {
    const run = (): void => {
      this.#running = this.#running.then(pass).then(
        () => undefined,
        (error: unknown) => this.#options.logger.error({ err: error }, 'a pass over the results store failed; the next one tries again'),
      );
    };
    run();
    const timer = setInterval(run, intervalMs);
    timer.unref();
    this.#timers.push(timer);
  }
}
