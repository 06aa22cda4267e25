// Pods and RunLogs for the operator's tests, written as the kubelet and the sidecars write them, without
// running anything: a pod is an object with a phase, a RunLog an object with runs and counts in its status.
import type { RunRecord } from '../../crds/run-record-schema.ts';
import type { RunLogCounts, RunLogLoad } from '../../crds/runlog-schema.ts';
import type { RunLogObject } from '../../management/runlog-source.ts';
import type { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { kubePathOf } from './kube-path.ts';

const GROUP_PATH = '/apis/runlet.dev/v1alpha1';

export const runLogPath = (namespace: string, name: string) => `${GROUP_PATH}/namespaces/${namespace}/runlogs/${name}`;
export const podPath = (namespace: string, name: string) => `/api/v1/namespaces/${namespace}/pods/${name}`;

/** A pod of `app` (labelled as the operator's Deployment labels them), in phase `phase`. */
export async function createPod(api: KubeApi, namespace: string, name: string, app: string, phase = 'Running'): Promise<void> {
  await api.create(kubePathOf(`/api/v1/namespaces/${namespace}/pods`), {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { 'runlet.dev/app': app } },
    spec: { containers: [{ name: 'app', image: 'registry.test/app:1' }] },
  } as KubeObject);
  await setPodPhase(api, namespace, name, phase);
}

export async function setPodPhase(api: KubeApi, namespace: string, name: string, phase: string): Promise<void> {
  await api.mergePatch(kubePathOf(`${podPath(namespace, name)}/status`), { status: { phase } });
}

/** Sets the pod's Ready condition, as the kubelet does after its readiness probes. */
export async function setPodReady(api: KubeApi, namespace: string, name: string, ready: boolean): Promise<void> {
  await api.mergePatch(kubePathOf(`${podPath(namespace, name)}/status`), { status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] } });
}

/** Counts as the sidecar keeps them for `runs` alone (a fresh replica). */
export function countsOf(runs: RunRecord[]): RunLogCounts {
  const counts = { total: runs.length, success: 0, failure: 0, inFlight: 0 };
  for (const run of runs) {
    if (run.status === 'success') counts.success += 1;
    else if (run.status === 'failure') counts.failure += 1;
    else if (run.status === 'pending' || run.status === 'running') counts.inFlight += 1;
  }
  return counts;
}

/** Creates the RunLog named after a pod (if missing) and writes `runs` (newest first), `counts` and `load` into its status. */
export async function writeRunLog(
  api: KubeApi,
  namespace: string,
  name: string,
  app: string,
  runs: RunRecord[],
  counts: RunLogCounts = countsOf(runs),
  load?: RunLogLoad,
): Promise<void> {
  if ((await api.find(kubePathOf(runLogPath(namespace, name)))) === undefined) {
    await api.create(kubePathOf(`${GROUP_PATH}/namespaces/${namespace}/runlogs`), {
      apiVersion: 'runlet.dev/v1alpha1',
      kind: 'RunLog',
      metadata: { name, labels: { 'runlet.dev/app': app } },
      spec: { appName: app },
    } as KubeObject);
  }
  const newestFirst = [...runs].sort((a, b) => (a.id < b.id ? 1 : -1));
  // A PUT: a merge patch would lose the records' nulls, as on a real API server.
  const current = await api.get<KubeObject>(kubePathOf(runLogPath(namespace, name)));
  await api.replace(kubePathOf(`${runLogPath(namespace, name)}/status`), { ...current, status: load === undefined ? { runs: newestFirst, counts } : { runs: newestFirst, counts, load } });
}

export async function readRunLog(api: KubeApi, namespace: string, name: string): Promise<RunLogObject | undefined> {
  return api.find<RunLogObject>(kubePathOf(runLogPath(namespace, name)));
}
