// The run store of a pod's sidecar in a cluster with a results store: records go in batches to the collector
// (results/collector.ts, served by the operator), which writes them to PostgreSQL. The API server is not on the
// way. A durable save (an async run's `pending` record, before its 202) is an append to the journal in the pod's
// emptyDir (runlog-journal.ts), as with RunLogs. Such a run, and every run with a webhook, stays in the journal
// until a batch carrying its final state — finished, its webhook settled — is collected: each later state is
// appended too (the journal lets go of the older entry once the newer is written), so a sidecar killed at any
// point leaves its successor in the pod every run it accepted in its latest state. Beside the journal, the
// webhook destinations file (webhook-destinations-file.ts) keeps each pending delivery's whole endpoint, signing
// secret and, once the run has finished, the body, before its first attempt (keepDelivery). The successor fails
// what was left pending or running (`replica_lost`) and delivers every webhook still owed, signed when the call
// gave a secret (lost-runs.ts). Neither file ever leaves the pod: batches carry records, which hold no secret.
//
// Batches leave at most `intervalMs` after the first save of a quiet period (1 s by default), at once when
// `maxBatchRecords` are waiting. A batch is sent with the pod's own projected ServiceAccount token for the
// collector's audience (`tokenFile`, which the kubelet rewrites as it rotates the token: read again for each
// batch), which the collector reviews with the API server: the pod holds no database credential, and no key a
// tenant could read from a Secret. While the collector cannot be reached, records wait here and retries back
// off; once `maxBufferedRuns` wait, durable saves are refused (the async call is answered 503
// run-store-unavailable, and its record is never sent: nothing refused is ever listed), while the states of
// runs already accepted are still kept, up to twice the bound, past which the oldest finished sync runs are
// dropped, counted and logged. The collector writes idempotently, so a batch whose answer was lost is sent again
// without harm.
//
// A batch the collector refuses for good (a 4xx other than 401, 403, 408 and 429: too large, not a batch) is never
// sent again as it was: it is halved until the record it cannot take travels alone; that record is then sent
// without its kept result (the run still listed, its result marked not kept), and dropped, counted and logged,
// only when the collector refuses even that. One such record never holds up the runs behind it.
//
// A namespace at its results store quota (results/namespace-quotas.ts): the collector refuses the records of runs
// new to the store, naming the quota, and says in its answer that the namespace refuses new runs. From that
// answer on, durable saves of new runs are refused with that reason (the async call is answered 507
// run-store-quota-exceeded, and nothing is journaled), and the collector is asked again every
// QUOTA_RECHECK_MS, 10 s (an empty batch when nothing else goes) until it takes new runs again. The later states of
// runs it holds are still written. Runs accepted before the answer came (a second's worth at most) are refused
// by the collector: counted as dropped (reason `quota`) and logged with their ids.
import { readFile } from 'node:fs/promises';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { CollectorClient } from './collector-client.ts';
import { forgetKeptResult, keptResultOf } from './kept-result.ts';
import { SHIPPER_BATCH_BYTES } from '../../results/batch-limits.ts';
import { deliverOwed, failUnfinished, type LostRunsOwner } from './lost-runs.ts';
import { RunRecordMetrics } from './run-record-metrics.ts';
import type { RunLogJournal } from './runlog-journal.ts';
import type { RunStore } from './store.ts';
import { pendingDelivery, rememberDeliveryBody, rememberDestination } from './webhook-destination.ts';
import type { WebhookDestinationsFile } from './webhook-destinations-file.ts';

/** The collector's origin, as the operator renders it into the sidecar's environment. */
export const RESULTS_URL_ENV = 'RUNLET_RESULTS_URL';
/** The file holding the pod's projected token for the collector, as the operator renders it into the sidecar's environment. */
export const RESULTS_TOKEN_FILE_ENV = 'RUNLET_RESULTS_TOKEN_FILE';

