// The operator under the chart's RBAC, enforced by the in-memory API server: it reconciles an App in a namespace
// enrolled at install (tenantNamespaces), leaves an App in a namespace that is not enrolled untouched and says so
// in its status and a Warning Event, and reconciles it as soon as a cluster admin runs `runlet namespace enable`.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import type { App } from '../crds/app-schema.ts';
import { resourcePath, type KubeObject } from '../kube/objects.ts';
import { createOperator, type Operator } from './main.ts';
import { startKubeApiServer } from '../test/kube/index.ts';
import { renderWith, RELEASE } from '../test/chart/rendered.ts';
import { condition, createApp, createCodeConfigMap, isAppliedAtGeneration, paths, prepareCluster, testConfig, waitForApp, type TestCluster } from '../test/support/fake-cluster.ts';
import { testLogger } from '../test/support/logger.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import { runCli } from '../test/support/cli.ts';
import { waitFor } from '../test/support/wait.ts';
import type { KubeApiServer } from '../test/kube/server.ts';
import { KubeApiError } from '../kube/errors.ts';
import { NOT_ENROLLED_REASON, isRbacForbidden } from './namespace-enrolment.ts';

const OPERATOR_TOKEN = 'operator-token';
const OPERATOR_USER = `system:serviceaccount:${RELEASE.namespace}:runlet-operator`;

/** The chart's RBAC objects (ClusterRoles, Roles and their bindings), as `helm install` creates them. */
async function installChartRbac(cluster: TestCluster, values: Record<string, unknown>): Promise<void> {
  const chart = renderWith([], values);
  const order = ['ClusterRole', 'Role', 'ClusterRoleBinding', 'RoleBinding'];
  const objects = chart.manifests.map((manifest) => manifest.object as unknown as KubeObject).filter((object) => order.includes(object.kind!));
  for (const object of objects.sort((a, b) => order.indexOf(a.kind!) - order.indexOf(b.kind!))) {
    const namespace = object.kind === 'Role' || object.kind === 'RoleBinding' ? (object.metadata!.namespace ?? RELEASE.namespace) : undefined;
    await cluster.api.create(resourcePath({ apiVersion: object.apiVersion!, kind: object.kind!, namespace }), object);
  }
}

describe('an RBAC refusal', () => {
  it('is a 403 in the authorizer’s words, not a quota’s, an admission plugin’s or a namespace being deleted', () => {
    const forbidden = (message: string) => new KubeApiError('PATCH /apis/apps/v1/namespaces/team-b/deployments/hello', 403, message, { reason: 'Forbidden' });
    expect(isRbacForbidden(forbidden('deployments.apps "hello" is forbidden: User "system:serviceaccount:runlet-system:runlet-operator" cannot patch resource "deployments" in API group "apps" in the namespace "team-b"'))).toBe(true);
    expect(isRbacForbidden(forbidden('services "hello" is forbidden: exceeded quota: compute, requested: services=1, used: services=5, limited: services=5'))).toBe(false);
    expect(isRbacForbidden(forbidden('pods "hello-1" is forbidden: violates PodSecurity "restricted:latest"'))).toBe(false);
    expect(isRbacForbidden(forbidden('deployments.apps "hello" is forbidden: unable to create new content in namespace team-b because it is being terminated'))).toBe(false);
    expect(isRbacForbidden(new KubeApiError('GET /x', 404, 'not found'))).toBe(false);
  });
});

