// The chart's RBAC: its rules are the README's tables row for row, the runs viewer grants what the
// management API asks for, and the operator, run against the in-memory API server with the chart's
// configuration, makes no request its roles would refuse.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1ClusterRole, V1ConfigMap, V1Deployment, V1Role, V1RoleBinding } from '@kubernetes/client-node';
import pino from 'pino';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { resolveConfig, type ConfigLayer } from '../../operator/config.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { ensureResultsSecret } from '../../operator/results-secret.ts';
import { resourcePath, type KubeObject } from '../../kube/objects.ts';
import { createOperator, type Operator } from '../../operator/main.ts';
import { createActivator, type Activator, type ActivatorConfig } from '../../activator/main.ts';
import { RUNS_ACCESS, RUNS_CANCEL_ACCESS } from '../../management/kube-auth.ts';
import { CREATE_KEYS, DELETE_KEYS, LIST_KEYS, LIST_RUNS, type ManagementAccess } from '../../management/access.ts';
import { API_KEY_ROLE } from '../../operator/api-keys.ts';
import { RunAuthenticator } from '../../run-request/auth/authenticator.ts';
import { signLocalToken } from '../../run-request/auth/local-key.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { kubernetesProblems } from './kube-validate.ts';
import { allows, describeRight, requestAttributes, rightsOf, rulesFromTable, uses, type PolicyRule, type RequestAttributes, type TableRule } from './rbac.ts';
import type { RenderedChart } from '../../charts/render/render.ts';
import { CHART_DIR, RELEASE, VALUE_SETS, objectOf, renderWith } from './rendered.ts';
import { runLog, runRecord } from '../support/crd-fixtures.ts';
import { kubePathOf } from '../support/kube-path.ts';

const README = readFileSync(join(CHART_DIR, 'README.md'), 'utf8');
const OPERATOR_TABLE = "## The operator's permissions";
const ACTIVATOR_TABLE = "## The activator's permissions";
const VIEWER_TABLE = '## Read access to runs';
const SIDECAR_TABLE = "## The sidecar's permissions";
const EDITOR_TABLE = '## Editing Apps';
const OPERATOR_ROLE_TABLE = '## Cancelling runs';
const KEYS_TABLE = '## API keys';
const AGGREGATE = 'rbac.authorization.k8s.io/aggregate-to-';
const PROJECT_KEY = 'a shared HS256 key of the project team-a, 32 bytes or more';
/** The bearer tokens of the operator and the activator: the API server logs which client made each request. */
const OPERATOR_TOKEN = 'operator-token';
const ACTIVATOR_TOKEN = 'activator-token';
/** The namespace the chart makes for the records of held async calls (holder.heldCalls.namespace's default). */
const HELD_CALLS = `${RELEASE.namespace}-held`;

/** A rule as the chart states it, for comparing: no empty resourceNames, no extra fields. */
function plain(rule: PolicyRule): PolicyRule {
  return { apiGroups: rule.apiGroups, resources: rule.resources, verbs: rule.verbs, ...(rule.resourceNames === undefined ? {} : { resourceNames: rule.resourceNames }) };
}

/** The rules of the Role `name`, none when the chart does not render it. */
function roleRules(chart: RenderedChart, name: string): PolicyRule[] {
  const hasRole = chart.manifests.some((m) => m.object.kind === 'Role' && m.object.metadata.name === name);
  return hasRole ? objectOf<V1Role>(chart, 'Role', name).rules! : [];
}

/** The namespaces where the chart binds the ClusterRole `name` with a RoleBinding: the App namespaces it enrols. */
function enrolledIn(chart: RenderedChart, name: string): string[] {
  return chart.manifests
    .map((manifest) => manifest.object as unknown as V1RoleBinding & KubeObject)
    .filter((object) => object.kind === 'RoleBinding' && object.roleRef.kind === 'ClusterRole' && object.roleRef.name === name)
    .map((binding) => binding.metadata!.namespace!);
}

function operatorRoles(chart: RenderedChart): { cluster: PolicyRule[]; tenant: PolicyRule[]; enrolled: string[]; leaderElection: PolicyRule[]; holder: PolicyRule[]; results: PolicyRule[]; heldCalls: PolicyRule[] } {
  return {
    cluster: objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-operator').rules!,
    tenant: objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-operator-tenant').rules!,
    enrolled: enrolledIn(chart, 'runlet-operator-tenant'),
    leaderElection: objectOf<V1Role>(chart, 'Role', 'runlet-operator-leader-election').rules!,
    holder: roleRules(chart, 'runlet-operator-holder'),
    results: roleRules(chart, 'runlet-operator-results'),
    heldCalls: roleRules(chart, 'runlet-operator-held-calls'),
  };
}

/** A role with the namespaces it holds in (undefined: every namespace). */
type ScopedRole = readonly [string, PolicyRule[], string[] | undefined];

