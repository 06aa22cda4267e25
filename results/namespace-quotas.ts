// Per-namespace quotas of the results store: the runs a namespace keeps, the bytes of their records, and the
// bytes of their kept results. The store is one database for every namespace: without a bound, one namespace
// keeping 16 MiB results filled the chart's 10 GiB volume in about 640 calls, after which every namespace's
// batches failed and their async calls were refused.
//
// The collector asks here, before it writes a batch, what of it may be written:
//   - a run new to the store (its first record) is refused when the namespace's runs or record bytes would go
//     past their quota: refused in the collector's answer with a reason naming the quota and the figures, and
//     the answer tells the sidecar that the namespace refuses new runs (`newRunsRefused`), so that its async
//     calls are answered 507 run-store-quota-exceeded rather than accepted and then refused here;
//   - a later state of a run the store holds is written: an accepted run's outcome is not lost. Past the
//     record-bytes quota, one that grows its record is written with its long texts (the error's message, the
//     webhook's last error) cut to LATER_STATE_TEXT_CHARS, and refused only past the quota's margin (a tenth of
//     it): records a sidecar never sends, or one namespace growing its rows' records without bound by rewriting
//     them (a later state may be sent again and again, each with a larger record);
//   - a kept result past the kept-result quota is dropped, the record written without it and marked as a
//     result not kept (`resultKept: false`), as a result larger than the App keeps is.
// Usage is read from the counters the writes keep (namespace-usage.ts): exact as of the read. Batches of one
// namespace written at once may each pass on the same figures, so a namespace can go past a quota by what
// its batches in flight hold (a batch is at most 2,000 records and 17 MiB): a bound, not an exact stop.
import type { Logger } from 'pino';
import type { RunRecordWithResult } from '../crds/run-record-schema.ts';
import { NO_USAGE, runKeyText, type NamespaceUsage, type NamespaceUsageReader } from './namespace-usage.ts';

/** The bounds of one namespace; null: none. */
export interface QuotaLimits {
  runs: number | null;
  recordBytes: number | null;
  keptResultBytes: number | null;
}

export type QuotaName = keyof QuotaLimits;

export interface NamespaceQuotasOptions {
  /** Every namespace's bounds unless `namespaces` names it. */
  defaults: QuotaLimits;
  /** Bounds of particular namespaces, each over the defaults. */
  namespaces?: ReadonlyMap<string, Partial<QuotaLimits>>;
  usage: Pick<NamespaceUsageReader, 'usageOf' | 'heldRuns'>;
  logger: Logger;
  /** Where each quota's refusals are counted: records refused (runs, recordBytes) or results dropped (keptResultBytes). */
  onRefused?(namespace: string, quota: QuotaName, count: number): void;
  /** How often a namespace's refusals are logged at most, per quota (the first at once). Default 60 s. */
  logEveryMs?: number;
}

export interface QuotaRefusal {
  /** The record's position in the records given to admit(). */
  position: number;
  id: string;
  quota: QuotaName;
  reason: string;
}

export interface Admission {
  /** What to write: the records admitted, some without their kept result. */
  records: RunRecordWithResult[];
  refused: QuotaRefusal[];
  /** Runs written without their kept result (over the kept-result quota). */
  resultsDropped: number;
  /** Why the namespace's next new run would be refused; absent while it would be taken. */
  newRunsRefused?: string;
}

/** What each quota is called in the operator's configuration, for the reasons given. */
const SETTING: Record<QuotaName, string> = {
  runs: 'results.maxRunsPerNamespace',
  recordBytes: 'results.maxRecordMiBPerNamespace',
  keptResultBytes: 'results.maxKeptResultMiBPerNamespace',
};

const DEFAULT_LOG_EVERY_MS = 60_000;
/** What a later state past the record-bytes quota keeps of its error's message and its webhook's last error. */
export const LATER_STATE_TEXT_CHARS = 4096;

interface BatchRun {
  key: string;
  appName: string;
  id: string;
  positions: number[];
  /** The largest of its records as the store writes them: what its row will hold at most. */
  recordBytes: number;
  /** Its kept result's bytes, when a record carries one the store would keep; 0 when none. */
  resultBytes: number;
}

export class NamespaceQuotas {
  readonly #options: NamespaceQuotasOptions;
  readonly #logged = new Map<string, { at: number; since: number }>();

  constructor(options: NamespaceQuotasOptions) {
    this.#options = options;
  }

