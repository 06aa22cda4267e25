// The sidecar's identity in an app namespace, shared by every App there: a ServiceAccount whose Role lets it
// write RunLogs and read Apps (a RunLog is owned by its App: the sidecar needs the App's uid), nothing else. No owner reference: deleting one App must not take it from the others.
import type { V1Role, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import { APP_PLURAL, RUNLET_GROUP, RUNLOG_PLURAL } from '../../crds/api-group.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from './labels.ts';
import { SIDECAR_ROLE, SIDECAR_SERVICE_ACCOUNT } from './names.ts';

export type SidecarRbac = [V1ServiceAccount, V1Role, V1RoleBinding];

export function renderSidecarRbac(namespace: string): SidecarRbac {
  const metadata = (name: string) => ({
    name,
    namespace,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY, 'app.kubernetes.io/component': 'sidecar' },
  });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: metadata(SIDECAR_SERVICE_ACCOUNT) },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: metadata(SIDECAR_ROLE),
      rules: [
        {
          apiGroups: [RUNLET_GROUP],
          resources: [RUNLOG_PLURAL, `${RUNLOG_PLURAL}/status`],
          verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'],
        },
        { apiGroups: [RUNLET_GROUP], resources: [APP_PLURAL], verbs: ['get'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: metadata(SIDECAR_ROLE),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: SIDECAR_ROLE },
      subjects: [{ kind: 'ServiceAccount', name: SIDECAR_SERVICE_ACCOUNT, namespace }],
    },
  ];
}