/** The activator's roles with the namespaces each covers. */
function activatorRoles(chart: RenderedChart): ScopedRole[] {
  return [
    ['ClusterRole runlet-activator', objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-activator').rules!, undefined],
    ['ClusterRole runlet-activator-tenant', objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-activator-tenant').rules!, enrolledIn(chart, 'runlet-activator-tenant')],
    ['Role runlet-activator', objectOf<V1Role>(chart, 'Role', 'runlet-activator').rules!, [RELEASE.namespace]],
    ['Role runlet-activator-held-calls', objectOf<V1Role>(chart, 'Role', 'runlet-activator-held-calls').rules!, [HELD_CALLS]],
  ];
}

/** Whether the role holds in the request's namespace. */
function holdsIn(namespaces: string[] | undefined, request: RequestAttributes): boolean {
  return namespaces === undefined || (request.namespace !== undefined && namespaces.includes(request.namespace));
}

/** Whether any of the roles allows the request in its namespaces. */
function allowedBy(roles: ScopedRole[], request: RequestAttributes): boolean {
  return roles.some(([, rules, namespaces]) => holdsIn(namespaces, request) && allows(rules, request));
}

/**
 * The rules the chart adds to a built-in ClusterRole (`view`, `edit`, `admin`) through the aggregation
 * controller: those of every ClusterRole labelled `aggregate-to-<role>`. As Kubernetes bootstraps them, `view`
 * is itself labelled `aggregate-to-edit` and `edit` `aggregate-to-admin`, so each includes the one below.
 */
function aggregatedInto(chart: RenderedChart, role: 'view' | 'edit' | 'admin'): PolicyRule[] {
  const below = { view: undefined, edit: 'view', admin: 'edit' } as const;
  const own = chart.manifests
    .map((manifest) => manifest.object as V1ClusterRole)
    .filter((object) => object.kind === 'ClusterRole' && object.metadata?.labels?.[`${AGGREGATE}${role}`] === 'true')
    .flatMap((object) => object.rules ?? []);
  const lower = below[role];
  return [...own, ...(lower === undefined ? [] : aggregatedInto(chart, lower))];
}

/** The table's rows of these scopes, as rules. */
function rowsOf(table: TableRule[], ...scopes: string[]): PolicyRule[] {
  return table.filter((row) => scopes.includes(row.scope)).map(plain);
}

/** The configuration the chart gives the operator, made to run here: loopback ports and quick elections. */
function chartConfig(chart: RenderedChart): ConfigLayer[] {
  const file = parseYaml(objectOf<V1ConfigMap>(chart, 'ConfigMap', 'runlet-operator-config').data!['operator.yaml']!) as ConfigLayer;
  return [
    file,
    {
      server: { host: '127.0.0.1', port: 0, metricsPort: 0 },
      holder: { host: '127.0.0.1', port: 0 },
      leaderElection: { identity: 'runlet-operator-0', leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 0.2 },
    },
  ];
}

/** The activator as the chart's Deployment runs it (its args), made to run here: loopback ports, no drain. */
function chartActivatorConfig(chart: RenderedChart): ActivatorConfig {
  const container = objectOf<V1Deployment>(chart, 'Deployment', 'runlet-activator').spec!.template.spec!.containers[0]!;
  const [command, ...flags] = container.args!;
  expect(command).toBe('activator');
  const flag = (name: string): string => {
    const at = flags.indexOf(`--${name}`);
    if (at < 0) throw new Error(`the activator Deployment gives no --${name}: ${flags.join(' ')}`);
    return flags[at + 1]!;
  };
  expect(container.env?.map((variable) => variable.name)).toEqual(['POD_NAME', 'POD_NAMESPACE']);
  return {
    host: '127.0.0.1',
    port: 0,
    adminHost: '127.0.0.1',
    adminPort: 0,
    identity: 'runlet-activator-0',
    // POD_NAMESPACE: the release namespace.
    keySecret: { namespace: RELEASE.namespace, name: flag('key-secret') },
    heldNamespace: flag('held-namespace'),
    watchdogMs: 120_000,
    drainMs: 0,
    limits: { callsPerApp: Number(flag('max-calls-per-app')), calls: Number(flag('max-calls')), bodyBytes: Number(flag('max-body-mib')) * 1024 * 1024 },
  };
}

describe('the RBAC tables of charts/runlet/README.md', () => {
  const chart = renderWith(VALUE_SETS.default);

  it("are the operator's ClusterRole, leader-election Role, holder Role, results Role and held-calls Role, row for row", () => {
    const table = rulesFromTable(README, OPERATOR_TABLE);
    // The results Role comes with the embedded PostgreSQL, which the default installs.
    const { cluster, tenant, leaderElection, holder, results, heldCalls } = operatorRoles(chart);
    expect(new Set(table.map((row) => row.scope))).toEqual(
      new Set(['cluster', 'cluster (auto sidecars)', 'App namespaces', 'App namespaces (holder)', 'release namespace', 'release namespace (holder)', 'release namespace (results)', 'held-calls namespace (holder)']),
    );
    expect(cluster.map(plain)).toEqual(rowsOf(table, 'cluster', 'cluster (auto sidecars)'));
    expect(tenant.map(plain)).toEqual(rowsOf(table, 'App namespaces', 'App namespaces (holder)'));
    expect(leaderElection.map(plain)).toEqual(rowsOf(table, 'release namespace'));
    expect(holder.map(plain)).toEqual(rowsOf(table, 'release namespace (holder)'));
    expect(results.map(plain)).toEqual(rowsOf(table, 'release namespace (results)'));
    expect(heldCalls.map(plain)).toEqual(rowsOf(table, 'held-calls namespace (holder)'));
    for (const row of table) expect(row.why.length, `why of ${row.resources?.join(',')}`).toBeGreaterThan(20);
  });

  it('lose the (holder) rows, the holder and held-calls Roles and the held calls’ namespace, with holder.enabled false', () => {
    const table = rulesFromTable(README, OPERATOR_TABLE);
    const off = renderWith([], { holder: { enabled: false } });
    const { cluster, tenant, leaderElection, holder, heldCalls } = operatorRoles(off);
    expect(cluster.map(plain)).toEqual(rowsOf(table, 'cluster', 'cluster (auto sidecars)'));
    expect(tenant.map(plain)).toEqual(rowsOf(table, 'App namespaces'));
    expect(leaderElection.map(plain)).toEqual(rowsOf(table, 'release namespace'));
    expect(holder).toEqual([]);
    expect(heldCalls).toEqual([]);
    expect(off.manifests.filter((m) => m.object.kind === 'Namespace' || m.object.metadata.name.startsWith('runlet-activator'))).toEqual([]);
  });

  it("are the activator's ClusterRole, Role and held-calls Role, row for row", () => {
    const table = rulesFromTable(README, ACTIVATOR_TABLE);
    expect(new Set(table.map((row) => row.scope))).toEqual(new Set(['cluster', 'App namespaces', 'release namespace', 'held-calls namespace']));
    const [cluster, tenant, release, heldCalls] = activatorRoles(chart);
    expect(cluster[1].map(plain)).toEqual(rowsOf(table, 'cluster'));
    expect(tenant[1].map(plain)).toEqual(rowsOf(table, 'App namespaces'));
    expect(release[1].map(plain)).toEqual(rowsOf(table, 'release namespace'));
    expect(heldCalls[1].map(plain)).toEqual(rowsOf(table, 'held-calls namespace'));
    for (const row of table) expect(row.why.length, `why of ${row.resources?.join(',')}`).toBeGreaterThan(20);
  });

  it.each(Object.entries(VALUE_SETS))('let the activator (%s values) read no Secret of the release namespace but its key, the results store’s DSN included, nor create one there', (_label, valuesFiles) => {
    // team-a enrolled (tenantNamespaces): the activator reads its hand-over key through its tenant role there.
    const rendered = renderWith(valuesFiles, { tenantNamespaces: ['team-a'] });
    const roles = activatorRoles(rendered);
    const keyName = resolveConfig(...chartConfig(rendered)).holder.keySecretName;
    const secret = (verb: string, namespace: string, name?: string): RequestAttributes => ({ verb, apiGroup: '', resource: 'secrets', namespace, name });
    // The embedded PostgreSQL's Secret (its `dsn`), one of the operator's own choosing, any other.
    for (const name of ['runlet-postgres', 'managed-postgres', 'anything-else']) {
      for (const verb of ['get', 'update', 'patch', 'delete']) expect(allowedBy(roles, secret(verb, RELEASE.namespace, name)), `${verb} ${RELEASE.namespace}/${name}`).toBe(false);
    }
    // Nor make one there (a create cannot be limited to a name: it could put a DSN of its choosing where the operator looks).
    for (const verb of ['list', 'watch', 'deletecollection', 'create']) expect(allowedBy(roles, secret(verb, RELEASE.namespace)), `${verb} secrets in ${RELEASE.namespace}`).toBe(false);
    // Nor any Secret of any other namespace but the held calls', except each App namespace's own hand-over key, by
    // its name: no list, no other name (its admin key), no write.
    for (const verb of ['list', 'watch', 'create']) expect(allowedBy(roles, secret(verb, 'team-a')), `${verb} secrets in team-a`).toBe(false);
    for (const verb of ['update', 'patch', 'delete']) expect(allowedBy(roles, secret(verb, 'team-a', 'runlet-holder-key')), `${verb} team-a/runlet-holder-key`).toBe(false);
    for (const name of ['runlet-admin-key', 'anything-else']) expect(allowedBy(roles, secret('get', 'team-a', name)), `get team-a/${name}`).toBe(false);
    expect(allowedBy(roles, secret('get', 'team-a', 'runlet-holder-key')), 'get team-a’s own hand-over key').toBe(true);
    // Only in enrolled namespaces: the tenant role is bound nowhere else.
    expect(allowedBy(roles, secret('get', 'kube-system', 'runlet-holder-key')), 'get kube-system/runlet-holder-key').toBe(false);
    // Its key, and the held calls in their own namespace.
    expect(allowedBy(roles, secret('get', RELEASE.namespace, keyName))).toBe(true);
    for (const verb of ['list', 'create', 'update', 'delete']) expect(allowedBy(roles, secret(verb, HELD_CALLS, verb === 'list' || verb === 'create' ? undefined : 'runlet-held-0194b6e2'))).toBe(true);
  });

  it('lose the (results) rows, and the results Role, with results.postgres.existingSecret or without the embedded PostgreSQL', () => {
    expect(operatorRoles(renderWith([], { results: { postgres: { existingSecret: 'managed-postgres' } } })).results).toEqual([]);
    expect(operatorRoles(renderWith([], { results: { postgres: { embedded: { enabled: false } } } })).results).toEqual([]);
  });

  it.each([false, true])('lose the (auto sidecars) row with apps.nativeSidecars %s', (nativeSidecars) => {
    const table = rulesFromTable(README, OPERATOR_TABLE);
    const { cluster } = operatorRoles(renderWith([], { apps: { nativeSidecars } }));
    expect(cluster.map(plain)).toEqual(rowsOf(table, 'cluster'));
  });

  it('are the runs viewer ClusterRole, which grants the SubjectAccessReview the management API asks', () => {
    const viewer = objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-runs-viewer').rules!;
    expect(viewer.map(plain)).toEqual(rulesFromTable(README, VIEWER_TABLE).map(plain));
    expect(allows(viewer, { verb: 'list', apiGroup: 'runlet.dev', resource: 'runs', namespace: 'team-a', name: undefined })).toBe(true);
    expect(allows(viewer, { verb: 'create', apiGroup: 'runlet.dev', resource: 'apps', namespace: 'team-a', name: undefined })).toBe(false);
  });

  it('are the runs operator ClusterRole, which grants the cancel the management API asks, and nothing else', () => {
    const runsOperator = objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-runs-operator').rules!;
    expect(runsOperator.map(plain)).toEqual(rulesFromTable(README, OPERATOR_ROLE_TABLE).map(plain));
    const cancel: RequestAttributes = { verb: RUNS_CANCEL_ACCESS.verb, apiGroup: RUNS_CANCEL_ACCESS.group, resource: RUNS_CANCEL_ACCESS.resource, namespace: 'team-a', name: undefined };
    expect(allows(runsOperator, cancel)).toBe(true);
    expect(allows(runsOperator, { ...cancel, verb: 'list' })).toBe(false);
  });

  it('are the API key (caller) and API keys admin ClusterRoles: admin may make keys, view may not; the operator may bind the caller role', () => {
    const table = rulesFromTable(README, KEYS_TABLE);
    expect(objectOf<V1ClusterRole>(chart, 'ClusterRole', API_KEY_ROLE).rules!.map(plain)).toEqual(rowsOf(table, 'key'));
    expect(objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-api-keys-admin').rules!.map(plain)).toEqual(rowsOf(table, 'admin'));
    const keys = (access: ManagementAccess): RequestAttributes => ({ verb: access.verb, apiGroup: 'runlet.dev', resource: access.resource, namespace: 'team-a', name: undefined });
    for (const access of [CREATE_KEYS, LIST_KEYS, DELETE_KEYS]) {
      expect(allows(aggregatedInto(chart, 'admin'), keys(access)), `admin: ${access.verb}`).toBe(true);
      expect(allows(aggregatedInto(chart, 'edit'), keys(access)), `edit: ${access.verb}`).toBe(false);
    }
    const key = objectOf<V1ClusterRole>(chart, 'ClusterRole', API_KEY_ROLE).rules!;
    expect(allows(key, keys(LIST_RUNS))).toBe(true);
    expect(allows(key, keys(CREATE_KEYS))).toBe(false);
    // In App namespaces only: the tenant role, bound there.
    const { cluster, tenant } = operatorRoles(chart);
    expect(allows(tenant, { verb: 'bind', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', namespace: 'team-a', name: API_KEY_ROLE })).toBe(true);
    expect(allows(tenant, { verb: 'create', apiGroup: '', resource: 'serviceaccounts/token', namespace: 'team-a', name: 'runlet-key-ci' })).toBe(true);
    expect(allows(cluster, { verb: 'create', apiGroup: '', resource: 'serviceaccounts/token', namespace: 'team-a', name: 'runlet-key-ci' })).toBe(false);
  });

  it('are the App editor ClusterRole', () => {
    const editor = objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-app-editor').rules!;
    expect(editor.map(plain)).toEqual(rulesFromTable(README, EDITOR_TABLE).map(plain));
  });

  it('let the built-in view read Apps and list runs, edit and admin also create Apps and cancel runs; none writes status or RunLogs', () => {
    const inTeam = (verb: string, resource: string): RequestAttributes => ({ verb, apiGroup: 'runlet.dev', resource, namespace: 'team-a', name: undefined });
    // What the management API asks of a caller (management/kube-auth.ts).
    const listRuns: RequestAttributes = { verb: RUNS_ACCESS.verb, apiGroup: RUNS_ACCESS.group, resource: RUNS_ACCESS.resource, namespace: 'team-a', name: undefined };
    const cancelRuns: RequestAttributes = { ...listRuns, verb: RUNS_CANCEL_ACCESS.verb };
    const view = aggregatedInto(chart, 'view');
    expect(allows(view, listRuns)).toBe(true);
    expect(allows(view, cancelRuns), 'view: cancel runs').toBe(false);
    for (const verb of ['get', 'list', 'watch']) expect(allows(view, inTeam(verb, 'apps')), `${verb} apps`).toBe(true);
    expect(allows(view, inTeam('create', 'apps'))).toBe(false);
    for (const role of ['edit', 'admin'] as const) {
      const rules = aggregatedInto(chart, role);
      expect(allows(rules, listRuns), `${role}: list runs`).toBe(true);
      expect(allows(rules, cancelRuns), `${role}: cancel runs`).toBe(true);
      for (const verb of ['create', 'update', 'patch', 'delete', 'get', 'list', 'watch']) expect(allows(rules, inTeam(verb, 'apps')), `${role}: ${verb} apps`).toBe(true);
      for (const [verb, resource] of [['patch', 'apps/status'], ['update', 'apps/status'], ['create', 'runlogs'], ['patch', 'runlogs/status'], ['delete', 'runlogs']]) {
        expect(allows(rules, inTeam(verb!, resource!)), `${role}: ${verb} ${resource}`).toBe(false);
      }
    }
  });

  it('are the sidecar ClusterRole, which the operator may bind but holds nothing of', () => {
    const sidecar = objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-sidecar').rules!;
    expect(sidecar.map(plain)).toEqual(rulesFromTable(README, SIDECAR_TABLE).map(plain));
    const { cluster, tenant } = operatorRoles(chart);
    expect(allows(tenant, { verb: 'bind', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', namespace: 'team-a', name: 'runlet-sidecar' })).toBe(true);
    expect(allows(tenant, { verb: 'bind', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', namespace: 'team-a', name: 'cluster-admin' })).toBe(false);
    const granted = sidecar.flatMap((rule) => rule.apiGroups!.flatMap((apiGroup) => rule.resources!.flatMap((resource) => rule.verbs.map((verb) => ({ verb, apiGroup, resource, namespace: 'team-a', name: undefined })))));
    // `create runlogs` the operator holds for its own reason (the RunLog of an App's cancelled held calls), not the sidecar's.
    expect(granted.filter((request) => !allows(cluster, request)).map((request) => `${request.verb} ${request.resource}`)).toEqual(['get apps', 'patch runlogs/status', 'get pods']);
  });

  it('come with a RoleBinding example that is valid and binds the runs viewer', () => {
    const section = README.slice(README.indexOf(VIEWER_TABLE));
    const example = section.match(/```yaml\n([\s\S]*?)```/)?.[1];
    const binding = parseYaml(example ?? '', { version: '1.1' }) as V1RoleBinding & { metadata: { name: string } };
    expect(kubernetesProblems(binding)).toEqual([]);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-runs-viewer' });
  });
});

/** The verbs that change something (and the RBAC verbs that grant more): what no cluster-wide role of Runlet's may hold on a built-in kind. */
const WRITE_VERBS = ['create', 'update', 'patch', 'delete', 'deletecollection', 'bind', 'escalate', 'impersonate', '*'];
/** Cluster-wide writes a Runlet component may hold: its own kinds, Events on them, and the management API's reviews. */
const CLUSTER_WRITES_ALLOWED = new Set(['runlet.dev', 'events.k8s.io']);
const CLUSTER_WRITE_RESOURCES_ALLOWED = new Set(['/events', 'authentication.k8s.io/tokenreviews', 'authorization.k8s.io/subjectaccessreviews']);
/** What the finding named: the writes a stolen operator or activator token must not reach outside App namespaces. */
const TENANT_KINDS: [apiGroup: string, resource: string][] = [
  ['apps', 'deployments'],
  ['apps', 'deployments/scale'],
  ['rbac.authorization.k8s.io', 'rolebindings'],
  ['rbac.authorization.k8s.io', 'roles'],
  ['rbac.authorization.k8s.io', 'clusterroles'],
  ['networking.k8s.io', 'networkpolicies'],
  ['networking.k8s.io', 'ingresses'],
  ['', 'services'],
  ['discovery.k8s.io', 'endpointslices'],
  ['', 'endpoints'],
  ['', 'serviceaccounts'],
  ['', 'serviceaccounts/token'],
  ['', 'secrets'],
  ['', 'pods'],
  ['', 'configmaps'],
];

/** The rules of every ClusterRole a ClusterRoleBinding of these manifests binds to a ServiceAccount of the release namespace. */
function clusterWideRulesOfComponents(manifests: KubeObject[]): { role: string; rules: PolicyRule[] }[] {
  const roles = new Map(manifests.filter((object) => object.kind === 'ClusterRole').map((object) => [object.metadata!.name!, (object as V1ClusterRole).rules ?? []]));
  return manifests
    .filter((object) => object.kind === 'ClusterRoleBinding')
    .map((object) => object as unknown as V1RoleBinding & KubeObject)
    .filter((binding) => binding.subjects?.some((subject) => subject.kind === 'ServiceAccount' && subject.namespace === RELEASE.namespace))
    .map((binding) => {
      const rules = roles.get(binding.roleRef.name);
      if (rules === undefined) throw new Error(`ClusterRoleBinding ${binding.metadata!.name} binds ClusterRole ${binding.roleRef.name}, which is not in the manifests`);
      return { role: binding.roleRef.name, rules };
    });
}

/** install.yaml's objects, as `kubectl apply -f install.yaml` creates them. */
function installYamlObjects(): KubeObject[] {
  return parseAllDocuments(readFileSync(join(CHART_DIR, '../../install.yaml'), 'utf8')).map((document) => document.toJS() as KubeObject);
}

describe('the blast radius of a Runlet component’s credential', () => {
  const renderings: [string, KubeObject[]][] = [
    ['install.yaml', installYamlObjects()],
    ...Object.entries(VALUE_SETS).map(([label, files]) => [`${label} values`, renderWith(files).manifests.map((m) => m.object as unknown as KubeObject)] as [string, KubeObject[]]),
    ['production values, team-a and team-b enrolled', renderWith(VALUE_SETS.production, { tenantNamespaces: ['team-a', 'team-b'] }).manifests.map((m) => m.object as unknown as KubeObject)],
    ['holder off', renderWith([], { holder: { enabled: false } }).manifests.map((m) => m.object as unknown as KubeObject)],
  ];

  it.each(renderings)('%s: no ClusterRole bound cluster-wide to the operator or the activator writes a built-in kind or makes a token, in kube-system or anywhere', (_label, objects) => {
    const bound = clusterWideRulesOfComponents(objects);
    expect(bound.map(({ role }) => role).sort()).toEqual(objects.some((object) => object.kind === 'ClusterRole' && object.metadata?.name === 'runlet-activator') ? ['runlet-activator', 'runlet-operator'] : ['runlet-operator']);
    for (const { role, rules } of bound) {
      // Each right named by the finding, by any name, in kube-system and in an App namespace alike.
      for (const [apiGroup, resource] of TENANT_KINDS) {
        for (const verb of WRITE_VERBS) {
          for (const namespace of ['kube-system', 'team-a']) {
            expect(allows(rules, { verb, apiGroup, resource, namespace, name: 'anything' }), `${role}: ${verb} ${apiGroup || 'core'}/${resource} in ${namespace}`).toBe(false);
          }
        }
      }
      // And every other write right it holds is on Runlet's own kinds, Events or the reviews.
      const writes = rightsOf(rules).filter((right) => WRITE_VERBS.includes(right.verb));
      const foreign = writes.filter((right) => !CLUSTER_WRITES_ALLOWED.has(right.apiGroup) && !CLUSTER_WRITE_RESOURCES_ALLOWED.has(`${right.apiGroup}/${right.resource}`));
      expect(foreign.map(describeRight), `${role}: cluster-wide writes to built-in kinds`).toEqual([]);
    }
  });

  it.each(renderings)('%s: no role of the activator reads a pod, in any namespace', (_label, objects) => {
    const rulesOf = (kind: string, name: string) => (objects.find((object) => object.kind === kind && object.metadata?.name === name) as V1ClusterRole | undefined)?.rules ?? [];
    const roles = [rulesOf('ClusterRole', 'runlet-activator'), rulesOf('ClusterRole', 'runlet-activator-tenant'), rulesOf('Role', 'runlet-activator'), rulesOf('Role', 'runlet-activator-held-calls')];
    for (const rules of roles) {
      for (const verb of ['get', 'list', 'watch']) {
        for (const namespace of ['kube-system', 'team-a', RELEASE.namespace, HELD_CALLS, undefined]) {
          expect(allows(rules, { verb, apiGroup: '', resource: 'pods', namespace, name: undefined }), `${verb} pods in ${namespace ?? 'all namespaces'}`).toBe(false);
        }
      }
    }
  });

  it('lets the activator’s token read no pod’s spec anywhere, and Endpoints only in App namespaces, against an API server enforcing the chart’s RBAC', async () => {
    const server = await startKubeApiServer({ rbac: true, namespaces: ['default', 'kube-system', RELEASE.namespace, HELD_CALLS, 'team-a', 'team-b'] });
    const admin = new KubeApi(await server.credentials());
    server.tokens.set(ACTIVATOR_TOKEN, { username: `system:serviceaccount:${RELEASE.namespace}:runlet-activator`, groups: ['system:serviceaccounts', `system:serviceaccounts:${RELEASE.namespace}`, 'system:authenticated'] });
    const activatorApi = new KubeApi(kubeConfigCredentials(server.kubeConfig({ token: ACTIVATOR_TOKEN })));
    try {
      // The chart as installed, team-a enrolled; team-b is not.
      const chart = renderWith(VALUE_SETS.production, { tenantNamespaces: ['team-a'] });
      const rbacKinds = ['ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'];
      for (const { object } of chart.manifests.filter((m) => rbacKinds.includes(m.object.kind))) {
        await admin.create(resourcePath({ apiVersion: object.apiVersion, kind: object.kind, namespace: object.metadata.namespace }), object as unknown as KubeObject);
      }
      // A pod in each namespace whose spec carries an environment literal.
      const namespaces = ['default', 'kube-system', RELEASE.namespace, HELD_CALLS, 'team-a', 'team-b'];
      for (const namespace of namespaces) {
        await admin.create(resourcePath({ apiVersion: 'v1', kind: 'Pod', namespace }), {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'app', labels: { 'runlet.dev/app': 'app' } },
          spec: { containers: [{ name: 'app', image: 'app:1', env: [{ name: 'PASSWORD', value: 'literal' }] }] },
        } as KubeObject);
      }
      const status = (request: Promise<unknown>) => request.then(() => 200, (error: unknown) => (error as { status?: number }).status);
      const pods = (namespace?: string) => resourcePath({ apiVersion: 'v1', kind: 'Pod', namespace });
      for (const namespace of namespaces) {
        expect(await status(activatorApi.get(pods(namespace).named('app'))), `get a pod in ${namespace}`).toBe(403);
        expect(await status(activatorApi.list(pods(namespace))), `list pods in ${namespace}`).toBe(403);
        expect(await status(activatorApi.list(pods(namespace), { labelSelector: 'runlet.dev/app' })), `list App pods in ${namespace}`).toBe(403);
      }
      expect(await status(activatorApi.list(pods())), 'list pods in all namespaces').toBe(403);
      const watch = await server.fetch(`/api/v1/pods?watch=true&timeoutSeconds=1`, { headers: { authorization: `Bearer ${ACTIVATOR_TOKEN}` } });
      expect(watch.status, 'watch pods in all namespaces').toBe(403);

      // What it reads instead: the Endpoints of an enrolled namespace, and nowhere else.
      const endpoints = (namespace?: string) => resourcePath({ apiVersion: 'v1', kind: 'Endpoints', namespace });
      expect(await status(activatorApi.list(endpoints('team-a')))).toBe(200);
      expect(await status(activatorApi.list(endpoints('team-b'))), 'Endpoints of a namespace not enrolled').toBe(403);
      expect(await status(activatorApi.list(endpoints('kube-system')))).toBe(403);
      expect(await status(activatorApi.list(endpoints())), 'Endpoints in all namespaces').toBe(403);
    } finally {
      await activatorApi.close();
      await admin.close();
      await server.close();
    }
  });

  it.each(renderings)('%s: binds the tenant ClusterRoles by RoleBindings only, never in kube-system or the release’s own namespaces', (_label, objects) => {
    const tenantRoles = objects.filter((object) => object.kind === 'ClusterRole' && object.metadata?.labels?.['runlet.dev/tenant-role'] === 'true').map((object) => object.metadata!.name!);
    expect(tenantRoles.length).toBeGreaterThan(0);
    const bindings = objects.filter((object) => object.kind === 'ClusterRoleBinding' || object.kind === 'RoleBinding').map((object) => object as unknown as V1RoleBinding & KubeObject);
    expect(bindings.filter((binding) => binding.kind === 'ClusterRoleBinding' && tenantRoles.includes(binding.roleRef.name)).map((binding) => binding.metadata!.name)).toEqual([]);
    const never = ['kube-system', 'kube-public', 'kube-node-lease', RELEASE.namespace, HELD_CALLS];
    expect(bindings.filter((binding) => tenantRoles.includes(binding.roleRef.name) && never.includes(binding.metadata!.namespace!)).map((binding) => binding.metadata!.namespace)).toEqual([]);
  });

  it.each(['kube-system', 'kube-public', 'kube-node-lease', RELEASE.namespace, HELD_CALLS])('refuses to enrol %s through tenantNamespaces', (namespace) => {
    expect(() => renderWith([], { tenantNamespaces: ['team-a', namespace] })).toThrow(`tenantNamespaces: ${namespace} cannot be an App namespace`);
  });

  it('enrols each namespace of tenantNamespaces with a RoleBinding of each tenant ClusterRole to its component', () => {
    const chart = renderWith([], { tenantNamespaces: ['team-a', 'team-b'] });
    const bindings = chart.manifests.filter((m) => m.object.kind === 'RoleBinding' && m.object.metadata.labels?.['runlet.dev/tenant-enrolment'] === 'true').map((m) => m.object as unknown as V1RoleBinding & KubeObject);
    expect(bindings.map((binding) => `${binding.metadata!.namespace}/${binding.metadata!.name} ${binding.roleRef.name} ${binding.subjects![0]!.namespace}/${binding.subjects![0]!.name}`).sort()).toEqual([
      'team-a/runlet-activator-tenant runlet-activator-tenant runlet-system/runlet-activator',
      'team-a/runlet-operator-tenant runlet-operator-tenant runlet-system/runlet-operator',
      'team-b/runlet-activator-tenant runlet-activator-tenant runlet-system/runlet-activator',
      'team-b/runlet-operator-tenant runlet-operator-tenant runlet-system/runlet-operator',
    ]);
    for (const binding of bindings) expect(kubernetesProblems(binding)).toEqual([]);
  });
});

describe('the operator under the chart’s RBAC', () => {
  let server: KubeApiServer | undefined;
  let operator: Operator | undefined;
  let activator: Activator | undefined;

  afterEach(async () => {
    await activator?.stop();
    await operator?.stop();
    await server?.close();
    operator = activator = server = undefined;
  });

  /**
   * What `runlet operator` does before it composes the operator, with the chart's embedded PostgreSQL (its
   * Deployment names the Secret in RUNLET_RESULTS_POSTGRES_SECRET): the Secret of the database's DSN read, or made
   * when missing (cli/operator-command.ts), under the operator's own token.
   */
  async function embeddedResultsSecret(chart: RenderedChart): Promise<void> {
    const env = objectOf<V1Deployment>(chart, 'Deployment', 'runlet-operator').spec!.template.spec!.containers[0]!.env ?? [];
    const value = (name: string) => env.find((variable) => variable.name === name)?.value;
    const name = value('RUNLET_RESULTS_POSTGRES_SECRET');
    if (name === undefined) return;
    const api = new KubeApi(kubeConfigCredentials(server!.kubeConfig({ token: OPERATOR_TOKEN })));
    try {
      await ensureResultsSecret(api, { namespace: RELEASE.namespace, name, host: value('RUNLET_RESULTS_POSTGRES_HOST')! });
    } finally {
      await api.close();
    }
  }

  type Made = { method: string; path: string; watch: boolean; contentType: string | undefined };
  type Awaited = { method: string; pathPattern: RegExp; watch?: boolean; by?: 'activator' };

  /**
   * Runs an operator with that configuration and, when the chart deploys one, an activator as `runlet activator`
   * runs it (callers of team-a authenticated with its key here; its own token, so that its requests are told
   * apart), until every request of `done` is logged (by the operator, or `by` the activator), calling
   * `meanwhile` once both listen; the requests each made meanwhile. The activator starts once the operator
   * made `activatorAfter`, if given.
   */
  async function requestsOf(
    chart: RenderedChart,
    done: Awaited[],
    meanwhile: (running: { operator: Operator; url: string; activator: Activator | undefined }) => Promise<void> = async () => {},
    activatorAfter?: Awaited,
  ): Promise<{ operator: Made[]; activator: Made[] }> {
    const from = server!.requests.length;
    await embeddedResultsSecret(chart);
    const config = resolveConfig(...chartConfig(chart));
    const auth = new RunAuthenticator({ audience: 'runlet', hs256Keys: { 'team-a': new TextEncoder().encode(PROJECT_KEY) } });
    // Two days on, for the janitor: a RunLog written now is past the default retention of a day.
    const clock = () => new Date(Date.now() + 2 * 86_400_000);
    const holder = !config.holder.enabled ? undefined : config.holder.inOperator ? { auth } : ('external' as const);
    operator = createOperator({ kubeConfig: server!.kubeConfig({ token: OPERATOR_TOKEN }), config, logger: pino({ level: 'silent' }), processMetrics: false, holder, clock });
    activator = holder === 'external' ? createActivator({ kubeConfig: server!.kubeConfig({ token: ACTIVATOR_TOKEN }), config: chartActivatorConfig(chart), auth, logger: pino({ level: 'silent' }), processMetrics: false }) : undefined;
    try {
      operator.start();
      const url = await operator.listen();
      if (activatorAfter !== undefined) await server!.waitForRequest({ ...activatorAfter, token: OPERATOR_TOKEN }, 20_000);
      await activator?.listen();
      await meanwhile({ operator, url, activator });
      for (const { by, ...request } of done) await server!.waitForRequest({ ...request, token: by === 'activator' ? ACTIVATOR_TOKEN : OPERATOR_TOKEN }, 20_000);
      // Stopping releases the Lease, and the activator's claims: those requests count too.
      await activator?.stop();
      await operator.stop();
    } finally {
      await auth.close();
    }
    operator = activator = undefined;
    const made = server!.requests.slice(from);
    return { operator: made.filter((request) => request.token === OPERATOR_TOKEN), activator: made.filter((request) => request.token === ACTIVATOR_TOKEN) };
  }

  it('makes only requests its ClusterRole and Roles allow, with its holder taking a call at zero, binding the sidecar ClusterRole in place of an earlier version’s Role', async () => {
    // The held calls' namespace, as the chart makes it.
    server = await startKubeApiServer({ namespaces: ['default', RELEASE.namespace, HELD_CALLS, 'team-a'] });
    const api = new KubeApi(await server.credentials());
    try {
      // team-a enrolled at install, as an admin lists it in tenantNamespaces.
      const enrolTeamA = { tenantNamespaces: ['team-a'] };
      const production = renderWith(VALUE_SETS.production, enrolTeamA);
      for (const crd of production.crds) await api.create(kubePathOf('/apis/apiextensions.k8s.io/v1/customresourcedefinitions'), parseYaml(crd.text) as KubeObject);
      const configMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'hello-code', namespace: 'team-a', labels: { 'runlet.dev/app': 'hello' } }, data: { 'main.py': 'def run():\n    return 1\n' } };
      await api.create(resourcePath({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'team-a' }), configMap);
      const app = { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name: 'hello', namespace: 'team-a' }, spec: { runtime: { python: { code: { configMap: { name: 'hello-code' } } } } } };
      await api.create(resourcePath({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', namespace: 'team-a' }), app);
      // What an earlier version left: its own Role runlet-sidecar, bound (a roleRef cannot change).
      const rbacGroup = 'rbac.authorization.k8s.io/v1';
      await api.create(resourcePath({ apiVersion: rbacGroup, kind: 'Role', namespace: 'team-a' }), { apiVersion: rbacGroup, kind: 'Role', metadata: { name: 'runlet-sidecar' }, rules: [] });
      await api.create(resourcePath({ apiVersion: rbacGroup, kind: 'RoleBinding', namespace: 'team-a' }), {
        apiVersion: rbacGroup,
        kind: 'RoleBinding',
        metadata: { name: 'runlet-sidecar' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runlet-sidecar' },
        subjects: [{ kind: 'ServiceAccount', name: 'runlet-sidecar', namespace: 'team-a' }],
      });
      // And the root hand-over key it kept in the release namespace, from which every namespace's key derived: deleted at start.
      await api.create(resourcePath({ apiVersion: 'v1', kind: 'Secret', namespace: RELEASE.namespace }), {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'runlet-holder-key' },
        data: { key: Buffer.from('cd'.repeat(32)).toString('base64') },
      } as KubeObject);

      // An App that scales to zero, at zero (its Deployment made so by the test): a call to it wakes it.
      await api.create(resourcePath({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', namespace: 'team-a' }), { ...app, metadata: { name: 'zero', namespace: 'team-a' }, spec: { ...app.spec, scaling: { minReplicas: 0 } } });
      const zeroLabels = { 'runlet.dev/app': 'zero' };
      await api.create(resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'team-a' }), {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'zero' },
        spec: { replicas: 0, selector: { matchLabels: zeroLabels }, template: { metadata: { labels: zeroLabels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
      } as KubeObject);
      // The holder's addresses (the endpoints controller lists the operator pods' holder port), and a slice of the
      // App's left from a holder port no longer used: the switch to the holder writes the one and deletes the other.
      const holderService = resolveConfig(...chartConfig(production)).holder.serviceName;
      await api.create(resourcePath({ apiVersion: 'v1', kind: 'Endpoints', namespace: RELEASE.namespace }), {
        apiVersion: 'v1',
        kind: 'Endpoints',
        metadata: { name: holderService },
        subsets: [{ addresses: [{ ip: '10.1.0.1' }], ports: [{ name: 'holder', port: 8090 }] }],
      } as KubeObject);
      const sliceLabels = { 'kubernetes.io/service-name': 'zero', 'endpointslice.kubernetes.io/managed-by': 'operator.runlet.dev' };
      await api.create(resourcePath({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', namespace: 'team-a' }), {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name: 'zero-9999-ipv4', labels: sliceLabels },
        addressType: 'IPv4',
        endpoints: [{ addresses: ['10.1.0.9'] }],
        ports: [{ name: 'http', port: 9999 }],
      } as KubeObject);
      // RunLogs of pods that are gone: one with a run left running (the janitor fails it: a PUT of the status),
      // one whose runs have ended (deleted once past its retention, which the operator's clock puts behind it).
      const runLogs = resourcePath({ apiVersion: 'runlet.dev/v1alpha1', kind: 'RunLog', namespace: 'team-a' });
      const lost = { ...runRecord(), id: '0194b6e2-4d1c-7c3e-9a51-0f2f3c4d5e70', status: 'running' as const, statusCode: null, error: null, completedAt: null, runtimeMs: null, responseTimeMs: null, webhook: null };
      for (const [name, runs] of [['hello-gone-old', [runRecord()]], ['hello-gone-lost', [lost]]] as const) {
        const fixture = runLog();
        const created = await api.create<KubeObject>(runLogs, { ...fixture, metadata: { ...fixture.metadata, name }, status: undefined } as KubeObject);
        await api.replace(kubePathOf(`${runLogs}/${name}/status`), { ...created, status: { ...fixture.status, runs } } as KubeObject);
      }
      // Someone wrote the lost runs' RunLog meanwhile, once: the janitor reads it again (a get) and decides again.
      server.failNext({ method: 'PUT', pathPattern: '/runlogs/hello-gone-lost/status', status: 409, reason: 'Conflict', message: 'the object has been modified' });
      // A caller of the management API with a token the API server knows, allowed to list team-a's runs.
      // Shaped as a service-account token (a JWT), which is all the management API checks before its TokenReview.
      const viewerToken = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ2aWV3ZXIifQ.c2lnbmF0dXJl';
      server.tokens.set(viewerToken, { username: 'viewer' });
      server.allow({ user: 'viewer', verb: RUNS_ACCESS.verb, group: RUNS_ACCESS.group, resource: RUNS_ACCESS.resource, namespace: 'team-a' });
      const listRuns = async (running: Operator) => {
        const answer = await running.server.inject({ method: 'GET', url: '/v2/projects/team-a/apps/hello/runs', headers: { authorization: `Bearer ${viewerToken}` } });
        expect(answer.statusCode, answer.body).toBe(200);
      };
      // The activator takes calls to the App at zero: two async ones (held records, then the wake), and a sync one,
      // which waits for a pod (none comes here) until its caller gives up; the run id of the first async call.
      const callAtZero = async (holderUrl: string): Promise<string> => {
        const headers = { authorization: `Bearer ${await signLocalToken({ projectId: 'team-a', key: PROJECT_KEY })}`, 'content-type': 'application/json' };
        const runIds: string[] = [];
        for (const _ of [1, 2]) {
          const answer = await fetch(`${holderUrl}/v4/team-a/zero/run?async=true`, { method: 'POST', headers, body: '{}' });
          expect(answer.status).toBe(202);
          runIds.push(answer.headers.get('x-request-id')!);
        }
        const givenUp = new AbortController();
        const sync = fetch(`${holderUrl}/v4/team-a/zero/run`, { method: 'POST', headers, body: '{}', signal: givenUp.signal });
        await vi.waitFor(() => expect(activator?.holder?.calls).toBe(3), { timeout: 10_000 });
        givenUp.abort();
        await expect(sync).rejects.toThrow(/abort/i);
        return runIds[0]!;
      };
      // The operator cancels a held async call through the management API: it reads and deletes its record.
      server.allow({ user: 'viewer', verb: RUNS_CANCEL_ACCESS.verb, group: RUNS_CANCEL_ACCESS.group, resource: RUNS_CANCEL_ACCESS.resource, namespace: 'team-a' });
      const cancelHeld = async (running: Operator, runId: string) => {
        const answer = await running.server.inject({ method: 'POST', url: `/v2/projects/team-a/apps/zero/runs/${runId}/cancel`, headers: { authorization: `Bearer ${viewerToken}` } });
        expect(answer.statusCode, answer.body).toBe(202);
        expect(answer.json()).toMatchObject({ item: { id: runId, status: 'cancelled' } });
      };
      // An API key made and revoked through the management API: a ServiceAccount, its binding and token.
      server.tokens.set('keys.admin.x', { username: 'keys-admin' });
      for (const verb of ['create', 'delete']) server.allow({ user: 'keys-admin', namespace: 'team-a', group: 'runlet.dev', resource: 'apikeys', verb });
      const keyRoundTrip = async (url: string) => {
        const headers = { authorization: 'Bearer keys.admin.x', 'content-type': 'application/json' };
        const made = await fetch(`${url}/v2/projects/team-a/keys`, { method: 'POST', headers, body: JSON.stringify({ name: 'ci', expiresAt: new Date(Date.now() + 86_400_000).toISOString() }) });
        expect(made.status).toBe(201);
        expect((await fetch(`${url}/v2/projects/team-a/keys/ci`, { method: 'DELETE', headers: { authorization: headers.authorization } })).status).toBe(204);
      };

      // With the app ingress and NetworkPolicy on (production values), then the defaults with the NetworkPolicy
      // switched off (the ingress is off by default): the second removes the Ingress and the NetworkPolicy, and its
      // holder takes over the call the first one held.
      const productionRun = await requestsOf(
          production,
          [
            { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/apps\/hello\/status$/ },
            { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/networkpolicies\/hello$/ },
            { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/endpointslices\/zero-8090-ipv4$/ },
            { method: 'DELETE', pathPattern: /\/namespaces\/team-a\/endpointslices\/zero-9999-ipv4$/ },
            { method: 'DELETE', pathPattern: /\/namespaces\/team-a\/endpoints\/zero$/ },
            { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/secrets\/runlet-holder-key$/ },
            { method: 'PUT', pathPattern: /\/namespaces\/team-a\/deployments\/zero\/scale$/, by: 'activator' },
            { method: 'DELETE', pathPattern: /\/namespaces\/team-a\/serviceaccounts\/runlet-key-ci$/ },
            { method: 'GET', pathPattern: /\/namespaces\/team-a\/runlogs\/hello-gone-lost$/ },
            { method: 'PUT', pathPattern: /\/namespaces\/team-a\/runlogs\/hello-gone-lost\/status$/ },
            { method: 'DELETE', pathPattern: /\/namespaces\/team-a\/runlogs\/hello-gone-old$/ },
            { method: 'POST', pathPattern: /\/subjectaccessreviews$/ },
          ],
          async ({ operator: running, url, activator: holding }) => {
            await cancelHeld(running, await callAtZero(holding!.holder!.url));
            await keyRoundTrip(url);
            await listRuns(running);
          },
          // The operator makes the holder key and copies it into team-a, then the activator reads it.
          { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/secrets\/runlet-holder-key$/ },
        );
      const defaults = renderWith(VALUE_SETS.default, { ...enrolTeamA, apps: { networkPolicy: { enabled: false } } });
      // Its activator takes over the call held at zero; then the App is deleted, and the call with it.
      const heldRecord = new RegExp(`/namespaces/${HELD_CALLS}/secrets/runlet-held-`);
      const deleteZero = async () => {
        // Once its activator's sweep has claimed the call (the first run's never did: it was still waiting for a pod).
        await server!.waitForRequest({ method: 'PUT', pathPattern: heldRecord, token: ACTIVATOR_TOKEN }, 20_000);
        await api.delete(resourcePath({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', namespace: 'team-a', name: 'zero' }));
      };
      const defaultRun = await requestsOf(defaults, [
          { method: 'DELETE', pathPattern: /\/namespaces\/team-a\/ingresses\/hello$/ },
          { method: 'DELETE', pathPattern: /\/namespaces\/team-a\/networkpolicies\/hello$/ },
          { method: 'DELETE', pathPattern: heldRecord, by: 'activator' },
          { method: 'GET', pathPattern: /^\/api\/v1\/nodes$/, watch: true },
        ], deleteZero);
      // Less the test's own deletion of the App (the operator deletes no App).
      const productionRequests = productionRun.operator;
      const defaultRequests = defaultRun.operator;

      // Each run against the roles of the chart it ran with (the production values fix nativeSidecars: false).
      const attributesUnder = (chart: RenderedChart, requests: typeof productionRequests) => {
        const { cluster, tenant, enrolled, leaderElection, holder, results, heldCalls } = operatorRoles(chart);
        const permitted = (request: RequestAttributes) =>
          allows(cluster, request) ||
          (holdsIn(enrolled, request) && allows(tenant, request)) ||
          (request.namespace === RELEASE.namespace && (allows(leaderElection, request) || allows(holder, request) || allows(results, request))) ||
          (request.namespace === HELD_CALLS && allows(heldCalls, request));
        return requests.flatMap((request) => requestAttributes(request).map((attrs) => ({ request: `${request.method} ${request.path}`, permitted: permitted(attrs), ...attrs })));
      };
      const attributes = [...attributesUnder(production, productionRequests), ...attributesUnder(defaults, defaultRequests)];
      expect(attributes.filter((attrs) => !attrs.permitted)).toEqual([]);

      // And no right goes unused: each right of each role (one verb on one resource) allows some request the
      // operator made under the chart that grants it, in the namespaces the role covers — but for those the API
      // server checks without a request for them, named here with the check.
      const checkedWithoutARequest = new Set([
        // OwnerReferencesPermissionEnforcement: a child's blockOwnerDeletion is allowed to whoever may update its owner's finalizers.
        'ClusterRole runlet-operator: update runlet.dev/apps/finalizers',
        // The same plugin: the sidecar ServiceAccount's owner references (every App of its namespace) change only for whoever may delete it.
        'ClusterRole runlet-operator-tenant: delete core/serviceaccounts',
        // And the holder key's copy, owned by every App of its namespace (kube-apiserver 1.20 refuses its patch without it).
        'ClusterRole runlet-operator-tenant: delete core/secrets [runlet-holder-key]',
        // And each namespace's admin key, owned the same way.
        'ClusterRole runlet-operator-tenant: delete core/secrets [runlet-admin-key]',
        // RBAC's escalation check when the sidecar RoleBinding is applied.
        'ClusterRole runlet-operator-tenant: bind rbac.authorization.k8s.io/clusterroles [runlet-sidecar]',
        // And when an API key's RoleBinding to the caller role is created.
        'ClusterRole runlet-operator-tenant: bind rbac.authorization.k8s.io/clusterroles [runlet-api-key]',
      ]);
      // Requests this run cannot make in its seconds, each made by the code named: a repeat of an Event already
      // written (its count bumped), and the autoscaler sizing an App once its load has been stable for a window.
      const madeOnlyOverTime = new Set([
        'ClusterRole runlet-operator: patch core/events', // kube/event-recorder.ts, a mergePatch of the count
        'ClusterRole runlet-operator-tenant: patch apps/deployments/scale', // operator/autoscaling/scaler.ts, a merge patch of spec.replicas
      ]);
      const granted = new Set<string>();
      const used = new Set<string>();
      for (const [chart, requests] of [[production, productionRequests], [defaults, defaultRequests]] as const) {
        const { cluster: clusterRules, tenant, enrolled, leaderElection, holder, results, heldCalls } = operatorRoles(chart);
        const made = requests.flatMap((request) => requestAttributes(request));
        const roles: ScopedRole[] = [
          ['ClusterRole runlet-operator', clusterRules, undefined],
          ['ClusterRole runlet-operator-tenant', tenant, enrolled],
          ['Role runlet-operator-leader-election', leaderElection, [RELEASE.namespace]],
          ['Role runlet-operator-holder', holder, [RELEASE.namespace]],
          ['Role runlet-operator-results', results, [RELEASE.namespace]],
          ['Role runlet-operator-held-calls', heldCalls, [HELD_CALLS]],
        ];
        for (const [role, rules, namespaces] of roles) {
          for (const right of rightsOf(rules)) {
            const name = `${role}: ${describeRight(right)}`;
            granted.add(name);
            if (made.some((request) => holdsIn(namespaces, request) && uses(right, request))) used.add(name);
          }
        }
      }
      const unused = [...granted].filter((right) => !used.has(right) && !checkedWithoutARequest.has(right) && !madeOnlyOverTime.has(right));
      expect(unused, 'rights of the chart that no request of the operator used: drop them from the chart and the README table, or make this run use them').toEqual([]);
      const { tenant } = operatorRoles(production);
      // The run exercised what it should: the Lease, an apply of every child kind, the status, the prune.
      const seen = new Set(attributes.map((attrs) => `${attrs.verb} ${attrs.resource}`));
      const kinds = ['create leases', 'update leases', 'watch apps', 'patch deployments', 'patch services', 'patch ingresses', 'patch rolebindings', 'patch serviceaccounts', 'get configmaps', 'patch apps/status', 'delete ingresses'];
      const watches = ['watch ingresses', 'watch rolebindings', 'watch serviceaccounts'];
      const holding = ['get secrets', 'create secrets', 'delete secrets', 'patch secrets', 'get endpoints', 'watch endpoints', 'list endpointslices', 'patch endpointslices', 'delete endpoints'];
      const keys = ['create serviceaccounts', 'create rolebindings', 'create serviceaccounts/token', 'delete serviceaccounts'];
      for (const expected of [...kinds, ...watches, ...holding, ...keys, 'delete rolebindings', 'delete roles', 'list nodes', 'watch nodes']) {
        expect(seen, expected).toContain(expected);
      }

      // The activator, likewise under its own ClusterRole and Role: every request allowed, no right unused.
      const activatorRuns = [[production, productionRun.activator], [defaults, defaultRun.activator]] as const;
      const activatorAttributes = activatorRuns.flatMap(([chart, requests]) =>
        requests.flatMap((request) =>
          requestAttributes(request).map((attrs) => ({
            request: `${request.method} ${request.path}`,
            permitted: allowedBy(activatorRoles(chart), attrs),
            ...attrs,
          })),
        ),
      );
      expect(activatorAttributes.filter((attrs) => !attrs.permitted)).toEqual([]);
      // An API key's call is checked against its ServiceAccount (run-request/auth/service-account-check.ts): this
      // run's callers hold the project's shared key, which names no ServiceAccount.
      const madeOnlyElsewhere = new Set(['ClusterRole runlet-activator: get core/serviceaccounts']);
      const activatorGranted = new Set<string>();
      const activatorUsed = new Set<string>();
      for (const [chart, requests] of activatorRuns) {
        const made = requests.flatMap((request) => requestAttributes(request));
        for (const [role, rules, namespaces] of activatorRoles(chart)) {
          for (const right of rightsOf(rules)) {
            const name = `${role}: ${describeRight(right)}`;
            activatorGranted.add(name);
            if (made.some((request) => holdsIn(namespaces, request) && uses(right, request))) activatorUsed.add(name);
          }
        }
      }
      const activatorUnused = [...activatorGranted].filter((right) => !activatorUsed.has(right) && !madeOnlyElsewhere.has(right));
      expect(activatorUnused, 'rights of the activator that none of its requests used: drop them from the chart and the README table, or make this run use them').toEqual([]);
      const activatorSeen = new Set(activatorAttributes.map((attrs) => `${attrs.verb} ${attrs.resource}`));
      for (const expected of ['watch apps', 'list endpoints', 'watch endpoints', 'get secrets', 'create secrets', 'list secrets', 'update secrets', 'delete secrets', 'get deployments/scale', 'update deployments/scale']) {
        expect(activatorSeen, `activator: ${expected}`).toContain(expected);
      }

      // RBAC escalation prevention: the binding is allowed because the operator may `bind` the ClusterRole it names.
      const binding = await api.get<V1RoleBinding & KubeObject>(resourcePath({ apiVersion: rbacGroup, kind: 'RoleBinding', namespace: 'team-a', name: 'runlet-sidecar' }));
      expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-sidecar' });
      expect(allows(tenant, { verb: 'bind', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', namespace: 'team-a', name: binding.roleRef.name })).toBe(true);
      expect(await api.find(resourcePath({ apiVersion: rbacGroup, kind: 'Role', namespace: 'team-a', name: 'runlet-sidecar' })), 'the earlier version’s Role').toBeUndefined();
      expect(await api.find(resourcePath({ apiVersion: 'v1', kind: 'Secret', namespace: RELEASE.namespace, name: 'runlet-holder-key' })), 'the earlier version’s root key').toBeUndefined();

      // OwnerReferencesPermissionEnforcement: a child may block its owner's deletion only when written by
      // whoever may update the owner's finalizers.
      const deployment = await api.get<KubeObject>(resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'team-a', name: 'hello' }));
      const blocking = (deployment.metadata?.ownerReferences ?? []).filter((ref) => ref.blockOwnerDeletion === true);
      expect(blocking.map((ref) => ref.kind)).toEqual(['App']);
      expect(allows(operatorRoles(production).cluster, { verb: 'update', apiGroup: 'runlet.dev', resource: 'apps/finalizers', namespace: 'team-a', name: 'hello' })).toBe(true);
    } finally {
      await api.close();
    }
  });
});