describe('App namespaces, under the chart’s RBAC enforced by the API server', () => {
  let cluster: TestCluster<KubeApiServer> | undefined;
  let operator: Operator | undefined;
  let workDir: string | undefined;
  afterEach(async () => {
    await operator?.stop();
    await cluster?.close();
    if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
    operator = cluster = workDir = undefined;
  });

  it('reconciles an App of an enrolled namespace, leaves one elsewhere untouched and says how to enrol it, then reconciles it once enrolled', async () => {
    const server = await startKubeApiServer({ rbac: true, namespaces: ['default', 'kube-system', RELEASE.namespace, 'team-a', 'team-b'] });
    cluster = await prepareCluster(server);
    // What the chart installs with team-a enrolled: no holder, RunLogs as the run store (no PostgreSQL here).
    await installChartRbac(cluster, { tenantNamespaces: ['team-a'], holder: { enabled: false }, results: { postgres: { embedded: { enabled: false } } } });
    server.tokens.set(OPERATOR_TOKEN, { username: OPERATOR_USER, groups: ['system:serviceaccounts', `system:serviceaccounts:${RELEASE.namespace}`, 'system:authenticated'] });
    for (const namespace of ['team-a', 'team-b']) {
      await createCodeConfigMap(cluster.api, namespace, 'hello-code', 'hello', { 'main.py': 'def run():\n    return 1\n' });
      await createApp(cluster.api, namespace, 'hello', pythonSpec());
    }

    const config = testConfig({ holder: { enabled: false }, leaderElection: { namespace: RELEASE.namespace, leaseName: 'runlet-operator' } });
    operator = createOperator({ kubeConfig: server.kubeConfig({ token: OPERATOR_TOKEN }), config, logger: testLogger(), processMetrics: false });
    operator.start();

    await waitForApp(cluster.api, 'team-a', 'hello', isAppliedAtGeneration, 'applied in the enrolled namespace');
    expect(await cluster.api.find(paths.deployment('team-a', 'hello'))).toBeDefined();

    const refused = await waitForApp(cluster.api, 'team-b', 'hello', (app) => condition(app, 'ChildrenApplied')?.reason === NOT_ENROLLED_REASON, 'reported as not enrolled');
    for (const type of ['Ready', 'ChildrenApplied']) {
      expect(condition(refused, type)).toMatchObject({ status: 'False', reason: NOT_ENROLLED_REASON });
      expect(condition(refused, type)?.message).toContain('runlet namespace enable team-b');
    }
    // Nothing of it was made: the API server refused every write of the operator there.
    for (const path of [paths.deployment('team-b', 'hello'), paths.service('team-b', 'hello'), paths.serviceAccount('team-b', 'runlet-sidecar'), paths.roleBinding('team-b', 'runlet-sidecar')]) {
      expect(await cluster.api.find(path), String(path)).toBeUndefined();
    }
    const refusals = server.requests.filter((request) => request.token === OPERATOR_TOKEN && request.path.includes('/namespaces/team-b/') && request.status === 403);
    expect(refusals.length).toBeGreaterThan(0);
    // A Warning Event on the App, for kubectl describe.
    const events = await waitFor(
      async () => {
        const list = await cluster!.api.list<KubeObject & { reason?: string; type?: string; message?: string }>(resourcePath({ apiVersion: 'v1', kind: 'Event', namespace: 'team-b' }));
        const found = list.items.filter((event) => event.reason === NOT_ENROLLED_REASON);
        return found.length > 0 ? found : undefined;
      },
      { timeoutMs: 20_000, what: 'a NamespaceNotEnrolled Event in team-b' },
    );
    expect(events[0]).toMatchObject({ type: 'Warning' });

    // A cluster admin enrols team-b with their own kubeconfig (the test's credential, which the server does not check).
    workDir = await mkdtemp(join(tmpdir(), 'runlet-enrol-'));
    const kubeconfig = join(workDir, 'admin.kubeconfig');
    await server.writeKubeconfig(kubeconfig);
    const dryRun = await runCli(['namespace', 'enable', 'team-b', '--dry-run'], { env: { KUBECONFIG: kubeconfig } });
    expect(dryRun.code, dryRun.stderr).toBe(0);
    const printed = parseAllDocuments(dryRun.stdout).map((document) => document.toJS() as KubeObject & { roleRef: { name: string } });
    expect(printed.map((binding) => `${binding.metadata?.namespace}/${binding.metadata?.name} → ${binding.roleRef.name}`)).toEqual(['team-b/runlet-operator-tenant → runlet-operator-tenant']);
    expect(await cluster.api.find(paths.roleBinding('team-b', 'runlet-operator-tenant')), 'a dry run changes nothing').toBeUndefined();

    const enabled = await runCli(['namespace', 'enable', 'team-b'], { env: { KUBECONFIG: kubeconfig } });
    expect(enabled.code, enabled.stderr).toBe(0);
    // At once (the enrolment watch), not at the end of the reconcile's backoff.
    const applied = await waitForApp(cluster.api, 'team-b', 'hello', isAppliedAtGeneration, 'applied once enrolled');
    expect(condition(applied, 'ChildrenApplied')?.status).toBe('True');
    expect(await cluster.api.find(paths.deployment('team-b', 'hello'))).toBeDefined();
  });

  it.each(['kube-system', RELEASE.namespace])('refuses to enrol %s', async (namespace) => {
    const server = await startKubeApiServer({ namespaces: ['default', 'kube-system', RELEASE.namespace] });
    cluster = await prepareCluster(server);
    await installChartRbac(cluster, { holder: { enabled: false } });
    workDir = await mkdtemp(join(tmpdir(), 'runlet-enrol-'));
    const kubeconfig = join(workDir, 'admin.kubeconfig');
    await server.writeKubeconfig(kubeconfig);
    const result = await runCli(['namespace', 'enable', namespace], { env: { KUBECONFIG: kubeconfig } });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${namespace} cannot be an App namespace`);
    const bindings = await cluster.api.list<App & KubeObject>(resourcePath({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', namespace }));
    expect(bindings.items.filter((binding) => binding.metadata.name.endsWith('-tenant'))).toEqual([]);
  });
});