export interface ResultsShipperOptions {
  /** The collector's origin, e.g. http://runlet-collector.runlet-system.svc:8082. */
  collectorUrl: string;
  /** The pod's namespace: the project whose runs it sends. */
  namespace: string;
  /** The pod's projected ServiceAccount token for the collector's audience: read for each batch (the kubelet rotates it). */
  tokenFile: string;
  /** Where durable saves are made durable; the store takes it over and closes it on close. */
  journal: RunLogJournal;
  logger: Logger;
  /** Where `runlet_run_records_dropped_total` and `runlet_run_records_buffered` are registered. */
  registry: Registry;
  /** Longest a saved record waits for its batch. Default 1000 ms. */
  intervalMs?: number;
  /** Records per batch. Default 1000. */
  maxBatchRecords?: number;
  /** Bytes per batch; a larger record travels alone. Default SHIPPER_BATCH_BYTES (4 MiB). */
  maxBatchBytes?: number;
  /** Runs waiting to be collected past which durable saves are refused. Default 10,000. */
  maxBufferedRuns?: number;
  /** Bound on each request to the collector. Default 10 s. */
  requestTimeoutMs?: number;
  /** First retry delay after a failed batch, doubling up to `retryMaxMs`. Defaults 250 ms and 5 s. */
  retryInitialMs?: number;
  retryMaxMs?: number;
  /** How long `flush` (and `close`) wait for everything saved to be collected. Default 5 s. */
  flushTimeoutMs?: number;
  /** How often the collector is asked again while it refuses new runs of the namespace (a quota). Default QUOTA_RECHECK_MS. */
  quotaRecheckMs?: number;
}

export interface ShipperStats {
  batches: number;
  /** Records waiting to be collected (saved, or in the batch on its way). */
  buffered: number;
  /** States dropped at the hard bound while the collector was unreachable. */
  dropped: number;
  /** Records the collector refused for good (named invalid in its answer, or refused alone even without their kept result): dropped. */
  refused: number;
  /** The last failure to send a batch, while failures go on; null once a batch went through. */
  lastError: string | null;
}

interface FlushWaiter {
  resolve: () => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/** Ids of runs already collected that `has` still answers for (a held call's run id is claimed once). */
const SHIPPED_IDS_KEPT = 20_000;
/** How often the collector is asked again while the namespace refuses new runs (a quota), and the Retry-After given (default). */
export const QUOTA_RECHECK_MS = 10_000;
/** At most one log line per this long about records refused by the namespace's quota (the first at once). */
const QUOTA_LOG_EVERY_MS = 60_000;
const EMPTY_BATCH = Buffer.from('{"records":[]}');

export class ResultsShipperStore implements RunStore {
  readonly #url: string;
  readonly #collector: CollectorClient;
  readonly #tokenFile: string;
  readonly #journal: RunLogJournal;
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #maxBatch: number;
  readonly #maxBatchBytes: number;
  readonly #maxBuffered: number;
  readonly #retryInitialMs: number;
  readonly #retryMaxMs: number;
  readonly #flushTimeoutMs: number;
  readonly #quotaRecheckMs: number;
  /** Saved and not yet in a batch: the references, serialised when their batch leaves. */
  #pending = new Map<string, RunRecord>();
  #inFlight: Map<string, RunRecord> | null = null;
  /** Parts of batches the collector refused for good, each sent alone before anything else (see #refusedForGood). */
  readonly #suspects: Map<string, RunRecord>[] = [];
  /**
   * The latest journal entry of each run the journal keeps (saved durably, or with a webhook) until a batch with
   * its final state is collected.
   */
  readonly #journaled = new Map<string, number>();
  /** Entries being appended, by number: each settles once its append has (never rejects). */
  readonly #appending = new Map<number, Promise<void>>();
  readonly #destinations: WebhookDestinationsFile;
  /** Runs the previous sidecar of this pod left whose webhook is owed, until `deliverOwedWebhooks`. */
  #owed: RunRecord[] = [];
  readonly #lostRunsOwner: LostRunsOwner;
  readonly #shipped = new LRUCache<string, true>({ max: SHIPPED_IDS_KEPT });
  #timer: NodeJS.Timeout | null = null;
  #failures = 0;
  #lastError: Error | null = null;
  #failingSince: number | null = null;
  #waiters: FlushWaiter[] = [];
  #batches = 0;
  #dropped = 0;
  #refused = 0;
  /** Why the collector refuses new runs of this namespace (its quota), while it does; and when it is asked again. */
  #newRunsRefused: string | null = null;
  #quotaRecheck: NodeJS.Timeout | null = null;
  #quotaLoggedAt = 0;
  #quotaRefusedSinceLog = 0;
  readonly #metrics: RunRecordMetrics;
  #closed = false;

