// The last stage of a run with `webhookEndpoint`: its outcome POSTed by the deliverer, progress copied onto
// the run record as it goes. Fire and forget: the caller's answer never waits for it.
import type { Logger } from 'pino';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { RunRecord, WebhookRecord } from '../crds/run-record-schema.ts';
import type { SidecarMetrics } from './metrics.ts';
import type { RunOutcome } from './modes/outcome.ts';
import type { RunRecorder } from './runs/recorder.ts';
import { pendingDelivery, rememberDeliveryBody, rememberDestination } from './runs/webhook-destination.ts';
import type { WebhookDeliverer } from './webhook/deliver.ts';
import { endpointForRecord, parseWebhookEndpoint } from './webhook/endpoint.ts';
import { buildWebhookBody } from './webhook/payload.ts';
import { WebhookSigner } from './webhook/sign.ts';

/** What a run call asked for: where to deliver, and how to sign. The secret lives only inside the signer. */
export interface WebhookRequest {
  endpoint: URL;
  signer: WebhookSigner | null;
}

/**
 * `secretHeader`: the `X-Webhook-Secret` values the caller sent, as header text is read (one character per
 * byte, latin-1). The signature is keyed with those bytes, as sent: what `secret.encode()` gives a receiver
 * that holds the same secret, whatever its characters.
 */
export function parseWebhookRequest(rawEndpoint: string, secretHeader: string | string[] | undefined): WebhookRequest {
  const endpoint = parseWebhookEndpoint(rawEndpoint);
  if (Array.isArray(secretHeader)) {
    throw new ProblemError(Problems.invalidHeader, 'X-Webhook-Secret is given more than once; give it once');
  }
  if (secretHeader === '') throw new ProblemError(Problems.invalidHeader, 'X-Webhook-Secret is empty; give a secret or leave the header out');
  return { endpoint, signer: secretHeader === undefined ? null : new WebhookSigner(Buffer.from(secretHeader, 'latin1')) };
}

/** The `X-Webhook-Secret` values in node:http's raw headers (`[name, value, ...]`): one, several, or none. */
export function webhookSecretSent(rawHeaders: readonly string[]): string | string[] | undefined {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === 'x-webhook-secret') values.push(rawHeaders[i + 1]!);
  }
  return values.length > 1 ? values : values[0];
}

export function pendingWebhookRecord(request: WebhookRequest): WebhookRecord {
  const webhook: WebhookRecord = { endpoint: endpointForRecord(request.endpoint), state: 'pending', attempts: 0, lastStatusCode: null, lastError: null };
  rememberDestination(webhook, request.endpoint.href, request.signer);
  return webhook;
}

export class WebhookForwarder {
  readonly #deliverer: WebhookDeliverer;
  readonly #recorder: RunRecorder;
  readonly #metrics: SidecarMetrics;
  readonly #logger: Logger;

  constructor(deliverer: WebhookDeliverer, recorder: RunRecorder, metrics: SidecarMetrics, logger: Logger) {
    this.#deliverer = deliverer;
    this.#recorder = recorder;
    this.#metrics = metrics;
    this.#logger = logger;
  }

  forward(record: RunRecord, request: WebhookRequest, outcome: RunOutcome): void {
    const completedAt = record.completedAt ? new Date(record.completedAt) : new Date();
    const common = { runId: record.id, statusCode: outcome.statusCode, runTimeMs: outcome.runTimeMs, completedAt };
    const body =
      outcome.success && outcome.resultJson !== null
        ? buildWebhookBody({ ...common, status: 'success', resultJson: outcome.resultJson })
        : buildWebhookBody({
            ...common,
            status: 'failure',
            error: outcome.error ?? { type: 'Error', message: `the run ended with status ${outcome.statusCode}` },
          });
    this.#deliver(record, request, body);
  }

  /**
   * Delivers what a previous process of this replica owed (sidecar/runs/lost-runs.ts), to the destination kept
   * beside the record: the body of a delivery it had started, when kept, else the failure of a run it left
   * unfinished (recorded `replica_lost` since). Signed when the store kept the call's secret (the results
   * shipper's pod-local file does); unsigned where it keeps none (SQLite, the RunLog's destinations), as a
   * receiver that checks signatures then refuses it. Returns false when nothing is owed: the webhook is settled,
   * or its destination was not kept.
   */
  forwardOwed(record: RunRecord): boolean {
    const owed = pendingDelivery(record.webhook);
    const endpoint = owed === null ? null : URL.parse(owed.destination);
    if (owed === null || endpoint === null) return false;
    const body =
      owed.body ??
      buildWebhookBody({
        runId: record.id,
        status: 'failure',
        statusCode: record.statusCode ?? 500,
        runTimeMs: record.runtimeMs,
        completedAt: record.completedAt ? new Date(record.completedAt) : new Date(),
        error: record.error ?? { type: 'ReplicaLost', message: 'the replica was lost before the run completed' },
      });
    this.#deliver(record, { endpoint, signer: owed.signer }, body);
    return true;
  }

  #deliver(record: RunRecord, request: WebhookRequest, body: string): void {
    const webhook = record.webhook;
    if (!webhook) throw new Error(`run ${record.id} forwards to a webhook but has no webhook record`);
    // Only a store that keeps bodies has the body remembered: others may hold the record for long.
    const keeping = this.#recorder.store.keepDelivery !== undefined;
    if (keeping) rememberDeliveryBody(webhook, body);
    void this.#deliverer
      .deliver({
        kept: keeping ? this.#kept(record) : undefined,
        runId: record.id,
        endpoint: request.endpoint,
        body,
        signer: request.signer,
        onAttempt: (report) => {
          this.#metrics.webhookAttempt(report.outcome, report.connectionWaitMs);
          Object.assign(webhook, report.progress);
          this.#recorder.touch(record);
        },
      })
      .then(
        (final) => {
          Object.assign(webhook, final);
          this.#recorder.touch(record);
          this.#metrics.webhookFinished(final.state);
          if (final.state === 'failed') {
            this.#logger.warn(
              { runId: record.id, endpoint: webhook.endpoint, attempts: final.attempts, lastStatusCode: final.lastStatusCode, lastError: final.lastError },
              'webhook delivery failed',
            );
          }
        },
        (err: unknown) => this.#logger.error({ err, runId: record.id }, 'webhook delivery crashed'),
      );
  }

  /**
   * Resolves once the store holds what a successor would need to send this delivery again (its state, body and
   * secret: RunStore.keepDelivery), so no attempt starts that a kill could leave unrecorded. Never rejects: a
   * store that cannot keep it still gets the delivery sent.
   */
  async #kept(record: RunRecord): Promise<void> {
    try {
      await this.#recorder.store.keepDelivery?.(record);
    } catch (err) {
      this.#logger.warn({ err, runId: record.id }, 'the webhook delivery could not be kept before its first attempt: if this sidecar is lost during it, it is not sent again');
    }
  }
}