  limitsOf(namespace: string): QuotaLimits {
    return { ...this.#options.defaults, ...this.#options.namespaces?.get(namespace) };
  }

  /** What of `records` (all of `namespace`, as the collector checked) may be written now. */
  async admit(namespace: string, records: readonly RunRecordWithResult[]): Promise<Admission> {
    const limits = this.limitsOf(namespace);
    if (limits.runs === null && limits.recordBytes === null && limits.keptResultBytes === null) return { records: [...records], refused: [], resultsDropped: 0 };
    const usage = await this.#options.usage.usageOf(namespace);
    const runs = batchRuns(records);
    const added = { runs: 0, recordBytes: 0, keptResultBytes: 0 };
    for (const run of runs) {
      added.runs += 1;
      added.recordBytes += run.recordBytes;
      added.keptResultBytes += run.resultBytes;
    }
    // Most batches fit even were every run new: no need to ask which runs the store holds.
    if (QUOTAS.every((quota) => fits(limits[quota], usage[quota], added[quota]))) {
      return { records: [...records], refused: [], resultsDropped: 0, newRunsRefused: this.#whyNewRunsRefused(namespace, limits, sum(usage, added)) };
    }
    const held = await this.#options.usage.heldRuns(namespace, runs);
    const taken = { ...NO_USAGE };
    const refusedAt = new Map<number, QuotaName>();
    const withoutResult = new Set<number>();
    /** Later states written with their long texts cut. */
    const cut = new Map<number, RunRecordWithResult>();
    let newRunRefused: QuotaName | undefined;
    /** Later states refused: growing their records past the quota's margin. */
    const laterRefused = new Set<number>();
    for (const run of runs) {
      const inStore = held.get(run.key);
      if (inStore !== undefined && run.recordBytes > inStore.recordBytes) {
        let growth = run.recordBytes - inStore.recordBytes;
        if (!fits(limits.recordBytes, usage.recordBytes + taken.recordBytes, growth)) {
          const shorter = run.positions.map((position) => [position, withTextsCut(records[position]!)] as const);
          growth = Math.max(0, ...shorter.map(([, record]) => recordBytesOf(record))) - inStore.recordBytes;
          if (!fits(limits.recordBytes! + Math.ceil(limits.recordBytes! / 10), usage.recordBytes + taken.recordBytes, growth)) {
            for (const position of run.positions) laterRefused.add(position);
            continue;
          }
          for (const [position, record] of shorter) cut.set(position, record);
        }
        taken.recordBytes += Math.max(0, growth);
      }
      if (inStore === undefined) {
        const over = (['runs', 'recordBytes'] as const).find((quota) => !fits(limits[quota], usage[quota] + taken[quota], quota === 'runs' ? 1 : run.recordBytes));
        if (over !== undefined) {
          newRunRefused ??= over;
          for (const position of run.positions) refusedAt.set(position, over);
          continue;
        }
        taken.runs += 1;
        taken.recordBytes += run.recordBytes;
      }
      // A result the store holds already is counted already, and a record without one never erases it.
      if (run.resultBytes === 0 || inStore?.keptResult === true) continue;
      if (fits(limits.keptResultBytes, usage.keptResultBytes + taken.keptResultBytes, run.resultBytes)) taken.keptResultBytes += run.resultBytes;
      else for (const position of run.positions) withoutResult.add(position);
    }
    const admitted: RunRecordWithResult[] = [];
    const refused: QuotaRefusal[] = [];
    const resultsDropped = runs.filter((run) => withoutResult.has(run.positions[0]!)).length;
    records.forEach((record, position) => {
      const quota = refusedAt.get(position);
      if (quota !== undefined) {
        refused.push({ position, id: record.id, quota, reason: this.#reason(namespace, quota, limits, usage[quota] + taken[quota]) });
        return;
      }
      if (laterRefused.has(position)) {
        const reason = `a later state of run ${record.id} would grow its record past the margin of namespace ${namespace}'s results store quota of ${mib(limits.recordBytes!)} of run records (it keeps ${mib(usage.recordBytes + taken.recordBytes)}), even with its long texts cut: not recorded (${SETTING.recordBytes})`;
        refused.push({ position, id: record.id, quota: 'recordBytes', reason });
        return;
      }
      const written = cut.get(position) ?? record;
      // Every state of the run, so that whichever the store keeps says the result was not kept.
      admitted.push(withoutResult.has(position) ? withoutKeptResult(written) : written);
    });
    if (laterRefused.size > 0) {
      // Never from a sidecar's own records: logged every time.
      const runsRefused = records.filter((_, position) => laterRefused.has(position)).map((record) => record.id);
      this.#options.logger.error({ namespace, quota: 'recordBytes', runs: runsRefused }, `later states of runs refused: they would grow their records past the margin of namespace ${namespace}'s results store quota of run records`);
      this.#options.onRefused?.(namespace, 'recordBytes', runsRefused.length);
    }
    const after = sum(usage, taken);
    for (const quota of ['runs', 'recordBytes'] as const) {
      const ids = refused.filter((refusal) => refusal.quota === quota && !laterRefused.has(refusal.position)).map((refusal) => refusal.id);
      if (ids.length > 0) this.#refusedNow(namespace, quota, ids.length, this.#reason(namespace, quota, limits, after[quota]), ids);
    }
    if (resultsDropped > 0) this.#refusedNow(namespace, 'keptResultBytes', resultsDropped, this.#reason(namespace, 'keptResultBytes', limits, after.keptResultBytes), []);
    const newRunsRefused = newRunRefused === undefined ? this.#whyNewRunsRefused(namespace, limits, after) : this.#reason(namespace, newRunRefused, limits, after[newRunRefused]);
    return { records: admitted, refused, resultsDropped, newRunsRefused };
  }

  /** Once a namespace is at its runs or record-bytes quota, its next new run is refused: said before it is sent. */
  #whyNewRunsRefused(namespace: string, limits: QuotaLimits, usage: NamespaceUsage): string | undefined {
    const full = (['runs', 'recordBytes'] as const).find((quota) => limits[quota] !== null && usage[quota] >= limits[quota]!);
    return full === undefined ? undefined : this.#reason(namespace, full, limits, usage[full]);
  }

  #reason(namespace: string, quota: QuotaName, limits: QuotaLimits, used: number): string {
    const limit = limits[quota]!;
    switch (quota) {
      case 'runs':
        return `namespace ${namespace} is at its results store quota of ${limit} runs (it keeps ${used}): new runs are not recorded until retention deletes older ones or the quota is raised (${SETTING.runs})`;
      case 'recordBytes':
        return `namespace ${namespace} is at its results store quota of ${mib(limit)} of run records (it keeps ${mib(used)}, ${used} bytes): new runs are not recorded until retention deletes older ones or the quota is raised (${SETTING.recordBytes})`;
      case 'keptResultBytes':
        return `namespace ${namespace} is at its results store quota of ${mib(limit)} of kept results (it keeps ${mib(used)}, ${used} bytes): results are not kept (resultKept false) until older ones expire or the quota is raised (${SETTING.keptResultBytes})`;
    }
  }

  /** Counted always; logged at once, then at most every `logEveryMs` per namespace and quota, with the count meanwhile. */
  #refusedNow(namespace: string, quota: QuotaName, count: number, reason: string, runs: string[]): void {
    this.#options.onRefused?.(namespace, quota, count);
    const key = `${namespace}/${quota}`;
    const now = Date.now();
    const logged = this.#logged.get(key);
    if (logged !== undefined && now - logged.at < (this.#options.logEveryMs ?? DEFAULT_LOG_EVERY_MS)) {
      logged.since += count;
      return;
    }
    this.#logged.set(key, { at: now, since: 0 });
    const what = quota === 'keptResultBytes' ? 'kept results dropped' : 'run records refused';
    this.#options.logger.warn({ namespace, quota, count, sinceLastLog: logged?.since ?? 0, runs: runs.slice(0, 20) }, `${what} by the results store quota: ${reason}`);
  }
}

const QUOTAS: readonly QuotaName[] = ['runs', 'recordBytes', 'keptResultBytes'];

function fits(limit: number | null, used: number, adding: number): boolean {
  return limit === null || adding === 0 || used + adding <= limit;
}

function sum(a: NamespaceUsage, b: NamespaceUsage): NamespaceUsage {
  return { runs: a.runs + b.runs, recordBytes: a.recordBytes + b.recordBytes, keptResultBytes: a.keptResultBytes + b.keptResultBytes };
}

/** The batch's runs, in the order they first appear, measured as the store will write them (pg-results.ts). */
function batchRuns(records: readonly RunRecordWithResult[]): BatchRun[] {
  const runs = new Map<string, BatchRun>();
  records.forEach((withResult, position) => {
    const { result, ...record } = withResult;
    const key = runKeyText(record.appName, record.id);
    let run = runs.get(key);
    if (run === undefined) {
      run = { key, appName: record.appName, id: record.id, positions: [], recordBytes: 0, resultBytes: 0 };
      runs.set(key, run);
    }
    run.positions.push(position);
    run.recordBytes = Math.max(run.recordBytes, recordBytesOf(record));
    // As the store keeps it: a result beside an expiry.
    if (result !== undefined && record.resultExpiresAt !== undefined) run.resultBytes = Math.max(run.resultBytes, Buffer.byteLength(JSON.stringify(result)));
  });
  return [...runs.values()];
}

/** A record's bytes as the store writes it: its JSON, without the kept result (a column of its own). */
function recordBytesOf(withResult: RunRecordWithResult): number {
  const { result: _result, ...record } = withResult;
  return Buffer.byteLength(JSON.stringify(record));
}

/** The record with its error's message and its webhook's last error cut to LATER_STATE_TEXT_CHARS, saying so. */
function withTextsCut(record: RunRecordWithResult): RunRecordWithResult {
  const shorten = (text: string): string =>
    text.length <= LATER_STATE_TEXT_CHARS ? text : `${text.slice(0, LATER_STATE_TEXT_CHARS)}… (cut from ${text.length} characters: the namespace is at its results store quota of run records)`;
  return {
    ...record,
    error: record.error === null ? null : { ...record.error, message: shorten(record.error.message) },
    webhook: record.webhook === null ? null : { ...record.webhook, lastError: record.webhook.lastError === null ? null : shorten(record.webhook.lastError) },
  };
}

/** The record as a run whose result was not kept, as the sidecar marks one larger than its App keeps. */
function withoutKeptResult(record: RunRecordWithResult): RunRecordWithResult {
  const { result: _dropped, resultExpiresAt: _expiry, ...rest } = record;
  return { ...rest, resultKept: false };
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}
