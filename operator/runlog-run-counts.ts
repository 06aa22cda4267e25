// App.status.runs in RunLog mode (no results store): the sums of an App's RunLogs' counts, kept current from
// the RunLog watch on every replica (so a new leader has them at once).
//
// The sums cover the RunLogs that exist: when a gone pod's RunLog is deleted after its retention, its runs
// leave the sums (the last run time stays).
import type { AppRunCounts } from '../crds/app-schema.ts';
import { APP_LABEL } from '../crds/api-group.ts';
import type { RunLogCounts } from '../crds/runlog-schema.ts';
import { objectKey } from '../kube/watch.ts';
import type { RunLogObject } from '../management/runlog-source.ts';
import { ByApp } from './by-app.ts';
import { rollUpRunCounts, type CountsSummary, type RunCountsSource } from './run-counters.ts';

export function summarizeRunLog(runLog: RunLogObject): CountsSummary {
  const runs = runLog.status?.runs ?? [];
  let lastRunAt: number | undefined;
  for (const run of runs) {
    const created = Date.parse(run.createdAt);
    if (!Number.isNaN(created) && (lastRunAt === undefined || created > lastRunAt)) lastRunAt = created;
  }
  return { counts: runLog.status?.counts ?? countRuns(runs), lastRunAt };
}

/** Counts derived from the records, as the sidecar counts them, for a RunLog written without counts. */
function countRuns(runs: readonly { status: string }[]): RunLogCounts {
  const counts = { total: runs.length, success: 0, failure: 0, inFlight: 0 };
  for (const { status } of runs) {
    if (status === 'success') counts.success += 1;
    else if (status === 'failure') counts.failure += 1;
    else if (status === 'pending' || status === 'running') counts.inFlight += 1;
  }
  return counts;
}

export class RunLogRunCounts implements RunCountsSource {
  /** By App and RunLog key: what each RunLog adds. */
  readonly #summaries = new ByApp<CountsSummary>();
  readonly #changed: (appKey: string) => void;

  /** `changed`: the App's counters may have moved (the writer's `changed`). */
  constructor(changed: (appKey: string) => void) {
    this.#changed = changed;
  }

  countsOf(appKey: string, shown: AppRunCounts | undefined): AppRunCounts | undefined {
    const summaries = this.#summaries.of(appKey);
    if (shown === undefined && summaries === undefined) return undefined;
    return rollUpRunCounts(summaries?.values() ?? [], shown);
  }

  runLogChanged(runLog: RunLogObject): void {
    const runLogKey = objectKey(runLog.metadata.namespace, runLog.metadata.name);
    const appName = runLog.spec?.appName ?? runLog.metadata.labels?.[APP_LABEL];
    if (appName === undefined) {
      this.runLogDeleted(runLog);
      return;
    }
    const appKey = objectKey(runLog.metadata.namespace, appName);
    const movedFrom = this.#summaries.set(appKey, runLogKey, summarizeRunLog(runLog));
    if (movedFrom !== undefined) this.#changed(movedFrom);
    this.#changed(appKey);
  }

  runLogDeleted(runLog: RunLogObject): void {
    const appKey = this.#summaries.delete(objectKey(runLog.metadata.namespace, runLog.metadata.name));
    if (appKey !== undefined) this.#changed(appKey);
  }
}
