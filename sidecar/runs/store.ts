import type { RunRecord } from '../../crds/run-record-schema.ts';

/**
 * Where the sidecar writes run records. Implementations batch: a record saved several times before a flush
 * is written once, in its latest state (the store keeps the reference and serialises it when it writes).
 */
export interface RunStore {
  /** Upserts the record in a coming batch; never blocks the caller (sync and stream runs). */
  save(record: RunRecord): void;
  /**
   * Upserts the record and resolves once it is durably committed — an async run is answered `202` only
   * after this. Concurrent calls share one write. Rejects when the record could not be made durable.
   */
  saveDurably(record: RunRecord): Promise<void>;
  /**
   * True when the store holds a record with this id (saved, written or about to be): a held call's run id is
   * taken only when it is not (sidecar/auth/held-run-claims.ts), so a hand-over never overwrites a record.
   */
  has(id: string): boolean;
  /**
   * Hands over, now and as they are found, the runs a previous process of this replica lost whose webhook is
   * still owed (recorded `failure`, reason `replica_lost`, or finished with the body of their interrupted delivery
   * kept), their destinations, signers and bodies remembered beside them (webhook-destination.ts): `deliver` sends
   * each, and says whether it could (false: no destination kept). Absent where the store keeps no destinations,
   * or finds its lost runs otherwise.
   */
  deliverOwedWebhooks?(deliver: (record: RunRecord) => boolean): void;
  /**
   * Makes a finished run's webhook delivery (its record as it is now, and the destination, signer and body
   * remembered beside it) as durable as the store keeps runs, before its first attempt: a process killed during
   * the delivery leaves its successor what to send again. Absent where the store keeps no bodies.
   */
  keepDelivery?(record: RunRecord): Promise<void>;
  /** Resolves once everything saved so far is committed. */
  flush(): Promise<void>;
  close(): Promise<void>;
}
