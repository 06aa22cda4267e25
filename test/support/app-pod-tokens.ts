// App pods as the operator's Deployment makes them (labelled runlet.dev/app, running as the sidecar's
// ServiceAccount), and the token the kubelet would project into their sidecar for the results collector: a
// TokenRequest bound to the pod, for the collector's audience, from the in-memory API server (test/kube), which
// reviews it as a real one does (the pod's name and uid in the user's extra; invalid once the pod is gone).
import type { KubeApi } from '../../kube/client.ts';
import { KubeApiError } from '../../kube/errors.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { RESULTS_TOKEN_EXPIRATION_SECONDS, SIDECAR_SERVICE_ACCOUNT } from '../../operator/render/names.ts';
import { RESULTS_TOKEN_AUDIENCE } from '../../results/results-token.ts';
import { waitFor } from './wait.ts';
import { kubePathOf } from './kube-path.ts';

export interface PodToken {
  token: string;
  uid: string;
}

/** Creates the pod (labelled as App `app`'s unless `app` is null, running as `serviceAccount`); resolves with its uid. */
export async function createAppPod(api: KubeApi, namespace: string, name: string, app: string | null, serviceAccount = SIDECAR_SERVICE_ACCOUNT): Promise<string> {
  const pod = await api.create(kubePathOf(`/api/v1/namespaces/${namespace}/pods`), {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, ...(app === null ? {} : { labels: { 'runlet.dev/app': app } }) },
    spec: { serviceAccountName: serviceAccount, containers: [{ name: 'sidecar', image: 'registry.test/runlet:1' }] },
  } as KubeObject);
  return pod.metadata!.uid!;
}

/** A token of the pod's ServiceAccount bound to the pod, as the kubelet asks for the projected volume (waits for the account). */
export async function podToken(
  api: KubeApi,
  namespace: string,
  pod: string,
  options: { serviceAccount?: string; audience?: string; expirationSeconds?: number; boundPod?: boolean } = {},
): Promise<string> {
  const current = await api.get(kubePathOf(`/api/v1/namespaces/${namespace}/pods/${pod}`));
  const serviceAccount = options.serviceAccount ?? SIDECAR_SERVICE_ACCOUNT;
  const body = {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: {
      audiences: [options.audience ?? RESULTS_TOKEN_AUDIENCE],
      expirationSeconds: options.expirationSeconds ?? RESULTS_TOKEN_EXPIRATION_SECONDS,
      ...(options.boundPod === false ? {} : { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod, uid: current.metadata!.uid } }),
    },
  };
  return waitFor(
    async () => {
      try {
        const answer = (await api.create(kubePathOf(`/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`), body as KubeObject)) as KubeObject & { status?: { token?: string } };
        return answer.status?.token;
      } catch (error) {
        // The ServiceAccount follows the namespace's first App (the operator makes it).
        if (error instanceof KubeApiError && error.status === 404) return undefined;
        throw error;
      }
    },
    { what: `a token of ${namespace}/${serviceAccount} bound to pod ${pod}`, timeoutMs: 30_000 },
  );
}
