// What a cluster admin does after creating an App namespace: `runlet namespace enable NS`, through the command's
// own functions (cli/namespace-command.ts) with the admin's credential. Only where Runlet's tenant ClusterRoles
// are installed (install.yaml on the control-plane tiers); the in-memory tiers have none, and their API server
// authorizes nothing unless a test asks it to (test/kube's `rbac` option).
import type { KubeConfig } from '@kubernetes/client-node';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { resourcePath } from '../../kube/objects.ts';
import { TENANT_ROLE_SELECTOR, enableNamespace, enrolmentBindings } from '../../cli/namespace-command.ts';

/** Enrols `namespace` as an App namespace when the cluster has Runlet's tenant ClusterRoles; a no-op otherwise. */
export async function enrolNamespace(kubeConfig: KubeConfig, namespace: string): Promise<void> {
  const api = new KubeApi(kubeConfigCredentials(kubeConfig), { fieldManager: 'runlet-cli' });
  try {
    const roles = (await api.list<Parameters<typeof enrolmentBindings>[0][number]>(resourcePath({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole' }), { labelSelector: TENANT_ROLE_SELECTOR })).items;
    if (roles.length === 0) return;
    await enableNamespace(api, namespace, enrolmentBindings(roles, namespace), () => {});
  } finally {
    await api.close();
  }
}
