// A run's life from admission to its last record, whichever mode runs it: a slot (at once, or after a wait in
// the queue, recorded `pending`), `running`, then — whether the mode succeeded or threw — the slot freed, the
// metrics and the log line, and the outcome forwarded to the webhook.
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { TIMEOUT_ERROR_TYPE } from '../crds/run-error-types.ts';
import type { RunMode, RunRecord } from '../crds/run-record-schema.ts';
import { ActiveRun } from './active-runs.ts';
import { recordCancelled } from './cancelled-run.ts';
import type { AppTarget } from './apps.ts';
import type { RunOutcome } from './modes/outcome.ts';
import type { Replica } from './replica.ts';
import { keepResult } from './runs/kept-result.ts';
import { pendingWebhookRecord, type WebhookRequest } from './webhook-forwarding.ts';

/** What every mode needs to know about the call, decided before anything runs. */
export interface Call {
  target: AppTarget;
  runId: string;
  functionName: string;
  method: string;
  receivedAt: number;
  webhook: WebhookRequest | null;
  /** Held by the holder while the app was at zero, this long (run-request/auth/held-run.ts); else null. */
  coldStartMs: number | null;
}

export class RunLifecycle {
  readonly #replica: Replica;

  constructor(replica: Replica) {
    this.#replica = replica;
  }

  /**
   * Sync and stream runs: a slot now, the common case, answered without a promise; null when there is none,
   * and the run must wait in the queue (`admitQueued`).
   */
  admitNow(call: Call, mode: RunMode): ActiveRun | null {
    return call.target.admission.tryAcquire() ? this.start(this.track(call, mode, false)) : null;
  }

  /** A wait in the queue for a slot (recorded `pending`), or 503 when the queue is full. */
  async admitQueued(call: Call, mode: RunMode): Promise<ActiveRun> {
    this.reserve(call);
    const run = this.track(call, mode, false);
    this.#replica.recorder.store.save(run.record);
    try {
      await this.waitForSlot(run, call);
    } catch (err) {
      this.finalize(run, call, outcomeOf(run.record));
      throw err;
    }
    return this.start(run);
  }

  /** A place in the queue, or 503 (counted) when it is full. */
  reserve(call: Call): void {
    try {
      call.target.admission.reserve();
    } catch (err) {
      this.#replica.metrics.refused.labels('over_capacity').inc();
      throw err;
    }
  }

  track(call: Call, mode: RunMode, isAsync: boolean): ActiveRun {
    const record = this.#replica.recorder.pending({
      id: call.runId,
      target: call.target,
      functionName: call.functionName,
      method: call.method,
      mode,
      async: isAsync,
      webhook: call.webhook ? pendingWebhookRecord(call.webhook) : null,
      receivedAt: call.receivedAt,
      coldStartMs: call.coldStartMs,
    });
    // The time limit counts from the request's arrival, read once for both.
    const run = new ActiveRun(record, call.receivedAt + call.target.runTimeLimitMs);
    this.#replica.activeRuns.add(run);
    return run;
  }

  /** A tracked run given up before it started (its record could not be made durable): as if never admitted. */
  untrack(run: ActiveRun, call: Call): void {
    call.target.admission.unreserve();
    this.#replica.activeRuns.delete(run);
  }

  /**
   * Waits in the queue, then for the runtime should it be down (restarting): the run stays `pending` until it
   * can be sent. A run stopped while waiting is recorded, and the caller finalizes it.
   */
  async waitForSlot(run: ActiveRun, call: Call): Promise<void> {
    run.waitsForRuntime = true;
    try {
      await call.target.admission.acquire(run.signal, true);
      if (!call.target.ready) await this.#waitForRuntime(run, call);
    } catch (err) {
      if (run.stoppedFor === 'cancel_requested') throw recordCancelled(run, this.#replica.recorder);
      const reason = run.stoppedFor ?? 'shutdown';
      const problem =
        reason === 'timeout'
          ? new ProblemError(Problems.timeout, 'The run waited for a slot past its time limit')
          : new ProblemError(Problems.draining, 'The replica shut down before the run started', { headers: { 'retry-after': '1' } });
      // The same type as a run stopped at its limit while running: one reason, one type for webhook consumers.
      const type = reason === 'timeout' ? TIMEOUT_ERROR_TYPE : problem.spec.title;
      this.#replica.recorder.finish(run.record, { statusCode: problem.status, error: { type, message: problem.detail }, reason });
      throw err instanceof ProblemError ? err : problem;
    }
  }

  /** Holding its slot, so the queue keeps its order; the slot is given back if the run is stopped meanwhile. */
  async #waitForRuntime(run: ActiveRun, call: Call): Promise<void> {
    try {
      await call.target.whenReady(run.signal);
    } catch (err) {
      call.target.admission.release();
      throw err;
    }
  }

  start(run: ActiveRun): ActiveRun {
    this.#replica.recorder.running(run.record);
    return run;
  }

  /** Waits for the mode, then frees the slot and forwards the outcome — whether the mode succeeded or threw. */
  async complete(run: ActiveRun, call: Call, mode: Promise<RunOutcome>): Promise<void> {
    let outcome: RunOutcome | null = null;
    try {
      outcome = await mode;
    } finally {
      call.target.admission.release();
      if (run.record.completedAt === null) {
        // A mode that throws records why first; this only guards against a bug leaving a run `running` forever.
        this.#replica.recorder.finish(run.record, { statusCode: 500, error: { type: 'InternalError', message: 'the sidecar failed mid-run' }, reason: 'upstream_error' });
      }
      this.finalize(run, call, outcome ?? outcomeOf(run.record));
    }
  }

  finalize(run: ActiveRun, call: Call, outcome: RunOutcome): void {
    this.#replica.activeRuns.delete(run);
    const keeping = call.target.resultKeeping;
    if (keeping !== null) {
      keepResult(run.record, outcome, keeping);
      this.#replica.recorder.touch(run.record);
    }
    this.report(run.record, call.webhook, outcome);
  }

  /** A run that has ended: counted, logged, and its outcome forwarded to its webhook. */
  report(record: RunRecord, webhook: WebhookRequest | null, outcome: RunOutcome): void {
    const { metrics, logger, webhooks } = this.#replica;
    metrics.runCompleted(record.mode, record.status, record.runtimeMs);
    // Checked first: the log line's object would otherwise be built for every run and thrown away.
    if (logger.isLevelEnabled('info')) this.#logRun(record);
    if (webhook) webhooks.forward(record, webhook, outcome);
  }

  #logRun(record: RunRecord): void {
    this.#replica.logger.info(
      {
        runId: record.id,
        app: `${record.projectId}/${record.appName}`,
        function: record.functionName,
        mode: record.mode,
        status: record.status,
        statusCode: record.statusCode,
        durationMs: record.responseTimeMs,
        ...(record.reason ? { reason: record.reason } : {}),
      },
      'run',
    );
  }
}

/** The outcome of a run that ended in a recorded failure (the mode threw after recording it). */
export function outcomeOf(record: RunRecord): RunOutcome {
  return { statusCode: record.statusCode ?? 500, success: false, resultJson: null, error: record.error, runTimeMs: record.runtimeMs ?? 0 };
}
