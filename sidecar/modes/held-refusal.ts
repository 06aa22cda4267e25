// A held async call this replica refuses. The holder answered its caller `202 {"run_id"}` while the app was at
// zero and handed it over later (auth/held-run.ts); refused now as a warm replica refuses a bad call — 404 for
// an unknown function, 422, 400, 413 — it would vanish: the caller holds a run id that is never listed and a
// webhook that never comes. So it becomes what the interface says an async call that fails is (service-interface
// §7): a run in state `failure`, its problem as its error (as a sync call's refusal by the runtime is recorded),
// its wait as `coldStartMs`, made durable before the holder is answered `202` with that run id, its webhook
// delivered with the failure like any async run's.
//
// Only a refusal of the call itself (4xx) becomes a failure, and not every one. A refusal of its caller (401,
// 403) is answered as such: the holder checked the token when it took the call, and one that expired meanwhile
// is the holder's to report. Recording it would let whoever holds a hand-over's header, with no token at all,
// write a failure and a webhook under another caller's run id. Nor is a refusal of the hand-over itself (409 a
// run id taken already, 403 another body than the one signed): it must never touch the record it names. 503 —
// draining, at capacity, the runtime or the run store not ready — is answered as such, and the holder tries
// again; so is any 5xx, and 408, the hand-over's own body stalling. A call without a valid held header never
// comes here.
import { parse as parseQuery } from 'node:querystring';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { RunError } from '../../crds/run-record-schema.ts';
import type { AnswerSink } from '../../run-request/answer-sink.ts';
import type { AppTarget } from '../apps.ts';
import type { HeldRun } from '../../run-request/auth/held-run.ts';
import { webhookSecretOf, type Exchange } from '../exchange.ts';
import type { Replica } from '../replica.ts';
import { outcomeOf, type Call, type RunLifecycle } from '../run-lifecycle.ts';
import { parseRunOptions } from '../../run-request/run-options.ts';
import { parseRunPathOrNull, pathOf } from '../../run-request/run-path.ts';
import { parseWebhookRequest, pendingWebhookRecord, type WebhookRequest } from '../webhook-forwarding.ts';
import { answerAccepted } from './async.ts';

/** Refusals of the caller (401, 403: also a body not the signed one), of a run id taken (409), of a stalled body (408). */
const NEVER_A_FAILURE = new Set<number>([Problems.unauthorized.status, Problems.forbidden.status, Problems.heldRunTaken.status, Problems.requestTimeout.status]);

/** A held call as far as it is known when refused: its app may not be (app-not-found), nor its webhook. */
export type RefusedCall = Omit<Call, 'target'> & { target: Pick<AppTarget, 'projectId' | 'appName'> };

export interface Refusal {
  statusCode: number;
  error: RunError;
}

/** True when a held async call refused with `status` is recorded as a failed run rather than answered so. */
export function refusalBecomesFailure(status: number): boolean {
  return status >= 400 && status < 500 && !NEVER_A_FAILURE.has(status);
}

/** The run record's error for a problem: its title as the kind, its detail as the message (as queue waits record theirs). */
export function refusalOf(problem: ProblemError): Refusal {
  return { statusCode: problem.status, error: { type: problem.spec.title, message: problem.detail } };
}

/**
 * The held call an exchange carries when it is an async one, read again from the request once it has been
 * refused (so no call pays for it before): null when it is not async, or its path is no run's. Its webhook
 * is null when `webhookEndpoint` or `X-Webhook-Secret` is itself what was refused.
 */
export function refusedAsyncCall(exchange: Exchange, held: HeldRun, receivedAt: number): RefusedCall | null {
  const { url, method } = exchange;
  const route = parseRunPathOrNull(pathOf(url));
  const queryStart = url.indexOf('?');
  if (route === null || queryStart === -1) return null;
  let webhookEndpoint: string | null;
  try {
    const options = parseRunOptions(parseQuery(url.slice(queryStart + 1)));
    if (!options.async) return null;
    webhookEndpoint = options.webhookEndpoint;
  } catch {
    // The holder held it as async, and reads the same options: a replica that disagrees answers as it would.
    return null;
  }
  let webhook: WebhookRequest | null = null;
  if (webhookEndpoint !== null) {
    try {
      webhook = parseWebhookRequest(webhookEndpoint, webhookSecretOf(exchange));
    } catch {
      // Nowhere valid to deliver: the run is recorded without a webhook.
    }
  }
  const target = { projectId: route.projectId, appName: route.appName };
  return { target, runId: held.runId, functionName: route.rest, method, receivedAt, webhook, coldStartMs: held.coldStartMs };
}

/**
 * Records the refused call as a failed async run, durably, then answers `202 {"run_id"}` and forwards the
 * failure to its webhook. Throws 503 run-store-unavailable (nothing answered) when the record cannot be made
 * durable: the holder keeps the call and tries again.
 */
export async function recordRefusedHeldCall(replica: Replica, lifecycle: RunLifecycle, call: RefusedCall, refusal: Refusal, response: AnswerSink): Promise<void> {
  const { recorder } = replica;
  const record = recorder.pending({
    id: call.runId,
    target: call.target,
    functionName: call.functionName,
    method: call.method,
    mode: 'async',
    async: true,
    webhook: call.webhook ? pendingWebhookRecord(call.webhook) : null,
    receivedAt: call.receivedAt,
    coldStartMs: call.coldStartMs,
  });
  // Finished before it is made durable: a replica lost after the 202 leaves the failure listed, not a pending run.
  recorder.finish(record, refusal);
  try {
    await recorder.store.saveDurably(record);
  } catch (err) {
    replica.metrics.refused.labels('run_store').inc();
    // The namespace at its run store quota: answered so (async.ts).
    if (err instanceof ProblemError) throw err;
    throw new ProblemError(Problems.runStoreUnavailable, 'The refused run could not be recorded durably; retry shortly', {
      cause: err,
      headers: { 'retry-after': '1' },
    });
  }
  answerAccepted(response, call.runId);
  lifecycle.report(record, call.webhook, outcomeOf(record));
}
