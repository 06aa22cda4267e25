// The durable record of an async call accepted while its app was at zero: a Secret in the app's namespace
// (the call carries the caller's token and maybe its webhook secret: not a ConfigMap's or a custom resource's
// business), written before the 202 is answered and deleted once a replica has accepted the call. A holder
// that restarts finds its records again (nothing lost); which holder replica hands a record over is settled by
// a claim written with the record's resourceVersion, so two replicas never both do.
import type { V1Secret } from '@kubernetes/client-node';
import type { KubeApi } from '../kube/client.ts';
import { isConflict, isNotFound } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';
import type { WholeCall } from './hold-proxy.ts';

export const HELD_CALL_LABEL = 'runlet.dev/held-call-for';
const CLAIMED_BY = 'runlet.dev/claimed-by';
const CLAIMED_AT = 'runlet.dev/claimed-at';

export interface HeldCall extends WholeCall {
  runId: string;
  namespace: string;
  appName: string;
  /** Epoch ms when the holder accepted it (its 202). */
  acceptedAt: number;
}

export type HeldRecord = V1Secret & KubeObject;

export function recordName(runId: string): string {
  return `runlet-held-${runId}`;
}

function secretsPath(namespace?: string): string {
  return namespace === undefined ? '/api/v1/secrets' : `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`;
}

export function renderRecord(call: HeldCall): HeldRecord {
  const { body, ...rest } = call;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'runlet.dev/held-call',
    metadata: { name: recordName(call.runId), namespace: call.namespace, labels: { [HELD_CALL_LABEL]: call.appName } },
    data: { call: Buffer.from(JSON.stringify(rest)).toString('base64'), body: body.toString('base64') },
  };
}

export function callOfRecord(record: HeldRecord): HeldCall {
  const fields = JSON.parse(Buffer.from(record.data?.call ?? '', 'base64').toString('utf8')) as Omit<HeldCall, 'body'>;
  return { ...fields, body: Buffer.from(record.data?.body ?? '', 'base64') };
}

export class HeldRecords {
  readonly #api: KubeApi;
  readonly #identity: string;
  readonly #staleClaimMs: number;
  readonly #now: () => number;

  constructor(options: { api: KubeApi; identity: string; staleClaimMs: number; now?: () => number }) {
    this.#api = options.api;
    this.#identity = options.identity;
    this.#staleClaimMs = options.staleClaimMs;
    this.#now = options.now ?? Date.now;
  }

  /** Stores the call, claimed by this holder; resolves once the API server has it. */
  async save(call: HeldCall): Promise<HeldRecord> {
    const record = renderRecord(call);
    record.metadata!.annotations = this.#claim();
    return this.#api.create(secretsPath(call.namespace), record);
  }

  /** Every record this holder may hand over: unclaimed, claimed by itself (before a restart), or a stale claim. */
  async claimable(): Promise<HeldRecord[]> {
    const list = await this.#api.list<HeldRecord>(secretsPath(), { labelSelector: HELD_CALL_LABEL });
    return list.items.filter((record) => this.#mayClaim(record));
  }

  /** Claims (or renews the claim on) the record; null when another holder holds it or it is gone. */
  async claim(record: HeldRecord): Promise<HeldRecord | null> {
    const path = `${secretsPath(record.metadata?.namespace)}/${encodeURIComponent(record.metadata!.name!)}`;
    try {
      return await this.#api.replace(path, { ...record, metadata: { ...record.metadata, annotations: { ...record.metadata?.annotations, ...this.#claim() } } });
    } catch (error) {
      if (isConflict(error) || isNotFound(error)) return null;
      throw error;
    }
  }

  /** The call is a replica's now. */
  async remove(record: HeldRecord): Promise<void> {
    await this.#api.delete(`${secretsPath(record.metadata?.namespace)}/${encodeURIComponent(record.metadata!.name!)}`).catch((error: unknown) => {
      if (!isNotFound(error)) throw error;
    });
  }

  #claim(): Record<string, string> {
    return { [CLAIMED_BY]: this.#identity, [CLAIMED_AT]: String(this.#now()) };
  }

  #mayClaim(record: HeldRecord): boolean {
    const annotations = record.metadata?.annotations ?? {};
    const by = annotations[CLAIMED_BY];
    const at = Number(annotations[CLAIMED_AT] ?? 0);
    return by === undefined || by === this.#identity || this.#now() - at > this.#staleClaimMs;
  }
}
