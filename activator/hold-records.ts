// The durable record of an async call accepted while its app was at zero, written before the 202 is answered and
// deleted once a replica has accepted the call. A holder that restarts finds its records again (nothing lost);
// which holder replica hands a record over is settled by a claim written with the record's resourceVersion, so
// two replicas never both do.
//
// Where and what (docs/scale-to-zero.md, "Held calls at rest"): a Secret in a namespace of the held calls' own
// (the chart's `<release namespace>-held`), where a namespaced Role grants the holder its Secrets — never a
// cluster-wide right on Secrets, nor the release namespace's, whose other Secrets (the results store's DSN) the
// right to list records would reach: a list cannot be limited to names. A Secret because the call's body and its webhook secret are the caller's data, and Secrets are what
// a cluster encrypts at rest. No owner reference can reach an App in another namespace, so each record carries
// its App's namespace and name in labels (its records are deleted when the App is), and an expiry (the holder's
// sweep drops it then). It holds no bearer token: the holder authenticated the caller when it took the call, and
// the record keeps that fact (`authenticatedProject`), signed with the App namespace's hand-over key together
// with the rest of the call, so that a record altered at rest is refused rather than handed over.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { KubeApi } from '../kube/client.ts';
import { isConflict, isNotFound } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import type { WholeCall } from './hold-proxy.ts';

/** The App (its name) a held call is for; with HELD_CALL_NAMESPACE_LABEL, which Apps' records these are. */
export const HELD_CALL_LABEL = 'runlet.dev/held-call-for';
export const HELD_CALL_NAMESPACE_LABEL = 'runlet.dev/held-call-namespace';
const CLAIMED_BY = 'runlet.dev/claimed-by';
const CLAIMED_AT = 'runlet.dev/claimed-at';
/** Epoch ms after which the record is dropped, handed over or not. */
const EXPIRES_AT = 'runlet.dev/expires-at';
const SECRET_TYPE = 'runlet.dev/held-call';

export interface HeldCall extends WholeCall {
  runId: string;
  namespace: string;
  appName: string;
  /** Epoch ms when the holder accepted it (its 202). */
  acceptedAt: number;
  /**
   * The project whose token the holder verified when it took the call; null when it authenticated nobody (the
   * App had auth off, or the holder runs without authentication): the replica then authenticates the call as
   * it comes, with no token.
   */
  authenticatedProject: string | null;
}

export type HeldRecord = V1Secret & KubeObject;

/** A record that is not what the holder wrote: not signed with its App namespace's key, or unreadable. */
export class AlteredRecordError extends Error {}

export function recordName(runId: string): string {
  return `runlet-held-${runId}`;
}

/** The signature of a record's call (its JSON, as stored) and body, under the App namespace's key. */
function signature(key: Uint8Array, callJson: string, body: Buffer): Buffer {
  return createHmac('sha256', key).update(callJson).update('\n').update(createHash('sha256').update(body).digest('hex')).digest();
}

export interface HeldRecordsOptions {
  api: KubeApi;
  /** Where the records live: the held calls' own namespace, where the holder's Role grants Secrets. */
  namespace: string;
  /** This holder replica, for claims. */
  identity: string;
  /** A claim not renewed for this long is taken over by another holder. */
  staleClaimMs: number;
  /** How long a record is kept at most: the sweep drops it then. */
  ttlMs: number;
  /** Each App namespace's hand-over key (holder-key.ts), which signs its records; rejects while it cannot be read. */
  keys: (namespace: string) => Promise<Uint8Array>;
  now?: () => number;
}

export class HeldRecords {
  readonly #api: KubeApi;
  readonly #namespace: string;
  readonly #identity: string;
  readonly #staleClaimMs: number;
  readonly #ttlMs: number;
  readonly #keys: (namespace: string) => Promise<Uint8Array>;
  readonly #now: () => number;

  constructor(options: HeldRecordsOptions) {
    this.#api = options.api;
    this.#namespace = options.namespace;
    this.#identity = options.identity;
    this.#staleClaimMs = options.staleClaimMs;
    this.#ttlMs = options.ttlMs;
    this.#keys = options.keys;
    this.#now = options.now ?? Date.now;
  }