  constructor(options: ResultsShipperOptions) {
    this.#url = `${options.collectorUrl.replace(/\/+$/, '')}/v1/results/${encodeURIComponent(options.namespace)}/runs`;
    this.#collector = new CollectorClient(this.#url, options.requestTimeoutMs ?? 10_000);
    this.#tokenFile = options.tokenFile;
    this.#journal = options.journal;
    this.#logger = options.logger.child({ component: 'results-shipper' });
    this.#intervalMs = options.intervalMs ?? 1000;
    this.#maxBatch = options.maxBatchRecords ?? 1000;
    this.#maxBatchBytes = options.maxBatchBytes ?? SHIPPER_BATCH_BYTES;
    this.#maxBuffered = options.maxBufferedRuns ?? 10_000;
    this.#retryInitialMs = options.retryInitialMs ?? 250;
    this.#retryMaxMs = options.retryMaxMs ?? 5000;
    this.#flushTimeoutMs = options.flushTimeoutMs ?? 5000;
    this.#quotaRecheckMs = options.quotaRecheckMs ?? QUOTA_RECHECK_MS;
    this.#metrics = new RunRecordMetrics(options.registry, () => this.#buffered);
    this.#destinations = this.#journal.destinations;
    this.#lostRunsOwner = { processName: 'the sidecar', where: this.#journal.path, logger: this.#logger, save: (record) => this.save(record) };
    this.#takeOver();
  }

