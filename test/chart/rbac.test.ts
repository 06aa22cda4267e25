// The chart's RBAC: its rules are the README's tables row for row, the runs viewer grants what the
// management API asks for, and the operator, run against the in-memory API server with the chart's
// configuration, makes no request its roles would refuse.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1ClusterRole, V1ConfigMap, V1Role, V1RoleBinding } from '@kubernetes/client-node';
import pino from 'pino';
import { parse as parseYaml } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveConfig, type ConfigLayer } from '../../operator/config.ts';
import { KubeApi } from '../../kube/client.ts';
import { resourcePath, type KubeObject } from '../../kube/objects.ts';
import { createOperator, type Operator } from '../../operator/main.ts';
import { RUNS_ACCESS, RUNS_CANCEL_ACCESS } from '../../management/kube-auth.ts';
import { RunAuthenticator } from '../../run-request/auth/authenticator.ts';
import { signLocalToken } from '../../run-request/auth/local-key.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { kubernetesProblems } from './kube-validate.ts';
import { allows, requestAttributes, rulesFromTable, type PolicyRule, type RequestAttributes, type TableRule } from './rbac.ts';
import type { RenderedChart } from '../../charts/render/render.ts';
import { CHART_DIR, RELEASE, VALUE_SETS, objectOf, renderWith } from './rendered.ts';

const README = readFileSync(join(CHART_DIR, 'README.md'), 'utf8');
const OPERATOR_TABLE = "## The operator's permissions";
const VIEWER_TABLE = '## Read access to runs';
const SIDECAR_TABLE = "## The sidecar's permissions";
const EDITOR_TABLE = '## Editing Apps';
const OPERATOR_ROLE_TABLE = '## Cancelling runs';
const AGGREGATE = 'rbac.authorization.k8s.io/aggregate-to-';
const PROJECT_KEY = 'a shared HS256 key of the project team-a, 32 bytes or more';

/** A rule as the chart states it, for comparing: no empty resourceNames, no extra fields. */
function plain(rule: PolicyRule): PolicyRule {
  return { apiGroups: rule.apiGroups, resources: rule.resources, verbs: rule.verbs, ...(rule.resourceNames === undefined ? {} : { resourceNames: rule.resourceNames }) };
}

