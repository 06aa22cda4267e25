// The runs of every watched RunLog, merged per app and indexed for the list API. Pure bookkeeping, no I/O:
// the RunLog watch puts each RunLog's runs in as they arrive and takes a deleted RunLog's out.
//
// Per app, every filter the list API offers (any / async only × any status / one status) has its own sorted
// id index, so a page is a binary search plus the page, whatever the filter and however rare its runs — never
// a scan or a sort per request. A run appears once per app however many RunLogs hold it, showing its latest
// state (runlog-source-precedence.ts); paging is by id, so a page boundary stays put while RunLogs change.
import type { RunRecord, RunStatus } from '../crds/run-record-schema.ts';
import type { RunPage } from './run-source.ts';
import { compareRunStates } from './runlog-source-precedence.ts';
import { SortedIds } from './runlog-source-sorted-ids.ts';

export interface RunFilter {
  asyncOnly: boolean;
  status: RunStatus | null;
}

/** One run of an app, with each RunLog's copy of it (nearly always exactly one). */
interface HeldRun {
  /** The copy answered: the latest state among `copies`. */
  shown: RunRecord;
  copies: Map<string, RunRecord>;
}

interface AppRuns {
  runs: Map<string, HeldRun>;
  /** By filterKey: the ids of the runs whose shown copy passes that filter. */
  byFilter: Map<string, SortedIds>;
}

/** What one RunLog contributes, so that its next version (or its deletion) can be told apart. */
interface IndexedRunLog {
  appKey: string;
  runs: Map<string, RunRecord>;
}

/** `namespace/appName`: apps are per project, and projects are namespaces. */
export function appKey(namespace: string, appName: string): string {
  return `${namespace}/${appName}`;
}

function filterKey(asyncOnly: boolean, status: RunStatus | null): string {
  return `${asyncOnly ? 'async' : 'any'}/${status ?? 'any'}`;
}

/** The filters a run passes: 2 indexes for a sync run, 4 for an async one. */
function filterKeysOf(record: RunRecord): string[] {
  const keys = [filterKey(false, null), filterKey(false, record.status)];
  if (record.async) keys.push(filterKey(true, null), filterKey(true, record.status));
  return keys;
}

const EMPTY_PAGE: RunPage = { items: [], hasMore: false };

export class RunLogIndex {
  readonly #apps = new Map<string, AppRuns>();
  readonly #runLogs = new Map<string, IndexedRunLog>();

  /** Runs held, counting a run in several RunLogs once. */
  get size(): number {
    let size = 0;
    for (const app of this.#apps.values()) size += app.runs.size;
    return size;
  }

  /**
   * Makes the RunLog `runLogKey` (namespace/name) contribute exactly `runs` to the app `appKey`: its runs
   * not among them leave (unless another RunLog holds them too), the others are added or updated.
   */
  putRunLog(runLogKey: string, appKeyOfRunLog: string, runs: readonly RunRecord[]): void {
    let previous = this.#runLogs.get(runLogKey);
    if (previous !== undefined && previous.appKey !== appKeyOfRunLog) {
      this.deleteRunLog(runLogKey);
      previous = undefined;
    }
    const app = this.#appRuns(appKeyOfRunLog);
    const current = new Map<string, RunRecord>();
    for (const record of runs) current.set(record.id, record);
    for (const [id, record] of current) this.#putCopy(app, runLogKey, id, record);
    if (previous !== undefined) {
      for (const id of previous.runs.keys()) {
        if (!current.has(id)) this.#deleteCopy(app, runLogKey, id);
      }
    }
    this.#runLogs.set(runLogKey, { appKey: appKeyOfRunLog, runs: current });
    this.#forgetIfEmpty(appKeyOfRunLog, app);
  }

  deleteRunLog(runLogKey: string): void {
    const indexed = this.#runLogs.get(runLogKey);
    if (indexed === undefined) return;
    this.#runLogs.delete(runLogKey);
    const app = this.#apps.get(indexed.appKey);
    if (app === undefined) return;
    for (const id of indexed.runs.keys()) this.#deleteCopy(app, runLogKey, id);
    this.#forgetIfEmpty(indexed.appKey, app);
  }

  /** Up to `pageSize` runs of the app passing `filter` whose ids sort below `beforeId`, newest first. */
  page(appKeyOfRuns: string, filter: RunFilter, beforeId: string | null, pageSize: number): RunPage {
    const app = this.#apps.get(appKeyOfRuns);
    const index = app?.byFilter.get(filterKey(filter.asyncOnly, filter.status));
    if (app === undefined || index === undefined) return EMPTY_PAGE;
    const { ids, hasMore } = index.pageBefore(beforeId, pageSize);
    return { items: ids.map((id) => app.runs.get(id)!.shown), hasMore };
  }

  get(appKeyOfRun: string, runId: string): RunRecord | undefined {
    return this.#apps.get(appKeyOfRun)?.runs.get(runId)?.shown;
  }

  #appRuns(key: string): AppRuns {
    let app = this.#apps.get(key);
    if (app === undefined) {
      app = { runs: new Map(), byFilter: new Map() };
      this.#apps.set(key, app);
    }
    return app;
  }

  #forgetIfEmpty(key: string, app: AppRuns): void {
    if (app.runs.size === 0) this.#apps.delete(key);
  }

  #putCopy(app: AppRuns, runLogKey: string, id: string, record: RunRecord): void {
    const held = app.runs.get(id);
    if (held === undefined) {
      app.runs.set(id, { shown: record, copies: new Map([[runLogKey, record]]) });
      this.#addToIndexes(app, id, record);
      return;
    }
    held.copies.set(runLogKey, record);
    this.#show(app, id, held);
  }

  #deleteCopy(app: AppRuns, runLogKey: string, id: string): void {
    const held = app.runs.get(id);
    if (held === undefined || !held.copies.delete(runLogKey)) return;
    if (held.copies.size > 0) {
      this.#show(app, id, held);
      return;
    }
    app.runs.delete(id);
    for (const key of filterKeysOf(held.shown)) app.byFilter.get(key)?.delete(id);
  }

  /** Shows the latest copy, moving the run between filter indexes when its status or async flag differs. */
  #show(app: AppRuns, id: string, held: HeldRun): void {
    let latest: RunRecord | undefined;
    let latestFrom = '';
    for (const [runLogKey, copy] of held.copies) {
      const order = latest === undefined ? 1 : compareRunStates(copy, latest);
      // A tie goes to the greater RunLog key: the same answer whichever copy arrived first.
      if (order > 0 || (order === 0 && runLogKey > latestFrom)) {
        latest = copy;
        latestFrom = runLogKey;
      }
    }
    const before = held.shown;
    held.shown = latest!;
    if (before.status === latest!.status && before.async === latest!.async) return;
    for (const key of filterKeysOf(before)) app.byFilter.get(key)?.delete(id);
    this.#addToIndexes(app, id, latest!);
  }

  #addToIndexes(app: AppRuns, id: string, record: RunRecord): void {
    for (const key of filterKeysOf(record)) {
      let index = app.byFilter.get(key);
      if (index === undefined) {
        index = new SortedIds();
        app.byFilter.set(key, index);
      }
      index.add(id);
    }
  }
}
