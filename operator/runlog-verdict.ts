// What becomes of a RunLog, judged from what the operator knows: whether its pod still runs, the runs it
// holds, and its App's retention. Pure, so that every case is a unit test; the janitor (runlog-janitor.ts)
// gathers the facts and carries the verdict out.
//
// A pod "runs" until it is gone from the API server or has ended (phase Failed or Succeeded). A pod being
// deleted still runs: its sidecar is draining, finishing its runs and writing them down.
import type { ImagePullFailure } from './image-pull.ts';
import type { RunLog } from '../crds/runlog-schema.ts';
import type { KubeObject, ObjectMeta } from '../kube/objects.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { HELD_RUNS_LABEL } from './held-runs-log.ts';
import { isUnfinished } from './replica-lost.ts';

/** What the operator keeps of a container's status: whether, and how, the kubelet restarted it (container-restarts.ts). */
export interface ContainerStatusView {
  name: string;
  restartCount: number;
  lastTerminated?: { exitCode?: number; signal?: number; reason?: string; message?: string };
}

/** What the operator keeps of a pod: its identity, its phase, its Ready condition (for the load), its containers' restarts. */
export interface PodObject extends KubeObject {
  /** `deletionTimestamp` (RFC 3339): the pod is ending. */
  metadata?: ObjectMeta & { deletionTimestamp?: string };
  /** `podIP`: where its sidecar's admin port is reached (a cancel: operator/run-cancel.ts). */
  status?: { phase?: string; podIP?: string; conditions?: { type: string; status: string }[]; containerStatuses?: ContainerStatusView[] };
  /** A container of it waiting for an image the kubelet cannot pull (image-pull.ts), for the App's status. */
  imagePull?: ImagePullFailure;
}

export type Verdict =
  /** Its pod runs: the sidecar owns the RunLog. */
  | { action: 'keep'; why: 'pod-runs' }
  /** Its pod is gone, its history is kept until `until`. */
  | { action: 'keep'; why: 'retained'; until: Date }
  /** Its pod is gone with runs in flight (or webhooks owed): they can only be failures now. */
  | { action: 'close-runs'; runs: number }
  /** Its pod is gone and it was last written longer ago than the retention. */
  | { action: 'delete'; lastWrite: Date };

export interface RunLogFacts {
  /** The pod the RunLog is named after (same namespace), if the API server has it. */
  pod: PodObject | undefined;
  /** The App's `spec.runs.retention`, in seconds. */
  retentionSeconds: number;
  now: Date;
}

/** `App.spec.runs.retention` when the App does not say (or is gone): the CRD's default, a day. */
export const DEFAULT_RETENTION_SECONDS = 86_400;

const ENDED_PHASES = new Set(['Failed', 'Succeeded']);

export function podRuns(pod: PodObject | undefined): boolean {
  return pod !== undefined && !ENDED_PHASES.has(pod.status?.phase ?? '');
}

/**
 * How long the webhook of a cancelled held run may stay pending in its App's RunLog of held runs, which no pod
 * writes: the operator replica that cancelled it is delivering it (three attempts, well within a minute). Past
 * this, that replica went away before it recorded the outcome.
 */
export const HELD_RUN_DELIVERY_GRACE_MS = 10 * 60_000;

export function judgeRunLog(runLog: RunLog & KubeObject, facts: RunLogFacts): Verdict {
  if (podRuns(facts.pod)) return { action: 'keep', why: 'pod-runs' };
  const held = runLog.metadata?.labels?.[HELD_RUNS_LABEL] === 'true';
  const owed = (run: RunRecord) => isUnfinished(run) && (!held || facts.now.getTime() - Date.parse(run.completedAt ?? run.createdAt) > HELD_RUN_DELIVERY_GRACE_MS);
  const unfinished = (runLog.status?.runs ?? []).filter(owed).length;
  if (unfinished > 0) return { action: 'close-runs', runs: unfinished };
  const lastWrite = lastWriteTime(runLog);
  const until = new Date(lastWrite.getTime() + facts.retentionSeconds * 1000);
  return until.getTime() <= facts.now.getTime() ? { action: 'delete', lastWrite } : { action: 'keep', why: 'retained', until };
}

/**
 * When the RunLog was last written. The status carries no write time, but every write changes a run (a new
 * run, one starting or ending — also the operator marking runs lost): the latest of its runs' times. A RunLog
 * without runs counts from its creation.
 */
export function lastWriteTime(runLog: RunLog & KubeObject): Date {
  let latest = Date.parse(runLog.metadata?.creationTimestamp ?? '') || 0;
  for (const run of runLog.status?.runs ?? []) {
    for (const time of [run.createdAt, run.startedAt, run.completedAt]) {
      const parsed = time === null ? NaN : Date.parse(time);
      if (parsed > latest) latest = parsed;
    }
  }
  return new Date(latest);
}
