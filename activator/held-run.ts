// What a call held at zero is as a run, before any replica has recorded it: listed `pending` while it waits
// (hold-control.ts), recorded `cancelled` when a cancel drops it (hold-cancel.ts). Its function and webhook come
// from its request line, as the replica would have read them.
import type { RunMode, RunRecord, WebhookRecord } from '../crds/run-record-schema.ts';
import { endpointForRecord, parseWebhookEndpoint } from '../sidecar/webhook/endpoint.ts';
import { WebhookSigner } from '../sidecar/webhook/sign.ts';

/** What a held call is made of, whatever its mode: its request line, the headers kept, when it was taken. */
export interface HeldCallLine {
  runId: string;
  method: string;
  /** Path and query, as called. */
  url: string;
  /** Only `x-webhook-secret` is read here. */
  headers: Record<string, string>;
  /** Epoch ms when the holder took it. */
  acceptedAt: number;
}

/** A held call as a run, and where its webhook would go (null: none asked, or an endpoint a replica would refuse). */
export interface HeldRun {
  run: RunRecord;
  webhook: { endpoint: URL; signer: WebhookSigner | null } | null;
}

/** The call as a run not started yet: `pending`, on `holder` (the holder replica that has it, in `replica`). */
export function heldRun(call: HeldCallLine, mode: RunMode, projectId: string, appName: string, holder: string): HeldRun {
  const path = call.url.split('?', 1)[0]!;
  const raw = new URLSearchParams(call.url.slice(path.length + 1)).get('webhookEndpoint');
  let webhook: HeldRun['webhook'] = null;
  let webhookRecord: WebhookRecord | null = null;
  if (raw !== null) {
    const secret = call.headers['x-webhook-secret'];
    try {
      const endpoint = parseWebhookEndpoint(raw);
      webhook = { endpoint, signer: secret === undefined || secret === '' ? null : new WebhookSigner(Buffer.from(secret, 'latin1')) };
      webhookRecord = { endpoint: endpointForRecord(endpoint), state: 'pending', attempts: 0, lastStatusCode: null, lastError: null };
    } catch (error) {
      webhookRecord = { endpoint: raw.slice(0, 200), state: 'failed', attempts: 0, lastStatusCode: null, lastError: `not sent: ${(error as Error).message}` };
    }
  }
  const run: RunRecord = {
    id: call.runId,
    projectId,
    appName,
    functionName: path.slice(path.lastIndexOf('/') + 1),
    method: call.method,
    mode,
    async: mode === 'async',
    status: 'pending',
    statusCode: null,
    error: null,
    reason: null,
    createdAt: new Date(call.acceptedAt).toISOString(),
    startedAt: null,
    completedAt: null,
    queueTimeMs: null,
    runtimeMs: null,
    responseTimeMs: null,
    replica: holder,
    webhook: webhookRecord,
  };
  return { run, webhook };
}