  /**
   * Runs a previous sidecar of this pod journaled and did not see collected in their final state: each is journaled
   * again in its latest state (then the predecessor's entries go), those it left unfinished are failed
   * `replica_lost`, and the webhooks it owed wait for `deliverOwedWebhooks`.
   */
  #takeOver(): void {
    const recovered = this.#journal.takeRecovered();
    const recoveredThrough = this.#journal.lastEntry;
    for (const record of recovered) {
      const delivery = record.webhook?.state === 'pending' ? this.#destinations.deliveryOf(record.id) : undefined;
      if (delivery === undefined) continue;
      rememberDestination(record.webhook!, delivery.destination, delivery.signer);
      if (delivery.body !== undefined) rememberDeliveryBody(record.webhook!, delivery.body);
    }
    const owing = new Set(recovered.filter((record) => record.webhook?.state === 'pending').map((record) => record.id));
    for (const runId of this.#destinations.recoveredRunIds) if (!owing.has(runId)) this.#destinations.settle(runId);
    const abandoned = new Set(failUnfinished(recovered, this.#lostRunsOwner));
    for (const record of recovered) if (!abandoned.has(record)) this.save(record);
    this.#owed = recovered.filter((record) => record.webhook?.state === 'pending');
    const rejournaled = recovered.map((record) => this.#appending.get(this.#journaled.get(record.id)!));
    void Promise.allSettled(rejournaled).then(() => this.#journal.replicated(recoveredThrough));
  }

  deliverOwedWebhooks(deliver: (record: RunRecord) => boolean): void {
    deliverOwed(this.#owed.splice(0), this.#lostRunsOwner, deliver);
  }

  async keepDelivery(record: RunRecord): Promise<void> {
    this.#assertOpen(record);
    this.#pending.set(record.id, record);
    this.#schedule();
    const delivery = pendingDelivery(record.webhook);
    await Promise.all([this.#journalState(record), delivery === null ? undefined : this.#destinations.keepDelivery(record.id, delivery)]);
  }

  save(record: RunRecord): void {
    this.#assertOpen(record);
    this.#pending.set(record.id, record);
    if (this.#buffered > 2 * this.#maxBuffered) this.#dropOldestFinished();
    this.#schedule();
    // Async runs (journaled since their durable save, or taken over from the journal) and runs with a webhook.
    if (!record.async && record.webhook === null && !this.#journaled.has(record.id)) return;
    this.#journalState(record).catch((error: unknown) => {
      this.#logger.warn({ err: error, runId: record.id }, 'a run state could not be journaled: if this sidecar is lost before it is collected, the run is recorded in an older state');
    });
    this.#keepDestination(record)?.catch((error: unknown) => {
      this.#logger.warn({ err: error, runId: record.id }, "the webhook destination could not be kept: if this sidecar is lost, the run's webhook is not delivered");
    });
  }

  /**
   * Appends the run's state as it is now; once written, the journal lets go of its previous entry. Rejects when
   * the append fails (the previous entry then stays the run's).
   */
  #journalState(record: RunRecord): Promise<void> {
    const previous = this.#journaled.get(record.id);
    // With its kept result: a finished run not yet collected must not come back, after a kill, without it.
    const appended = this.#journal.append(record, keptResultOf(record));
    const entry = this.#journal.lastEntry;
    this.#journaled.set(record.id, entry);
    const settled = appended.then(
      () => {
        if (previous !== undefined) this.#journal.release([previous]);
      },
      (error: unknown) => {
        const current = this.#journaled.get(record.id);
        if (current === entry) {
          if (previous === undefined) this.#journaled.delete(record.id);
          else this.#journaled.set(record.id, previous);
        } else if (previous !== undefined) {
          // Superseded by a newer entry meanwhile (or let go of): the previous one goes once that is written.
          const newer = current === undefined ? undefined : this.#appending.get(current);
          if (newer === undefined) this.#journal.release([previous]);
          else void newer.then(() => this.#journal.release([previous]));
        }
        throw error;
      },
    );
    this.#appending.set(entry, settled.then(() => undefined, () => undefined).finally(() => this.#appending.delete(entry)));
    return settled;
  }

  /** A pending webhook's destination and secret, kept once beside the journal until the run leaves it. */
  #keepDestination(record: RunRecord): Promise<void> | undefined {
    const delivery = pendingDelivery(record.webhook);
    if (delivery === null || this.#destinations.destinationOf(record.id) !== undefined) return undefined;
    return this.#destinations.keepDelivery(record.id, delivery);
  }

  /** A batch with the run's final state was collected (or the collector refused it for good): the journal lets go of it. */
  #letGo(id: string): void {
    const entry = this.#journaled.get(id);
    if (entry === undefined) return;
    this.#journaled.delete(id);
    this.#journal.release([entry]);
    this.#destinations.settle(id);
  }

  async saveDurably(record: RunRecord): Promise<void> {
    this.#assertOpen(record);
    if (this.#newRunsRefused !== null && !this.has(record.id)) {
      throw new ProblemError(Problems.runStoreQuotaExceeded, `run ${record.id} not accepted: ${this.#newRunsRefused}`, {
        headers: { 'retry-after': String(Math.ceil(this.#quotaRecheckMs / 1000)) },
      });
    }
    if (this.#buffered >= this.#maxBuffered && !this.#pending.has(record.id)) {
      throw new Error(
        `run ${record.id} not accepted: ${this.#buffered} run records wait for the results collector (the bound is ${this.#maxBuffered})` +
          (this.#lastError === null ? '' : `; the last batch failed: ${this.#lastError.message}`),
        { cause: this.#lastError ?? undefined },
      );
    }
    this.#pending.set(record.id, record);
    const journaled = this.#journalState(record);
    this.#schedule();
    const destinationKept = this.#keepDestination(record)?.catch((error: unknown) => {
      this.#logger.warn({ err: error, runId: record.id }, "the webhook destination could not be kept: if this sidecar is lost, the run's webhook is not delivered");
    });
    try {
      await journaled;
      await destinationKept;
    } catch (error) {
      // Its caller refuses the run: it must never be listed. Unless a batch already carries it, take it back.
      if (this.#pending.get(record.id) === record) {
        this.#pending.delete(record.id);
        this.#journaled.delete(record.id);
        this.#destinations.settle(record.id);
        throw error;
      }
    }
  }

  has(id: string): boolean {
    return this.#pending.has(id) || this.#inFlight?.has(id) === true || this.#shipped.has(id) || this.#suspects.some((part) => part.has(id));
  }

  flush(): Promise<void> {
    if (this.#buffered === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((waiter) => waiter.timer !== timer);
        reject(new Error(`${this.#buffered} run records were not collected within ${this.#flushTimeoutMs} ms`, { cause: this.#lastError ?? undefined }));
      }, this.#flushTimeoutMs);
      this.#waiters.push({ resolve, reject, timer });
      this.#shipSoon();
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.flush();
    } catch (error) {
      // What is journaled stays in the journal, for the pod's next sidecar; plain saves are lost, and said so.
      this.#logger.error({ err: error, buffered: this.#buffered }, 'closing with run records not collected');
    } finally {
      this.#closed = true;
      if (this.#timer !== null) clearTimeout(this.#timer);
      if (this.#quotaRecheck !== null) clearTimeout(this.#quotaRecheck);
      this.#collector.close();
      await this.#journal.close();
    }
  }

  stats(): ShipperStats {
    return { batches: this.#batches, buffered: this.#buffered, dropped: this.#dropped, refused: this.#refused, lastError: this.#lastError?.message ?? null };
  }

  get #buffered(): number {
    let suspects = 0;
    for (const part of this.#suspects) suspects += part.size;
    return this.#pending.size + (this.#inFlight?.size ?? 0) + suspects;
  }

  #assertOpen(record: RunRecord): void {
    if (this.#closed) throw new Error(`the results shipper is closed: cannot save run ${record.id}`);
  }

  /** At the hard bound: the oldest finished run that no caller was promised (not async) leaves. */
  #dropOldestFinished(): void {
    for (const [id, record] of this.#pending) {
      if (record.async || this.#journaled.has(id) || record.status === 'pending' || record.status === 'running') continue;
      this.#pending.delete(id);
      this.#dropped += 1;
      this.#metrics.dropped('buffer_full', 1);
      if (this.#dropped === 1 || this.#dropped % 1000 === 0) {
        this.#logger.error({ dropped: this.#dropped, buffered: this.#buffered }, 'the results collector is unreachable and the buffer is full: finished sync runs are being dropped');
      }
      return;
    }
  }

  /** The next batch: at once when a full one waits, else at the end of the interval (or of the backoff). */
  #schedule(): void {
    if (this.#closed || this.#inFlight !== null) return;
    if ((this.#pending.size >= this.#maxBatch || this.#suspects.length > 0) && this.#failures === 0) {
      this.#shipSoon();
      return;
    }
    if (this.#timer !== null || (this.#pending.size === 0 && this.#suspects.length === 0)) return;
    this.#timer = setTimeout(this.#shipNow, this.#failures === 0 ? this.#intervalMs : this.#backoffMs());
    this.#timer.unref();
  }

  #shipSoon(): void {
    if (this.#inFlight !== null) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = setTimeout(this.#shipNow, 0);
  }

  #backoffMs(): number {
    return Math.min(this.#retryMaxMs, this.#retryInitialMs * 2 ** Math.min(this.#failures - 1, 20));
  }

  readonly #shipNow = (): void => {
    this.#timer = null;
    if (this.#inFlight !== null || (this.#pending.size === 0 && this.#suspects.length === 0)) return;
    // Serialised now: the records are mutated in place, and the batch carries their state as of now.
    const batch = new Map<string, RunRecord>();
    /** Runs the batch carries in their final state: once it is collected, the journal lets go of them. */
    const final = new Set<string>();
    let body = '{"records":[';
    const suspect = this.#suspects.shift();
    for (const [id, record] of suspect ?? this.#pending) {
      const json = recordJson(record);
      // UTF-16 length: a bound within a factor of three of the bytes, and no second pass over the text. A part of
      // a refused batch travels whole: it fitted once, and only the record the collector refuses is to be found.
      if (suspect === undefined && batch.size > 0 && body.length + json.length > this.#maxBatchBytes) break;
      body += (batch.size === 0 ? '' : ',') + json;
      batch.set(id, record);
      if (isFinal(record)) final.add(id);
      if (batch.size === this.#maxBatch) break;
    }
    if (suspect === undefined) for (const id of batch.keys()) this.#pending.delete(id);
    this.#inFlight = batch;
    void this.#send(Buffer.from(body + ']}', 'utf8'), batch).then(
      () => this.#collected(batch, final),
      (error: unknown) => this.#failed(batch, error as Error),
    );
  };

  async #send(body: Buffer, batch: ReadonlyMap<string, RunRecord>): Promise<void> {
    const { status, text } = await this.#collector.post(body, { 'content-type': 'application/json', authorization: `Bearer ${await this.#token()}` });
    if (status < 200 || status > 299) {
      throw new CollectorRefusal(`the results collector ${this.#url} answered ${status}: ${text.slice(0, 500)}`, isRefusedForGood(status));
    }
    const answer = JSON.parse(text) as { refused?: Refusal[]; newRunsRefused?: unknown };
    const refused = Array.isArray(answer.refused) ? answer.refused : [];
    const invalid = refused.filter((refusal) => refusal.quota === undefined);
    if (invalid.length > 0) {
      this.#refused += invalid.length;
      this.#metrics.dropped('refused', invalid.length);
      this.#logger.error({ refused: invalid }, `the results collector refused ${invalid.length} run records as invalid`);
    }
    const overQuota = refused.filter((refusal) => refusal.quota !== undefined);
    if (overQuota.length > 0) this.#refusedByQuota(overQuota, batch);
    this.#quotaAnswered(typeof answer.newRunsRefused === 'string' ? answer.newRunsRefused : null);
  }

  /** Records of new runs the namespace's quota refused: dropped, counted, and logged (at most once a minute). */
  #refusedByQuota(refused: Refusal[], batch: ReadonlyMap<string, RunRecord>): void {
    this.#refused += refused.length;
    this.#metrics.dropped('quota', refused.length);
    // Async runs were answered 202 before the collector's answer said the namespace was full: said apart.
    const accepted = refused.filter((refusal) => typeof refusal.id === 'string' && batch.get(refusal.id)?.async === true).map((refusal) => refusal.id);
    this.#quotaRefusedSinceLog += refused.length;
    const now = Date.now();
    if (accepted.length === 0 && now - this.#quotaLoggedAt < QUOTA_LOG_EVERY_MS) return;
    this.#logger.error(
      { refused: this.#quotaRefusedSinceLog, quota: refused[0]!.quota, acceptedAsyncRuns: accepted, runs: refused.slice(0, 20).map((refusal) => refusal.id) },
      `the results store refused run records of new runs: ${refused[0]!.reason}`,
    );
    this.#quotaLoggedAt = now;
    this.#quotaRefusedSinceLog = 0;
  }

  /** The collector's word on whether the namespace takes new runs: refused from now on, or again. */
  #quotaAnswered(reason: string | null): void {
    const was = this.#newRunsRefused;
    this.#newRunsRefused = reason;
    if (reason === null) {
      if (was !== null) this.#logger.info('the results store takes new runs of this namespace again: async calls are accepted');
      if (this.#quotaRecheck !== null) clearTimeout(this.#quotaRecheck);
      this.#quotaRecheck = null;
      return;
    }
    if (was === null) this.#logger.warn({ reason }, `async calls are refused (507 run-store-quota-exceeded) while the namespace is at its results store quota: ${reason}`);
    if (this.#quotaRecheck === null && !this.#closed) {
      this.#quotaRecheck = setTimeout(this.#recheckQuota, this.#quotaRecheckMs);
      this.#quotaRecheck.unref();
    }
  }

  /** The token as the kubelet last wrote it: it replaces the file well before the token it held expires. */
  async #token(): Promise<string> {
    try {
      return (await readFile(this.#tokenFile, 'utf8')).trim();
    } catch (error) {
      throw new Error(`the token for the results collector could not be read from ${this.#tokenFile}: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Asks the collector again, by an empty batch when no other is under way (whose answer would say). */
  readonly #recheckQuota = (): void => {
    this.#quotaRecheck = null;
    if (this.#closed || this.#newRunsRefused === null) return;
    if (this.#inFlight !== null || this.#pending.size > 0 || this.#suspects.length > 0) {
      // A batch goes, or is about to: its answer says. Asked again meanwhile all the same, in case it fails.
      this.#quotaAnswered(this.#newRunsRefused);
      return;
    }
    const probe = new Map<string, RunRecord>();
    this.#inFlight = probe;
    void this.#send(EMPTY_BATCH, probe)
      .catch((error: unknown) => {
        this.#logger.warn({ err: error }, 'asking the results collector whether the namespace takes new runs again failed; asking again later');
        this.#quotaAnswered(this.#newRunsRefused);
      })
      .finally(() => {
        this.#inFlight = null;
        this.#settleWaiters();
      });
  };

  #collected(batch: Map<string, RunRecord>, final: ReadonlySet<string>): void {
    this.#inFlight = null;
    this.#batches += 1;
    if (this.#failingSince !== null) {
      this.#logger.info({ failures: this.#failures, forMs: Date.now() - this.#failingSince }, 'the results collector takes batches again');
    }
    this.#failures = 0;
    this.#failingSince = null;
    this.#lastError = null;
    for (const id of batch.keys()) this.#shipped.set(id, true);
    for (const id of final) this.#letGo(id);
    this.#settleWaiters();
  }

  #settleWaiters(): void {
    if (this.#buffered === 0) {
      for (const waiter of this.#waiters.splice(0)) {
        clearTimeout(waiter.timer);
        waiter.resolve();
      }
    } else if (this.#waiters.length > 0) {
      this.#shipSoon();
    } else {
      this.#schedule();
    }
  }

  #failed(batch: Map<string, RunRecord>, error: Error): void {
    this.#inFlight = null;
    if (error instanceof CollectorRefusal && error.forGood && !this.#closed) {
      this.#refusedForGood(batch, error);
      return;
    }
    // Saved again meanwhile: the pending reference is the same object, in its latest state.
    for (const [id, record] of batch) if (!this.#pending.has(id)) this.#pending.set(id, record);
    this.#failures += 1;
    this.#lastError = error;
    this.#failingSince ??= Date.now();
    if (this.#failures === 1 || this.#failures % 20 === 0) {
      this.#logger.warn({ err: error, failures: this.#failures, buffered: this.#buffered }, 'sending a batch of run records to the results collector failed; retrying');
    }
    if (this.#closed) return;
    this.#timer = setTimeout(this.#shipNow, this.#backoffMs());
    this.#timer.unref();
  }

  /**
   * Sending it again as it was would be refused again: it is halved, each half sent on its own before anything
   * else, until the record the collector cannot take is alone; that one is sent without its kept result, and
   * dropped only when refused even so.
   */
  #refusedForGood(batch: Map<string, RunRecord>, error: CollectorRefusal): void {
    if (batch.size > 1) {
      const entries = [...batch];
      const half = Math.ceil(entries.length / 2);
      this.#suspects.unshift(new Map(entries.slice(0, half)), new Map(entries.slice(half)));
      this.#logger.warn({ err: error, records: batch.size }, 'the results collector refused a batch; sending it in halves');
    } else {
      const [[id, record]] = batch;
      if (keptResultOf(record) !== undefined) {
        this.#logger.error({ err: error, run: id }, 'the results collector refused a run record with its kept result; sending it without');
        forgetKeptResult(record);
        this.#suspects.unshift(batch);
      } else {
        this.#refused += 1;
        this.#metrics.dropped('refused', 1);
        this.#logger.error({ err: error, run: id, refused: this.#refused }, 'the results collector refused a run record for good: it is dropped');
        // Saved again meanwhile, its newer state still goes, and the journal keeps it until then.
        if (!this.#pending.has(id)) this.#letGo(id);
      }
    }
    this.#settleWaiters();
  }

}

/** Finished, its webhook (if any) settled: no later state will follow. */
function isFinal(record: RunRecord): boolean {
  return record.status !== 'pending' && record.status !== 'running' && (record.webhook === null || record.webhook.state !== 'pending');
}

/**
 * A record as its batch carries it: with its kept result as `result` when it has one, the result's JSON text
 * spliced in as it is (a record's JSON always ends with its closing brace), never parsed again.
 */
function recordJson(record: RunRecord): string {
  const json = JSON.stringify(record);
  const kept = keptResultOf(record);
  return kept === undefined ? json : json.slice(0, -1) + ',"result":' + kept.json + '}';
}

/** A record the collector refused, as its answer names it (results/collector.ts CollectorAnswer); `quota` when a quota refused it. */
interface Refusal {
  index: number;
  id: unknown;
  reason: string;
  quota?: string;
}

/** A collector's answer other than 200; `forGood` when sending the same batch again would be refused again. */
class CollectorRefusal extends Error {
  readonly forGood: boolean;

  constructor(message: string, forGood: boolean) {
    super(message);
    this.forGood = forGood;
  }
}

/**
 * A 4xx but 401 and 403 (the token is refused, or its pod not known to the collector yet: who sends, not what), 408
 * and 429: the batch itself is what the collector will not take. 5xx and network failures are the collector's or
 * PostgreSQL's, and pass.
 */
function isRefusedForGood(status: number): boolean {
  return status >= 400 && status < 500 && status !== 401 && status !== 403 && status !== 408 && status !== 429;
}
