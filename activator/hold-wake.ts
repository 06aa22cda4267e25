// Waking an App at zero: its Deployment's scale subresource from 0 to 1 replica. Idempotent and safe from any
// holder replica at once: a replica count already above zero is left alone (the scaler's, or another wake's),
// and a write lost to a concurrent one (409 on the resourceVersion) is re-read rather than repeated blindly.
import type { KubeApi } from '../kube/client.ts';
import { isConflict } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';

interface Scale extends KubeObject {
  spec?: { replicas?: number };
}

const ATTEMPTS = 5;

/** True when this call raised the replicas, false when they were above zero already. */
export async function wakeDeployment(api: KubeApi, namespace: string, deployment: string): Promise<boolean> {
  const path = `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/deployments/${encodeURIComponent(deployment)}/scale`;
  for (let attempt = 1; ; attempt += 1) {
    const scale = await api.get<Scale>(path);
    if ((scale.spec?.replicas ?? 0) > 0) return false;
    try {
      await api.replace(path, { ...scale, spec: { ...scale.spec, replicas: 1 } });
      return true;
    } catch (error) {
      if (!isConflict(error) || attempt === ATTEMPTS) throw new Error(`waking ${namespace}/${deployment} (scale 0 → 1): ${(error as Error).message}`, { cause: error });
    }
  }
}
