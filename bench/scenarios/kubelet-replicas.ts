// The replicas of an App as the process kubelet runs them (test/kubelet): which are ready to serve now, by the
// kubelet's own probes — the moment a replica's start ends, before its status reaches the API server.
import type { PodRunner } from '../../test/kubelet/index.ts';
import type { LocalCluster } from '../../test/operator/local-cluster.ts';

/** The namespace's pods whose sidecar and app containers are both ready (and which are not stopping). */
export function readyReplicas(cluster: LocalCluster, namespace: string): PodRunner[] {
  return cluster.kubelet.pods({ namespace }).filter((pod) => {
    if (pod.terminating) return false;
    try {
      return pod.container('sidecar').ready && pod.container('app').ready;
    } catch {
      // Its containers are not created yet.
      return false;
    }
  });
}
