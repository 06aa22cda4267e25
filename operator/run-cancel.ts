// Cancelling a run in a cluster (the management API's `POST .../runs/{run_id}/cancel`, on every operator
// replica): the run is stopped where it runs, by the sidecar of its pod, through that pod's admin port, signed
// with the namespace's admin key (sidecar/admin-cancel.ts, admin-keys.ts), which a sidecar of another namespace
// does not take.
//
//   run record (any RunSource) says pending/running on replica R ─▶ R's pod (the Pod watch: IP) ─▶ signed POST
//   no record yet (written about a second after a run begins) and a recent run id ─▶ every running pod of the App
//   an async call held at zero (with a holder) ─▶ its held record deleted: it never starts (hold-cancel.ts)
//
// A run is answered by the first pod that has it in flight; a pod that cannot be asked makes the cancel fail
// (503 replica-unreachable), never answer as if the run had finished.
import type { Logger } from 'pino';
import { APP_LABEL } from '../crds/api-group.ts';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { RunCanceller, StoppingRun } from '../management/run-canceller.ts';
import type { RunSource } from '../management/run-source.ts';
import { ADMIN_SIGNATURE_HEADER, adminCancelPath, signAdminRequest, type AdminCancelAnswer } from '../sidecar/admin-cancel.ts';
import { SIDECAR_ADMIN_PORT } from './render/names.ts';
import type { ReplicaAddress } from './replica-address.ts';
import { podRuns, type PodObject } from './runlog-verdict.ts';

/** How long a replica may take to answer a cancel: it answers at once (the run stops afterwards). */
const ASK_TIMEOUT_MS = 5_000;
/**
 * How young a run id (a UUID v7, which carries its creation time) must be for a cancel that finds no record of
 * it to ask every replica of the App: its record reaches the RunLog about a second after it begins, later while
 * the API server is slow or unreachable (then sync runs' records wait in the sidecar). Older ids without a
 * record name no run: 404 without asking anyone.
 */
const UNRECORDED_WINDOW_MS = 120_000;
const RETRY_AFTER_SECONDS = '2';

export interface ClusterCancellerOptions {
  /** Where the run's record is read: its status, and the replica (pod) that runs it. */
  runs: Pick<RunSource, 'getRun'>;
  /** The Pod watch's cache. */
  pods: { get(namespace: string, name: string): PodObject | undefined; list(): PodObject[] };
  /**
   * With a holder: drops an async call held at zero for this run id (activator/hold-cancel.ts); resolves to
   * what the cancel answers, or null when none is held.
   */
  cancelHeld?: (projectId: string, appName: string, runId: string) => Promise<StoppingRun | null>;
  /** The key a cancel to the sidecars of `namespace` is signed with (admin-keys.ts); undefined: it has none yet. */
  signingKey(namespace: string): Promise<string | undefined>;
  /** Where a pod's admin port is reached. Default: its pod IP, port 8001 (the test kubelet remaps). */
  adminAddress?: (pod: PodObject) => ReplicaAddress;
  logger: Logger;
  /** Epoch ms, for the age of run ids. Default `Date.now`. */
  now?: () => number;
}

function podAdminAddress(pod: PodObject): ReplicaAddress {
  return { host: pod.status!.podIP!, port: SIDECAR_ADMIN_PORT };
}

type Asked = { outcome: 'stopping'; stopping: StoppingRun } | { outcome: 'not-here' } | { outcome: 'unreachable'; why: string };

export function clusterRunCanceller(options: ClusterCancellerOptions): RunCanceller {
  const { runs, pods, logger } = options;
  const adminAddress = options.adminAddress ?? podAdminAddress;
  const now = options.now ?? Date.now;

  async function ask(pod: PodObject, runId: string): Promise<Asked> {
    const name = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    const { host, port } = adminAddress(pod);
    const path = adminCancelPath(runId);
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`;
    try {
      const key = await options.signingKey(pod.metadata!.namespace!);
      if (key === undefined) return { outcome: 'unreachable', why: `namespace ${pod.metadata?.namespace} has no admin key yet, so its pods take no cancel` };
      const headers = { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(key, 'POST', path) };
      const answer = await fetch(url, { method: 'POST', headers, signal: AbortSignal.timeout(ASK_TIMEOUT_MS) });
      const text = await answer.text();
      if (answer.status === 202) {
        const { record, stoppedFor } = JSON.parse(text) as AdminCancelAnswer;
        return { outcome: 'stopping', stopping: { record, stoppedFor } };
      }
      if (answer.status === 404) return { outcome: 'not-here' };
      return { outcome: 'unreachable', why: `pod ${name} answered ${answer.status}: ${text.slice(0, 200)}` };
    } catch (error) {
      return { outcome: 'unreachable', why: `pod ${name} could not be asked: ${(error as Error).message}` };
    }
  }

  /** The App's pods that may run calls now: not ended, with an address. */
  function runningPods(namespace: string, appName: string): PodObject[] {
    return pods.list().filter((pod) => pod.metadata?.namespace === namespace && pod.metadata.labels?.[APP_LABEL] === appName && podRuns(pod) && pod.status?.podIP !== undefined);
  }

  return {
    async cancel(projectId, appName, runId) {
      const record = await runs.getRun(projectId, appName, runId);
      let candidates: PodObject[];
      if (record !== undefined) {
        if (record.status !== 'pending' && record.status !== 'running') return null;
        const pod = pods.get(projectId, record.replica);
        // Its pod is gone: the RunLog janitor records the run `replica_lost`; nothing runs it to stop.
        if (pod === undefined || !podRuns(pod) || pod.status?.podIP === undefined) return null;
        candidates = [pod];
      } else {
        const held = (await options.cancelHeld?.(projectId, appName, runId)) ?? null;
        // A call a replica takes is recorded there before its held record is deleted: ask the replicas all the same.
        const createdMs = runIdTime(runId);
        const recent = createdMs !== undefined && now() - createdMs <= UNRECORDED_WINDOW_MS;
        candidates = held !== null || recent ? runningPods(projectId, appName) : [];
        if (held !== null) {
          const taken = (await Promise.all(candidates.map((pod) => ask(pod, runId)))).find((answer) => answer.outcome === 'stopping');
          return taken?.stopping ?? held;
        }
        if (candidates.length === 0) return null;
      }
      const asked = await Promise.all(candidates.map((pod) => ask(pod, runId)));
      const found = asked.find((answer) => answer.outcome === 'stopping');
      if (found !== undefined) return found.stopping;
      const unreachable = asked.flatMap((answer) => (answer.outcome === 'unreachable' ? [answer.why] : []));
      if (unreachable.length === 0) return null;
      logger.warn({ runId, app: `${projectId}/${appName}`, unreachable }, 'management API: a cancel could not reach the replica that may run it');
      throw new ProblemError(Problems.replicaUnreachable, `run ${runId} may be running on a replica that could not be asked to cancel it (${unreachable.join('; ')}); retry shortly`, {
        headers: { 'retry-after': RETRY_AFTER_SECONDS },
      });
    },
  };
}

/** The creation time a UUID v7 carries (its first 48 bits, epoch ms); undefined for anything else. */
function runIdTime(runId: string): number | undefined {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(runId)) return undefined;
  return Number.parseInt(runId.slice(0, 8) + runId.slice(9, 13), 16);
}
