// What a killed predecessor of this replica left, settled once as the replica starts, by every store that reads
// its runs back (the SQLite file, the results shipper's journal in the pod's emptyDir): its runs still `pending`
// or `running` are failed `replica_lost` (nothing will ever complete them), and each webhook it owed is handed to
// the deliverer — a lost run's failure, or the body of a finished run's delivery the kill interrupted when the
// store kept it. A delivery that cannot be sent again (no body kept) is recorded failed rather than sent without.
import type { Logger } from 'pino';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { markAbandoned } from './recorder.ts';
import { pendingDelivery } from './webhook-destination.ts';

export interface LostRunsOwner {
  /** Who wrote the runs, named in what they are failed with (`the sidecar`, `runlet dev`). */
  processName: string;
  /** Where the store keeps them, for the log. */
  where: string;
  logger: Logger;
  /** Saves a record whose state this changed. */
  save(record: RunRecord): void;
}

/** Fails the runs among `runs` left `pending` or `running` (`replica_lost`), saves them, and returns them. */
export function failUnfinished(runs: readonly RunRecord[], owner: LostRunsOwner): RunRecord[] {
  const abandoned = runs.filter((record) => record.status === 'pending' || record.status === 'running');
  for (const record of abandoned) {
    markAbandoned(record, 'replica_lost', `${owner.processName} stopped before the run completed (the process was killed)`);
    owner.save(record);
  }
  if (abandoned.length > 0) {
    owner.logger.warn({ runs: abandoned.length, store: owner.where }, 'runs a killed predecessor left unfinished are recorded as failures (replica_lost)');
  }
  return abandoned;
}

/**
 * Hands each webhook among `runs` still pending to `deliver`: a `replica_lost` run's failure, or a finished run's
 * kept body. One that cannot be sent (no body kept, or `deliver` found no destination) is recorded failed.
 */
export function deliverOwed(runs: readonly RunRecord[], owner: LostRunsOwner, deliver: (record: RunRecord) => boolean): void {
  for (const record of runs) {
    if (record.webhook === null || record.webhook.state !== 'pending') continue;
    const resendable = record.reason === 'replica_lost' || pendingDelivery(record.webhook)?.body !== undefined;
    if (resendable && deliver(record)) continue;
    Object.assign(record.webhook, { state: 'failed', lastError: `not delivered: ${owner.processName} stopped while delivering it` });
    owner.save(record);
  }
}
