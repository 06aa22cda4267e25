// `runlet namespace enable|disable NS`: a cluster admin makes NS an App namespace (or stops it being one). The
// operator and the activator may write only in App namespaces: there, a RoleBinding of each of their tenant
// ClusterRoles grants it (charts/runlet/README.md, "App namespaces"). This applies those RoleBindings with the
// admin's own kubeconfig — the operator cannot, since that would need the cluster-wide right to write
// RoleBindings. It finds the roles in the cluster (label runlet.dev/tenant-role), so it needs no release name.
import type { V1ClusterRole, V1RoleBinding } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { KubeApi } from '../kube/client.ts';
import { KubeApiError, isNotFound } from '../kube/errors.ts';
import { kubeConfigCredentials } from '../kube/kubeconfig.ts';
import { resourcePath, type KubeObject } from '../kube/objects.ts';
import { ENROLMENT_LABEL } from '../operator/namespace-enrolment.ts';
import { parseCommandArgs } from './arguments.ts';
import { CliError } from './cli-error.ts';
import { currentKubeConfig } from './current-kube-config.ts';

export const NAMESPACE_USAGE = `Usage: runlet namespace enable NS [--dry-run]
       runlet namespace disable NS [--dry-run]

enable   makes NS an App namespace of the Runlet installed in the current kube context: a RoleBinding there of
         each of its tenant ClusterRoles (label runlet.dev/tenant-role) to its component's ServiceAccount, so
         that the operator and the activator may write in NS, and only in the namespaces so enrolled.
disable  deletes those RoleBindings: Runlet then writes nothing in NS (its Apps there say so in their status).

Run with a cluster admin's kubeconfig (one that may bind those ClusterRoles in NS). kube-system, kube-public,
kube-node-lease, Runlet's own namespace and its held calls' namespace are refused.

Options:
  --dry-run   print the RoleBindings (YAML, for kubectl apply -f - or a GitOps repository) and change nothing`;

/** The label and annotations the chart puts on a tenant ClusterRole (templates/operator-rbac.yaml, activator.yaml). */
export const TENANT_ROLE_SELECTOR = 'runlet.dev/tenant-role=true';
const SERVICE_ACCOUNT_ANNOTATION = 'runlet.dev/service-account';
const NEVER_ENROLLED_ANNOTATION = 'runlet.dev/never-enrolled';
/** Refused whatever the roles say: Kubernetes' own namespaces. */
const KUBERNETES_NAMESPACES = ['kube-system', 'kube-public', 'kube-node-lease'];
const FIELD_MANAGER = 'runlet-cli';
const RBAC_VERSION = 'rbac.authorization.k8s.io/v1';

type TenantRole = V1ClusterRole & KubeObject;
type EnrolmentBinding = V1RoleBinding & KubeObject & { apiVersion: string; kind: 'RoleBinding'; metadata: { name: string; namespace: string } };

export async function runNamespaceCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { 'dry-run': { type: 'boolean', default: false } }, NAMESPACE_USAGE);
  const [action, namespace, ...extra] = positionals;
  if ((action !== 'enable' && action !== 'disable') || namespace === undefined || extra.length > 0) {
    throw new CliError(`runlet namespace takes enable or disable and one namespace\n\n${NAMESPACE_USAGE}`, 2);
  }
  const api = new KubeApi(kubeConfigCredentials(currentKubeConfig()), { fieldManager: FIELD_MANAGER, requestTimeoutMs: 30_000 });
  try {
    const bindings = enrolmentBindings(await tenantRoles(api), namespace);
    if (values['dry-run']) {
      process.stdout.write(bindings.map((binding) => stringify(binding)).join('---\n'));
      return 0;
    }
    if (action === 'enable') await enableNamespace(api, namespace, bindings);
    else await disableNamespace(api, namespace, bindings);
    return 0;
  } catch (error) {
    throw explained(error, namespace);
  } finally {
    await api.close();
  }
}

