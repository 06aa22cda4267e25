// The run store of a pod's sidecar: run records in the status of the replica's RunLog (named after the pod,
// labelled with and owned by its App). Saves are batched into about one status write a second. A durable
// save (an async run's `pending` record, before its 202) is made durable by an append to the journal in the
// pod's emptyDir (runlog-journal.ts), which survives a crash or restart of the sidecar; it resolves then, and
// asks for a RunLog write within `durableMinIntervalMs` (~50 ms), shared by every durable save meanwhile, which
// replicates it off the node. A new sidecar of the pod merges what the journal holds and no RunLog write
// replicated into the RunLog it adopts. While the RunLog cannot be written (writes failing, or durable saves
// not replicated within `durableTimeoutMs`), saves wait in a bounded buffer and durable saves are refused, so
// the sidecar answers 503 rather than accept a run it cannot replicate. Given the replica's load, the store
// writes it beside the runs: a changed load asks for a write at the same cadence, an unchanged one none.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { RunRecord, WebhookRecord } from '../../crds/run-record-schema.ts';
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import { KubeApi } from '../../kube/client.ts';
import type { KubeCredentials } from '../../kube/credentials.ts';
import { KubeApiError, isConflict, isNotFound } from '../../kube/errors.ts';
import type { ReplicaLoadSource } from '../load/load-source.ts';
import { markAbandoned } from './recorder.ts';
import { RunLogApi, type RunLogState } from './runlog-api.ts';
import type { RunLogJournal } from './runlog-journal.ts';
import { RunRecordMetrics } from './run-record-metrics.ts';
import { realTimers, type RunLogTimers, type TimerHandle } from './runlog-timers.ts';
import { RunLogWindow } from './runlog-window.ts';
import type { RunStore } from './store.ts';
import { pendingDestination, rememberDestination } from './webhook-destination.ts';
import type { WebhookDestinationsFile } from './webhook-destinations-file.ts';

export interface RunLogStoreOptions {
  /** The API server and how to authenticate to it (loadKubeCredentials). */
  credentials: KubeCredentials;
  /** The project: the pod's namespace, where its App and RunLog live. */
  namespace: string;
  /** The pod's name, which the RunLog is named after. */
  podName: string;
  appName: string;
  /**
   * Where durable saves are journaled before their RunLog write (RunLogJournal.open on the pod's data dir).
   * The store takes it over: it hands its recovered runs to the adopted RunLog, and closes it on close.
   */
  journal: RunLogJournal;
  /** Where `runlet_run_records_dropped_total` and `runlet_run_records_buffered` are registered. */
  registry: Registry;
  logger: Logger;
  /** The replica's load, written into the status as `load` whenever it changed. Absent: no `load`. */
  load?: ReplicaLoadSource;
  /** Least time between the starts of two batched writes. Default 1000 ms. */
  flushIntervalMs?: number;
  /** How long the first save of a quiet period waits for others to join its write. Default 2 ms. */
  coalesceMs?: number;
  /**
   * Least time between the starts of two writes made for durable saves. Under a steady stream of async runs
   * this caps the writes at 1000 / N a second, each shared by the runs accepted meanwhile. Default 50 ms.
   */
  durableMinIntervalMs?: number;
  /**
   * How long a durable save may wait for the RunLog write that replicates it: while one has waited longer,
   * `saveDurably` refuses (writes hang, or cannot keep up). Default 2000 ms.
   */
  durableTimeoutMs?: number;
  /** How long `flush` keeps retrying before it rejects. Default 5000 ms. */
  flushTimeoutMs?: number;
  /** Bound on each API request. Default 10 s. */
  requestTimeoutMs?: number;
  /** Runs saved and not yet written that the store holds; past it the oldest finished ones are dropped. Default 10,000. */
  maxBufferedRuns?: number;
  /** Bound on the status JSON; the oldest finished runs leave to fit. Default 1 MiB (etcd allows about 1.5 MiB per object). */
  maxStatusBytes?: number;
  /** First retry delay after a failed write, doubling up to `retryMaxMs`. Defaults 250 ms and 5 s. */
  retryInitialMs?: number;
  retryMaxMs?: number;
  /** How long `close` keeps trying to write what is left. Default 5 s. */
  closeTimeoutMs?: number;
  timers?: RunLogTimers;
}

