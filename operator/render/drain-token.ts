// An App's drain token, as its Deployment carries it: in the sidecar's environment (RUNLET_DRAIN_TOKEN) and in
// the path of the app container's preStop hook, the one request that may drain a replica
// (sidecar/drain-token.ts). A pod template holds only literal hook paths, so whoever may read the App's
// Deployments or Pods may read the token: the namespace's readers, who could see its runs anyway. What it keeps
// out is every other pod of the cluster, which reaches the admin port (the kubelet's probes and Prometheus
// need it on the pod IP). One random token per App, kept for the App's life: the operator reads it back from
// the live Deployment, so reconciles (and a new leader) render the same template and cause no rollout.
import type { V1PodSpec } from '@kubernetes/client-node';
import { DRAIN_TOKEN_ENV } from '../../sidecar/drain-token.ts';
import { SIDECAR_CONTAINER } from './names.ts';

/** The drain token a rendered Deployment carries (its sidecar's env), if any. */
export function drainTokenOf(deployment: { spec?: { template?: { spec?: V1PodSpec } } }): string | undefined {
  return drainTokenIn(deployment.spec?.template?.spec);
}

/** The drain token a pod's sidecar was started with, if any: the one its admin port asks for (a cancel's too). */
export function drainTokenIn(pod: V1PodSpec | undefined): string | undefined {
  const sidecar = [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])].find((container) => container.name === SIDECAR_CONTAINER);
  const value = sidecar?.env?.find((variable) => variable.name === DRAIN_TOKEN_ENV)?.value;
  return value === undefined || value === '' ? undefined : value;
}