function operatorRoles(chart: RenderedChart): { cluster: PolicyRule[]; leaderElection: PolicyRule[]; holder: PolicyRule[] } {
  const holderRole = chart.manifests.some((m) => m.object.kind === 'Role' && m.object.metadata.name === 'runlet-operator-holder');
  return {
    cluster: objectOf<V1ClusterRole>(chart, 'ClusterRole', 'runlet-operator').rules!,
    leaderElection: objectOf<V1Role>(chart, 'Role', 'runlet-operator-leader-election').rules!,
    holder: holderRole ? objectOf<V1Role>(chart, 'Role', 'runlet-operator-holder').rules! : [],
  };
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

describe('the RBAC tables of charts/runlet/README.md', () => {
  const chart = renderWith(VALUE_SETS.default);

  it("are the operator's ClusterRole, leader-election Role and holder Role, row for row", () => {
    const table = rulesFromTable(README, OPERATOR_TABLE);
    const { cluster, leaderElection, holder } = operatorRoles(chart);
    expect(new Set(table.map((row) => row.scope))).toEqual(new Set(['cluster', 'cluster (holder)', 'cluster (auto sidecars)', 'release namespace', 'release namespace (holder)']));
    expect(cluster.map(plain)).toEqual(rowsOf(table, 'cluster', 'cluster (holder)', 'cluster (auto sidecars)'));
    expect(leaderElection.map(plain)).toEqual(rowsOf(table, 'release namespace'));
    expect(holder.map(plain)).toEqual(rowsOf(table, 'release namespace (holder)'));
    for (const row of table) expect(row.why.length, `why of ${row.resources?.join(',')}`).toBeGreaterThan(20);
  });

  it('lose the (holder) rows, and the holder Role, with holder.enabled false', () => {
    const table = rulesFromTable(README, OPERATOR_TABLE);
    const { cluster, leaderElection, holder } = operatorRoles(renderWith([], { holder: { enabled: false } }));
    expect(cluster.map(plain)).toEqual(rowsOf(table, 'cluster', 'cluster (auto sidecars)'));
    expect(leaderElection.map(plain)).toEqual(rowsOf(table, 'release namespace'));
    expect(holder).toEqual([]);
  });

  it.each([false, true])('lose the (auto sidecars) row with apps.nativeSidecars %s', (nativeSidecars) => {
    const table = rulesFromTable(README, OPERATOR_TABLE);
    const { cluster } = operatorRoles(renderWith([], { apps: { nativeSidecars } }));
    expect(cluster.map(plain)).toEqual(rowsOf(table, 'cluster', 'cluster (holder)'));
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
    const { cluster } = operatorRoles(chart);
    expect(allows(cluster, { verb: 'bind', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', namespace: undefined, name: 'runlet-sidecar' })).toBe(true);
    expect(allows(cluster, { verb: 'bind', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', namespace: undefined, name: 'cluster-admin' })).toBe(false);
    const granted = sidecar.flatMap((rule) => rule.apiGroups!.flatMap((apiGroup) => rule.resources!.flatMap((resource) => rule.verbs.map((verb) => ({ verb, apiGroup, resource, namespace: 'team-a', name: undefined })))));
    expect(granted.filter((request) => !allows(cluster, request)).map((request) => `${request.verb} ${request.resource}`)).toEqual(['create runlogs', 'patch runlogs/status']);
  });

  it('come with a RoleBinding example that is valid and binds the runs viewer', () => {
    const section = README.slice(README.indexOf(VIEWER_TABLE));
    const example = section.match(/```yaml\n([\s\S]*?)```/)?.[1];
    const binding = parseYaml(example ?? '', { version: '1.1' }) as V1RoleBinding & { metadata: { name: string } };
    expect(kubernetesProblems(binding)).toEqual([]);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-runs-viewer' });
  });
});

describe('the operator under the chart’s RBAC', () => {
  let server: KubeApiServer | undefined;
  let operator: Operator | undefined;

  afterEach(async () => {
    await operator?.stop();
    await server?.close();
    operator = server = undefined;
  });

  /** The configuration the chart gives the operator, made to run here: loopback ports and quick elections. */
  function chartConfig(chart: RenderedChart): ConfigLayer[] {
    const file = parseYaml(objectOf<V1ConfigMap>(chart, 'ConfigMap', 'runlet-operator-config').data!['operator.yaml']!) as ConfigLayer;
    return [
      file,
      {
        server: { host: '127.0.0.1', port: 0 },
        holder: { host: '127.0.0.1', port: 0 },
        leaderElection: { identity: 'runlet-operator-0', leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 0.2 },
      },
    ];
  }

  /**
   * Runs an operator with that configuration, its holder as `runlet operator` runs it (callers of team-a
   * authenticated with its key here), until every request of `done` is logged, calling `meanwhile` once it
   * listens; the requests it made meanwhile.
   */
  async function requestsOfOperator(
    chart: RenderedChart,
    done: { method: string; pathPattern: RegExp; watch?: boolean }[],
    meanwhile: (operator: Operator) => Promise<void> = async () => {},
  ): Promise<{ method: string; path: string; watch: boolean; contentType: string | undefined }[]> {
    const from = server!.requests.length;
    const config = resolveConfig(...chartConfig(chart));
    const auth = new RunAuthenticator({ audience: 'runlet', hs256Keys: { 'team-a': new TextEncoder().encode(PROJECT_KEY) } });
    operator = createOperator({ kubeConfig: server!.kubeConfig(), config, logger: pino({ level: 'silent' }), processMetrics: false, holder: config.holder.enabled ? { auth } : undefined });
    try {
      operator.start();
      await operator.listen();
      await meanwhile(operator);
      for (const request of done) await server!.waitForRequest(request, 20_000);
      // Stopping releases the Lease: those requests count too.
      await operator.stop();
    } finally {
      await auth.close();
    }
    operator = undefined;
    return server!.requests.slice(from);
  }

  it('makes only requests its ClusterRole and Roles allow, with its holder taking a call at zero, binding the sidecar ClusterRole in place of an earlier version’s Role', async () => {
    server = await startKubeApiServer({ namespaces: ['default', RELEASE.namespace, 'team-a'] });
    const api = new KubeApi(await server.credentials());
    try {
      const production = renderWith(VALUE_SETS.production);
      for (const crd of production.crds) await api.create('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', parseYaml(crd.text) as KubeObject);
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

      // An App that scales to zero, at zero (its Deployment made so by the test): a call to it wakes it.
      await api.create(resourcePath({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', namespace: 'team-a' }), { ...app, metadata: { name: 'zero', namespace: 'team-a' }, spec: { ...app.spec, scaling: { minReplicas: 0 } } });
      const zeroLabels = { 'runlet.dev/app': 'zero' };
      await api.create(resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'team-a' }), {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'zero' },
        spec: { replicas: 0, selector: { matchLabels: zeroLabels }, template: { metadata: { labels: zeroLabels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
      } as KubeObject);
      const callAtZero = async (running: Operator) => {
        const answer = await fetch(`${running.holder!.url}/v4/team-a/zero/run?async=true`, {
          method: 'POST',
          headers: { authorization: `Bearer ${await signLocalToken({ projectId: 'team-a', key: PROJECT_KEY })}`, 'content-type': 'application/json' },
          body: '{}',
        });
        expect(answer.status).toBe(202);
      };

      // With the app ingress on (production values), then off (defaults): the second removes the Ingress, and its
      // holder takes over the call the first one held.
      const productionRequests = await requestsOfOperator(
          production,
          [
            { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/apps\/hello\/status$/ },
            { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/networkpolicies\/hello$/ },
            { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/endpoints\/zero$/ },
            { method: 'PATCH', pathPattern: /\/namespaces\/team-a\/secrets\/runlet-holder-key$/ },
            { method: 'PUT', pathPattern: /\/namespaces\/team-a\/deployments\/zero\/scale$/ },
          ],
          callAtZero,
        );
      const defaults = renderWith(VALUE_SETS.default);
      const defaultRequests = await requestsOfOperator(defaults, [
          { method: 'DELETE', pathPattern: /\/namespaces\/team-a\/ingresses\/hello$/ },
          { method: 'DELETE', pathPattern: /\/namespaces\/team-a\/networkpolicies\/hello$/ },
          { method: 'PUT', pathPattern: /\/namespaces\/team-a\/secrets\/runlet-held-/ },
          { method: 'GET', pathPattern: /^\/api\/v1\/nodes$/, watch: true },
        ]);

      // Each run against the roles of the chart it ran with (the production values fix nativeSidecars: false).
      const attributesUnder = (chart: RenderedChart, requests: typeof productionRequests) => {
        const { cluster, leaderElection, holder } = operatorRoles(chart);
        const permitted = (request: RequestAttributes) =>
          allows(cluster, request) || (request.namespace === RELEASE.namespace && (allows(leaderElection, request) || allows(holder, request)));
        return requests.flatMap((request) => requestAttributes(request).map((attrs) => ({ request: `${request.method} ${request.path}`, permitted: permitted(attrs), ...attrs })));
      };
      const attributes = [...attributesUnder(production, productionRequests), ...attributesUnder(defaults, defaultRequests)];
      expect(attributes.filter((attrs) => !attrs.permitted)).toEqual([]);
      const { cluster } = operatorRoles(production);
      // The run exercised what it should: the Lease, an apply of every child kind, the status, the prune.
      const seen = new Set(attributes.map((attrs) => `${attrs.verb} ${attrs.resource}`));
      const kinds = ['create leases', 'update leases', 'watch apps', 'patch deployments', 'patch services', 'patch ingresses', 'patch rolebindings', 'patch serviceaccounts', 'get configmaps', 'patch apps/status', 'delete ingresses'];
      const watches = ['watch ingresses', 'watch rolebindings', 'watch serviceaccounts'];
      const holding = ['get secrets', 'create secrets', 'patch secrets', 'list secrets', 'update secrets', 'get endpoints', 'watch endpoints', 'patch endpoints', 'get deployments/scale', 'update deployments/scale'];
      for (const expected of [...kinds, ...watches, ...holding, 'delete rolebindings', 'delete roles', 'list nodes', 'watch nodes']) {
        expect(seen, expected).toContain(expected);
      }

      // RBAC escalation prevention: the binding is allowed because the operator may `bind` the ClusterRole it names.
      const binding = await api.get<V1RoleBinding & KubeObject>(resourcePath({ apiVersion: rbacGroup, kind: 'RoleBinding', namespace: 'team-a', name: 'runlet-sidecar' }));
      expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-sidecar' });
      expect(allows(cluster, { verb: 'bind', apiGroup: 'rbac.authorization.k8s.io', resource: 'clusterroles', namespace: undefined, name: binding.roleRef.name })).toBe(true);
      expect(await api.find(resourcePath({ apiVersion: rbacGroup, kind: 'Role', namespace: 'team-a', name: 'runlet-sidecar' })), 'the earlier version’s Role').toBeUndefined();

      // OwnerReferencesPermissionEnforcement: a child may block its owner's deletion only when written by
      // whoever may update the owner's finalizers.
      const deployment = await api.get<KubeObject>(resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'team-a', name: 'hello' }));
      const blocking = (deployment.metadata?.ownerReferences ?? []).filter((ref) => ref.blockOwnerDeletion === true);
      expect(blocking.map((ref) => ref.kind)).toEqual(['App']);
      expect(allows(cluster, { verb: 'update', apiGroup: 'runlet.dev', resource: 'apps/finalizers', namespace: 'team-a', name: 'hello' })).toBe(true);
    } finally {
      await api.close();
    }
  });
});