/** A caller of flush, resolved by the first write of a snapshot at or past `seq`. */
interface Waiter {
  seq: number;
  resolve: () => void;
  reject: (error: Error) => void;
  /** When the wait gives up. */
  deadline: number;
  timer?: TimerHandle;
}

/** `cadence`: batched saves. `durable`: durable saves or flushes wait for replication. `now`: an explicit flush. */
type Urgency = 'cadence' | 'durable' | 'now';

/** Rounds of conflict (409: re-read and merge) or vanished RunLog (404: re-create) within one write. */
const MAX_WRITE_ROUNDS = 5;

/** Runs serialised between two turns of the event loop while a write prepares its status: ~0.1–0.5 ms. */
const SERIALIZE_SLICE_RUNS = 200;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export class RunLogStore implements RunStore {
  readonly #logger: Logger;
  readonly #timers: RunLogTimers;
  readonly #client: KubeApi;
  readonly #api: RunLogApi;

  /** The store's API client, shared by the sidecar's few other calls (whether an API key exists); closed with it. */
  get client(): KubeApi {
    return this.#client;
  }
  readonly #window: RunLogWindow;
  readonly #journal: RunLogJournal;
  readonly #destinations: WebhookDestinationsFile;
  readonly #load: ReplicaLoadSource | undefined;
  /** The load the last successful write carried (the source's object: compared by reference). */
  #writtenLoad: RunLogLoad | undefined;
  /** Lost runs whose webhook is owed, until `deliverOwedWebhooks` gives them a deliverer. */
  #owed: RunRecord[] = [];
  #deliverOwed: ((record: RunRecord) => void) | undefined;
  readonly #metrics: RunRecordMetrics;
  readonly #name: string;
  readonly #flushIntervalMs: number;
  readonly #coalesceMs: number;
  readonly #durableMinIntervalMs: number;
  readonly #durableTimeoutMs: number;
  readonly #flushTimeoutMs: number;
  readonly #maxBufferedRuns: number;
  readonly #maxStatusBytes: number;
  readonly #retryInitialMs: number;
  readonly #retryMaxMs: number;
  readonly #closeTimeoutMs: number;
  readonly #waiters = new Set<Waiter>();
  /** The RunLog's version as last read or written; undefined until it is known to exist. */
  #resourceVersion: string | undefined;
  /** The status a previous sidecar of this pod left has been taken over (done once, at the first read). */
  #adopted = false;
  /** Runs the previous sidecar journaled and did not replicate: merged into the status it left when adopting it. */
  #recovered: RunRecord[];
  /** Window sequence number of the latest durable save. */
  #lastDurableSeq = 0;
  /** Since when (at the latest) a durable save has waited for its RunLog write; undefined when none waits. */
  #unreplicatedSince: number | undefined;
  #timer: TimerHandle | undefined;
  #timerAt = Infinity;
  #writing: Promise<void> | undefined;
  #lastAttemptAt = -Infinity;
  #failures = 0;
  /** Set while backing off after a failed write: no batched or durable write starts before it. */
  #retryAt: number | undefined;
  #healthy = false;
  #lastError: Error | undefined;
  #droppedUnlogged = 0;
  #closing: Promise<void> | undefined;
  #closed = false;

  constructor(options: RunLogStoreOptions) {
    const { namespace, podName, appName } = options;
    this.#name = `${namespace}/${podName}`;
    this.#logger = options.logger.child({ runLog: this.#name });
    this.#timers = options.timers ?? realTimers;
    this.#flushIntervalMs = options.flushIntervalMs ?? 1000;
    this.#coalesceMs = options.coalesceMs ?? 2;
    this.#durableMinIntervalMs = options.durableMinIntervalMs ?? 50;
    this.#durableTimeoutMs = options.durableTimeoutMs ?? 2000;
    this.#flushTimeoutMs = options.flushTimeoutMs ?? 5000;
    this.#maxBufferedRuns = options.maxBufferedRuns ?? 10_000;
    this.#maxStatusBytes = options.maxStatusBytes ?? 1024 * 1024;
    this.#retryInitialMs = options.retryInitialMs ?? 250;
    this.#retryMaxMs = options.retryMaxMs ?? 5000;
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 5000;
    this.#client = new KubeApi(options.credentials, { requestTimeoutMs: options.requestTimeoutMs ?? 10_000 });
    this.#api = new RunLogApi(this.#client, { namespace, name: podName, appName });
    this.#window = new RunLogWindow({ maxUnwritten: this.#maxBufferedRuns });
    this.#journal = options.journal;
    this.#destinations = options.journal.destinations;
    this.#recovered = this.#journal.takeRecovered();
    this.#metrics = new RunRecordMetrics(options.registry, () => this.#window.unwritten);
    this.#load = options.load;
    this.#load?.onChange(() => this.#schedule('cadence'));
  }

  /** The last write (or read) of the RunLog succeeded. False until the first one has. */
  get healthy(): boolean {
    return this.#healthy;
  }

  /** Why the last failed write failed (kept after writes succeed again, for diagnosis). */
  get lastError(): Error | undefined {
    return this.#lastError;
  }

  /**
   * Reads or creates the RunLog now rather than at the first save, taking over the runs a previous sidecar of
   * this pod left (its in-flight runs are recorded as failures: nothing will complete them).
   */
  start(): void {
    this.#schedule('now');
  }

  save(record: RunRecord): void {
    this.#assertOpen(record);
    this.#upsert(record);
    this.#schedule('cadence');
    if (record.webhook !== null) void this.#trackDestination(record.webhook, record.id);
  }

  has(id: string): boolean {
    return this.#window.has(id);
  }

  deliverOwedWebhooks(deliver: (record: RunRecord) => boolean): void {
    this.#deliverOwed = deliver;
    for (const record of this.#owed.splice(0)) deliver(record);
  }

  /**
   * Resolves once the record is in the journal, and asks for a prompt RunLog write to replicate it. Refuses at
   * once while the RunLog cannot be written (see #refusal); a journal write that fails takes the run back and
   * rejects too, unless a RunLog write has replicated the run meanwhile.
   */
  async saveDurably(record: RunRecord): Promise<void> {
    this.#assertOpen(record);
    const refusal = this.#refusal();
    if (refusal !== undefined) throw new Error(`run ${record.id} could not be recorded in RunLog ${this.#name}: ${refusal}`, { cause: this.#lastError });
    this.#upsert(record);
    this.#lastDurableSeq = this.#window.seq;
    this.#unreplicatedSince ??= this.#timers.now();
    const journaled = this.#journal.append(record);
    this.#schedule('durable');
    const destinationKept = record.webhook === null ? undefined : this.#trackDestination(record.webhook, record.id);
    try {
      await journaled;
      await destinationKept;
    } catch (error) {
      // Its caller refuses the run: it leaves the window, unless a RunLog write already made it durable.
      if (this.#window.withdraw(record)) throw error;
    }
  }

  /** Writes now (even while backing off), retrying for up to `flushTimeoutMs`. */
  flush(): Promise<void> {
    if (this.#closed) return Promise.reject(new Error(`run store for RunLog ${this.#name} is closed`));
    if (this.#window.unwritten === 0 && this.#resourceVersion !== undefined) return Promise.resolve();
    return this.#waitForFlush();
  }

  /** Writes what is left, retrying for at most `closeTimeoutMs`; what still is not written is counted dropped. */
  close(): Promise<void> {
    this.#closing ??= this.#closeOnce();
    return this.#closing;
  }

  async #closeOnce(): Promise<void> {
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    const deadline = this.#timers.now() + this.#closeTimeoutMs;
    if (this.#writing !== undefined) await this.#within(this.#writing, deadline);
    while (this.#window.unwritten > 0 || this.#waiters.size > 0) {
      if (!(await this.#within(this.#attempt(), deadline))) break;
      if (this.#healthy) continue;
      const retryIn = (this.#retryAt ?? 0) - this.#timers.now();
      if (this.#timers.now() + retryIn >= deadline) break;
      await new Promise<void>((resolve) => this.#timers.setTimeout(resolve, retryIn));
    }
    this.#closed = true;
    this.#reportDrops();
    const unwritten = this.#window.unwritten;
    if (unwritten > 0) {
      this.#metrics.dropped('closed', unwritten);
      this.#logger.error({ err: this.#lastError, dropped: unwritten }, 'run store closed with run records it could not write to the RunLog');
    }
    const closedError = new Error(`run store for RunLog ${this.#name} closed before the write`, { cause: this.#lastError });
    for (const waiter of this.#waiters) this.#fail(waiter, closedError);
    // Emptied if everything journaled was replicated; otherwise the next sidecar of this pod recovers the rest.
    await this.#journal.close();
    await this.#client.close();
    this.#logger.info({ counts: this.#window.counts }, 'run store closed');
  }

  #assertOpen(record: RunRecord): void {
    if (this.#closed) throw new Error(`run store for RunLog ${this.#name} is closed: cannot save run ${record.id}`);
  }

  /**
   * Why a durable save cannot be accepted now, if it cannot: it would wait in the journal, on this node only,
   * for longer than the prompt write the caller's 202 stands for.
   */
  #refusal(): string | undefined {
    if (this.#retryAt !== undefined) {
      const retryInMs = Math.max(0, Math.round(this.#retryAt - this.#timers.now()));
      return `writing it failed (${this.#lastError?.message ?? 'unknown error'}); the next try is in ${retryInMs} ms`;
    }
    if (this.#unreplicatedSince !== undefined && this.#timers.now() - this.#unreplicatedSince > this.#durableTimeoutMs) {
      return `durable saves have waited more than ${this.#durableTimeoutMs} ms for a write${this.#writing === undefined ? '' : ' (one is under way)'}`;
    }
    if (this.#window.unwritten >= this.#maxBufferedRuns) {
      return `${this.#window.unwritten} run records wait to be written, the most it buffers`;
    }
    return undefined;
  }

  #waitForFlush(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const deadline = this.#timers.now() + this.#flushTimeoutMs;
      const waiter: Waiter = { seq: this.#window.seq, resolve, reject, deadline };
      this.#waiters.add(waiter);
      waiter.timer = this.#timers.setTimeout(() => this.#fail(waiter, this.#unavailable()), this.#flushTimeoutMs);
      this.#schedule('now');
    });
  }

  /**
   * Keeps a pending webhook's whole endpoint in the pod's file until its delivery settles, so a restarted
   * sidecar can deliver the failure of a run this one loses. Never rejects: without the file, such a run's
   * webhook is recorded failed instead, as a gone pod's are.
   */
  #trackDestination(webhook: WebhookRecord, runId: string): Promise<void> | undefined {
    // Settling a destination not kept changes nothing: most saves of a webhook's run end here or below.
    if (webhook.state !== 'pending') {
      this.#destinations.settle(runId);
      return undefined;
    }
    if (this.#destinations.destinationOf(runId) !== undefined) return undefined;
    const destination = pendingDestination(webhook);
    if (destination === null) return undefined;
    return this.#destinations.keep(runId, destination).catch((error: unknown) => {
      this.#logger.warn({ err: error, runId }, "the webhook destination could not be kept: if this sidecar is lost, the run's webhook is not delivered");
    });
  }

  #upsert(record: RunRecord): void {
    const dropped = this.#window.upsert(record);
    if (dropped > 0) {
      this.#metrics.dropped('buffer_full', dropped);
      this.#droppedUnlogged += dropped;
    }
  }

  /** Arms the write timer for the earliest time `urgency` allows, unless it already fires sooner. */
  #schedule(urgency: Urgency): void {
    // A write in flight schedules the next when it ends (#followUp); close() does its own writing.
    if (this.#writing !== undefined || this.#closing !== undefined) return;
    // The common case, all but the first save of each batch: the timer is armed no later than the cadence allows.
    if (urgency === 'cadence' && this.#timerAt <= this.#lastAttemptAt + this.#flushIntervalMs && this.#retryAt === undefined) return;
    const now = this.#timers.now();
    let at: number;
    if (urgency === 'now') at = now;
    else if (this.#retryAt !== undefined) at = this.#retryAt;
    else if (urgency === 'durable') at = Math.max(now + this.#coalesceMs, this.#lastAttemptAt + this.#durableMinIntervalMs);
    else at = Math.max(now + this.#coalesceMs, this.#lastAttemptAt + this.#flushIntervalMs);
    if (this.#timer !== undefined) {
      if (this.#timerAt <= at) return;
      this.#timers.clearTimeout(this.#timer);
    }
    this.#timerAt = at;
    this.#timer = this.#timers.setTimeout(this.#onTimer, at - now);
  }

  readonly #onTimer = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    this.#writing = this.#attempt().finally(() => {
      this.#writing = undefined;
      this.#followUp();
    });
  };

  /** After a write: the next one, sooner when callers or durable saves wait for it. */
  #followUp(): void {
    if (this.#waiters.size > 0 || this.#unreplicatedSince !== undefined) this.#schedule('durable');
    else if (this.#window.unwritten > 0 || this.#resourceVersion === undefined || this.#loadChanged()) this.#schedule('cadence');
  }

  #loadChanged(): boolean {
    return this.#load !== undefined && this.#load.current() !== this.#writtenLoad;
  }

  /** One write, with its outcome applied to health, backoff and the waiters. Never rejects. */
  async #attempt(): Promise<void> {
    this.#lastAttemptAt = this.#timers.now();
    this.#reportDrops();
    try {
      await this.#write();
    } catch (error) {
      this.#failed(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    if (!this.#healthy && this.#lastError !== undefined) this.#logger.info({ buffered: this.#window.unwritten }, 'RunLog writes succeed again');
    this.#healthy = true;
    this.#failures = 0;
    this.#retryAt = undefined;
  }

  /** Makes sure the RunLog exists, then writes the status snapshot, re-reading on conflicts. */
  async #write(): Promise<void> {
    for (let round = 1; ; round += 1) {
      const resourceVersion = this.#resourceVersion ?? (await this.#ensureRunLog());
      const load = this.#load?.current();
      if (this.#window.unwritten === 0 && load === this.#writtenLoad) {
        // Nothing changed since the last write, or only runs that left again: all saved so far is as written as it will be.
        this.#replicated(this.#window.seq, this.#journal.lastEntry, this.#timers.now());
        return;
      }
      // A status of many runs new since the last write is serialised a slice at a time, with requests
      // served in between, rather than in one block of milliseconds that would hold up every one in flight.
      // The load leads the status, its bytes taken off the runs' budget (keys and digits: a byte a character).
      const loadField = load === undefined ? '' : `"load":${JSON.stringify(load)},`;
      const runsBudget = this.#maxStatusBytes - loadField.length;
      while (this.#window.prepare(runsBudget, SERIALIZE_SLICE_RUNS)) await yieldToEventLoop();
      const snapshot = this.#window.snapshot(runsBudget);
      // Every journal entry so far is of a run saved into the window before it, so in the snapshot.
      const journaled = this.#journal.lastEntry;
      const snapshotAt = this.#timers.now();
      if (snapshot.trimmedForBytes > 0) {
        this.#logger.warn(
          { trimmed: snapshot.trimmedForBytes, kept: snapshot.runs, bytes: snapshot.bytes, maxStatusBytes: this.#maxStatusBytes },
          'RunLog status over its byte budget: dropped the oldest finished runs',
        );
      }
      try {
        this.#resourceVersion = await this.#api.writeStatus(resourceVersion, `{${loadField}${snapshot.json.slice(1)}`);
      } catch (error) {
        if (round < MAX_WRITE_ROUNDS && isConflict(error)) {
          await this.#rebase();
          continue;
        }
        if (round < MAX_WRITE_ROUNDS && isNotFound(error)) {
          this.#logger.warn('the RunLog vanished: creating it again');
          this.#resourceVersion = undefined;
          continue;
        }
        throw error;
      }
      this.#window.markWritten(snapshot.seq);
      this.#writtenLoad = load;
      this.#replicated(snapshot.seq, journaled, snapshotAt);
      return;
    }
  }

  /** Reads the App (owner uid, keepFinished) and the RunLog, creating it when missing. Returns its version. */
  async #ensureRunLog(): Promise<string> {
    const app = await this.#api.readApp();
    this.#window.setKeepFinished(app.keepFinished);
    let state = await this.#api.readRunLog();
    if (state === undefined) {
      state = await this.#api.createRunLog(app.uid);
      this.#logger.info({ keepFinished: app.keepFinished }, 'RunLog created');
    }
    if (this.#adopted) this.#window.merge(state.status.runs ?? []);
    else this.#adopt(state);
    this.#resourceVersion = state.resourceVersion;
    return state.resourceVersion;
  }

  /**
   * Takes over the status a previous sidecar of this pod (restarted since) left, with the runs it journaled and
   * did not replicate: all of them unfinished, so recorded as failures with the runs it left in flight.
   */
  #adopt(state: RunLogState): void {
    const journaled = new Set(this.#recovered);
    const unfinished = this.#window.adopt(state.status, this.#recovered);
    this.#recovered = [];
    for (const record of unfinished) {
      const destination = this.#destinations.destinationOf(record.id);
      if (record.webhook?.state === 'pending' && destination !== undefined) rememberDestination(record.webhook, destination);
      markAbandoned(record, 'replica_lost', 'the sidecar restarted before the run completed');
      this.#upsert(record);
      if (pendingDestination(record.webhook) !== null) this.#owe(record);
    }
    // Destinations of runs the previous sidecar had finished: their delivery was cut off, and is not resumed.
    const owed = new Set(unfinished.map((record) => record.id));
    for (const runId of this.#destinations.recoveredRunIds) if (!owed.has(runId)) this.#destinations.settle(runId);
    this.#adopted = true;
    const runs = state.status.runs?.length ?? 0;
    if (unfinished.length > 0) {
      const fromJournal = unfinished.filter((record) => journaled.has(record)).length;
      this.#logger.warn(
        { runs: unfinished.length, fromJournal, journal: this.#journal.path },
        'runs left in flight by a previous sidecar of this pod are recorded as failures',
      );
    }
    if (runs > 0) this.#logger.info({ runs, counts: this.#window.counts }, 'took over the RunLog of a previous sidecar of this pod');
  }

  #owe(record: RunRecord): void {
    if (this.#deliverOwed === undefined) this.#owed.push(record);
    else this.#deliverOwed(record);
  }

  /** After a conflict: the RunLog as another writer left it, merged under the runs saved here. */
  async #rebase(): Promise<void> {
    const state = await this.#api.readRunLog();
    if (state === undefined) {
      this.#resourceVersion = undefined;
      return;
    }
    this.#logger.debug({ resourceVersion: state.resourceVersion }, 'the RunLog changed under a write: merging and retrying');
    this.#window.merge(state.status.runs ?? []);
    this.#resourceVersion = state.resourceVersion;
  }

  #failed(error: Error): void {
    this.#failures += 1;
    const backoff = Math.min(this.#retryMaxMs, this.#retryInitialMs * 2 ** (this.#failures - 1));
    const retryAfter = error instanceof KubeApiError ? (error.retryAfterMs ?? 0) : 0;
    // Jitter, so the replicas of an app do not all retry in step after an API server outage.
    const delay = Math.min(this.#retryMaxMs, Math.max(retryAfter, backoff * (0.8 + Math.random() * 0.4)));
    this.#retryAt = this.#timers.now() + delay;
    this.#healthy = false;
    this.#lastError = error;
    this.#logger.warn(
      { err: error, failures: this.#failures, retryInMs: Math.round(delay), buffered: this.#window.unwritten },
      'writing the RunLog failed; saves are buffered until it succeeds',
    );
    // Callers whose bound passes before the retry are answered now rather than at their bound.
    for (const waiter of this.#waiters) {
      if (waiter.deadline < this.#retryAt) this.#fail(waiter, this.#unavailable());
    }
  }

  /**
   * A write (or a check that nothing was left to write) covered every save up to window sequence `seq` and
   * every journal entry up to `journalEntry`; it started at `startedAt`.
   */
  #replicated(seq: number, journalEntry: number, startedAt: number): void {
    this.#settle(seq);
    this.#journal.replicated(journalEntry);
    // Durable saves made since `startedAt` may still wait; none of them waits from before it.
    this.#unreplicatedSince = this.#lastDurableSeq > seq ? startedAt : undefined;
  }

  #settle(seq: number): void {
    for (const waiter of this.#waiters) {
      if (waiter.seq > seq) continue;
      this.#waiters.delete(waiter);
      this.#timers.clearTimeout(waiter.timer);
      waiter.resolve();
    }
  }

  #fail(waiter: Waiter, error: Error): void {
    if (!this.#waiters.delete(waiter)) return;
    this.#timers.clearTimeout(waiter.timer);
    waiter.reject(error);
  }

  #unavailable(): Error {
    const why = this.#lastError?.message ?? 'no write completed yet';
    return new Error(`run records could not be flushed to RunLog ${this.#name} within ${this.#flushTimeoutMs} ms: ${why}`, { cause: this.#lastError });
  }

  #reportDrops(): void {
    if (this.#droppedUnlogged === 0) return;
    this.#logger.warn(
      { dropped: this.#droppedUnlogged, maxBufferedRuns: this.#maxBufferedRuns },
      'run record buffer full: dropped the oldest finished runs not yet written to the RunLog',
    );
    this.#droppedUnlogged = 0;
  }

  /** Waits for `promise` until `deadline`; false when the deadline came first. */
  async #within(promise: Promise<void>, deadline: number): Promise<boolean> {
    let timer: TimerHandle | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = this.#timers.setTimeout(() => resolve(false), deadline - this.#timers.now());
    });
    try {
      return await Promise.race([promise.then(() => true as const), timeout]);
    } finally {
      this.#timers.clearTimeout(timer);
    }
  }
}