  /** The record of `call`, as stored: its body and signed fields, no Authorization header whatever the call carried. */
  async render(call: HeldCall): Promise<HeldRecord> {
    const { body, headers, ...fields } = call;
    const { authorization: _dropped, ...kept } = headers;
    const callJson = JSON.stringify({ ...fields, headers: kept });
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      type: SECRET_TYPE,
      metadata: {
        name: recordName(call.runId),
        namespace: this.#namespace,
        labels: { [HELD_CALL_LABEL]: call.appName, [HELD_CALL_NAMESPACE_LABEL]: call.namespace },
        annotations: { [EXPIRES_AT]: String(call.acceptedAt + this.#ttlMs) },
      },
      data: {
        call: Buffer.from(callJson).toString('base64'),
        body: body.toString('base64'),
        signature: signature(await this.#keys(call.namespace), callJson, body).toString('base64'),
      },
    };
  }

  /**
   * The call a record holds; AlteredRecordError when it is not signed with its App namespace's key (any other
   * error, such as a key that cannot be read now, is not the record's fault: it is kept).
   */
  async callOf(record: HeldRecord): Promise<HeldCall> {
    const name = record.metadata?.name ?? '(unnamed)';
    const callJson = Buffer.from(record.data?.call ?? '', 'base64').toString('utf8');
    const body = Buffer.from(record.data?.body ?? '', 'base64');
    let fields: Omit<HeldCall, 'body'>;
    try {
      fields = JSON.parse(callJson) as Omit<HeldCall, 'body'>;
    } catch (error) {
      throw new AlteredRecordError(`the held call ${this.#namespace}/${name} is not a call: ${(error as Error).message}`, { cause: error });
    }
    const signed = Buffer.from(record.data?.signature ?? '', 'base64');
    const expected = signature(await this.#keys(String(fields.namespace)), callJson, body);
    if (signed.length !== expected.length || !timingSafeEqual(signed, expected)) {
      throw new AlteredRecordError(`the held call ${this.#namespace}/${name} is not signed with the key of namespace ${String(fields.namespace)}: changed at rest, or written by another holder key`);
    }
    return { ...fields, body };
  }

  /** Stores the call, claimed by this holder; resolves once the API server has it. */
  async save(call: HeldCall): Promise<HeldRecord> {
    const record = await this.render(call);
    record.metadata!.annotations = { ...record.metadata!.annotations, ...this.#claim() };
    return this.#api.create(this.#collection(), record).catch((error: unknown) => {
      // A namespace missing, or a Role not granting it, shows here first: say where it was to be kept.
      throw new Error(`recording the held async call ${call.runId} as a Secret in the namespace ${this.#namespace}: ${(error as Error).message}`, { cause: error });
    });
  }

  /** Every record, whoever holds it. */
  async all(): Promise<HeldRecord[]> {
    return (await this.#api.list<HeldRecord>(this.#collection(), { labelSelector: HELD_CALL_LABEL })).items;
  }

  /** The records of the App `namespace/appName`. */
  async ofApp(namespace: string, appName: string): Promise<HeldRecord[]> {
    const selector = `${HELD_CALL_LABEL}=${appName},${HELD_CALL_NAMESPACE_LABEL}=${namespace}`;
    return (await this.#api.list<HeldRecord>(this.#collection(), { labelSelector: selector })).items;
  }

  /** A record this holder may hand over: unclaimed, claimed by itself (before a restart), or a stale claim. */
  mayClaim(record: HeldRecord): boolean {
    const annotations = record.metadata?.annotations ?? {};
    const by = annotations[CLAIMED_BY];
    const at = Number(annotations[CLAIMED_AT] ?? 0);
    return by === undefined || by === this.#identity || this.#now() - at > this.#staleClaimMs;
  }

  /** Past its expiry (a record without one, written by hand, has none). */
  expired(record: HeldRecord): boolean {
    const at = Number(record.metadata?.annotations?.[EXPIRES_AT]);
    return Number.isFinite(at) && this.#now() > at;
  }

  /** Claims (or renews the claim on) the record; null when another holder holds it or it is gone. */
  async claim(record: HeldRecord): Promise<HeldRecord | null> {
    try {
      return await this.#api.replace(this.#path(record), { ...record, metadata: { ...record.metadata, annotations: { ...record.metadata?.annotations, ...this.#claim() } } });
    } catch (error) {
      if (isConflict(error) || isNotFound(error)) return null;
      throw error;
    }
  }

  /** The record of `runId`, if there is one. */
  async byRunId(runId: string): Promise<HeldRecord | null> {
    return this.#api.get<HeldRecord>(this.#collection().named(recordName(runId))).catch((error: unknown) => {
      if (isNotFound(error)) return null;
      throw error;
    });
  }

  /**
   * Deletes the record as it was read (its uid and resourceVersion as preconditions); false when it changed
   * meanwhile (a holder renewed its claim) or is gone.
   */
  async removeAsRead(record: HeldRecord): Promise<boolean> {
    try {
      await this.#api.delete(this.#path(record), { uid: record.metadata?.uid, resourceVersion: record.metadata?.resourceVersion });
      return true;
    } catch (error) {
      if (isNotFound(error) || isConflict(error)) return false;
      throw error;
    }
  }

  /** The call is a replica's now, or dropped. */
  async remove(record: HeldRecord): Promise<void> {
    await this.#api.delete(this.#path(record)).catch((error: unknown) => {
      if (!isNotFound(error)) throw error;
    });
  }

  #collection(): KubePath {
    return KubePath.of({ version: 'v1', namespace: this.#namespace, resource: 'secrets' });
  }

  #path(record: HeldRecord): KubePath {
    return this.#collection().named(record.metadata!.name!);
  }

  #claim(): Record<string, string> {
    return { [CLAIMED_BY]: this.#identity, [CLAIMED_AT]: String(this.#now()) };
  }
}