/** The tenant ClusterRoles of the Runlet installed in the cluster. */
export async function tenantRoles(api: KubeApi): Promise<TenantRole[]> {
  const roles = (await api.list<TenantRole>(resourcePath({ apiVersion: RBAC_VERSION, kind: 'ClusterRole' }), { labelSelector: TENANT_ROLE_SELECTOR })).items;
  if (roles.length === 0) {
    throw new CliError(`no Runlet tenant ClusterRoles (label ${TENANT_ROLE_SELECTOR}) in this cluster: install Runlet first (helm install runlet charts/runlet -n runlet-system --create-namespace, or kubectl apply -f install.yaml)`);
  }
  return roles;
}

/**
 * The RoleBindings that enrol `namespace`: one per tenant ClusterRole, named as it, binding it to the
 * ServiceAccount its annotation names. Refuses the namespaces no Runlet may write in.
 */
export function enrolmentBindings(roles: TenantRole[], namespace: string): EnrolmentBinding[] {
  const never = new Set(KUBERNETES_NAMESPACES);
  const accounts = roles.map((role) => {
    const annotations = role.metadata?.annotations ?? {};
    const account = /^([^/]+)\/([^/]+)$/.exec(annotations[SERVICE_ACCOUNT_ANNOTATION] ?? '');
    if (account === null) throw new CliError(`the ClusterRole ${role.metadata?.name} has no annotation ${SERVICE_ACCOUNT_ANNOTATION}: <namespace>/<name>; is it Runlet's?`);
    never.add(account[1]!);
    for (const name of (annotations[NEVER_ENROLLED_ANNOTATION] ?? '').split(',')) if (name.trim() !== '') never.add(name.trim());
    return { role: role.metadata!.name!, namespace: account[1]!, name: account[2]! };
  });
  if (never.has(namespace)) {
    throw new CliError(`${namespace} cannot be an App namespace: Runlet never writes in ${[...never].join(', ')}`, 2);
  }
  return accounts.map(({ role, namespace: accountNamespace, name }) => ({
    apiVersion: RBAC_VERSION,
    kind: 'RoleBinding',
    metadata: { name: role, namespace, labels: { [ENROLMENT_LABEL]: 'true', 'app.kubernetes.io/part-of': 'runlet' } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ kind: 'ServiceAccount', name, namespace: accountNamespace }],
  }));
}

/** Applies the enrolment RoleBindings in `namespace` (which must exist); `report` says what was done. */
export async function enableNamespace(api: KubeApi, namespace: string, bindings: EnrolmentBinding[], report: (line: string) => void = say): Promise<void> {
  if ((await api.find(resourcePath({ apiVersion: 'v1', kind: 'Namespace', name: namespace }))) === undefined) {
    throw new CliError(`namespace ${namespace} does not exist: kubectl create namespace ${namespace}, then enable it`);
  }
  for (const binding of bindings) {
    await api.apply(binding);
    report(`RoleBinding ${namespace}/${binding.metadata.name}: ${binding.subjects![0]!.namespace}/${binding.subjects![0]!.name} may now write in ${namespace}`);
  }
  report(`${namespace} is an App namespace: its Apps are reconciled`);
}

export async function disableNamespace(api: KubeApi, namespace: string, bindings: EnrolmentBinding[]): Promise<void> {
  for (const binding of bindings) {
    try {
      await api.delete(resourcePath({ apiVersion: RBAC_VERSION, kind: 'RoleBinding', namespace, name: binding.metadata.name }));
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }
  say(`${namespace} is no longer an App namespace: Runlet writes nothing there (what it made stays until its Apps are deleted)`);
}

function explained(error: unknown, namespace: string | undefined): unknown {
  if (!(error instanceof KubeApiError)) return error;
  if (error.status === 0) return new CliError(`cannot reach the cluster of the current context (${error.message}): check KUBECONFIG and the context`);
  if (error.status === 401) return new CliError(`the cluster refused the credentials of the current context (${error.reason ?? '401'}): log in again`);
  if (error.status === 403) {
    return new CliError(`not allowed (${error.message}): enrolling ${namespace} binds Runlet's tenant ClusterRoles there, which takes a cluster admin's kubeconfig`);
  }
  return error;
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}
