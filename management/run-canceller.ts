// What the management API's cancel operation stops runs through: in `runlet dev`, the one replica's runs in
// flight (sidecar/active-runs.ts); in a cluster, the replica that runs the call, through its admin port
// (operator/run-cancel.ts).
import type { FailureReason, RunRecord } from '../crds/run-record-schema.ts';

/** A run in flight asked to stop: its record as it stands, and why it is stopping (another reason than a cancel: it was ending already). */
export interface StoppingRun {
  record: RunRecord;
  stoppedFor: FailureReason;
}

export interface RunCanceller {
  /**
   * Asks the run to stop when it is in flight; null when it is not (finished, or never there). May throw a
   * ProblemError when it cannot tell (a cluster's replica unreachable).
   */
  cancel(projectId: string, appName: string, runId: string): StoppingRun | null | Promise<StoppingRun | null>;
}
