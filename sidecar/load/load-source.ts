// What a run store that reports the replica's load is given: the load as last measured, and word when it
// changes. The RunLog store writes it into its RunLog's status; stores of one-replica modes take none.
import type { RunLogLoad } from '../../crds/runlog-schema.ts';

export interface ReplicaLoadSource {
  /** The load as last measured: the same object until it changes, so a reader compares references. */
  current(): RunLogLoad;
  /** `listener` is called after each change of `current()` (at most once a sampling interval). */
  onChange(listener: () => void): void;
}
