// The operator on a real Kubernetes control plane (test/control-plane: kube-apiserver, controller manager and
// scheduler from Debian's kubernetes 1.20 source), pods run by the test kubelet: the shared end-to-end suites
// (operator-suite.ts; autoscaling-suite.ts and scale-to-zero-suite.ts with the real Deployment controller acting
// on the scale), then what only a real server shows — kubectl applies with validation on, the operator's
// ClusterRole, TokenReview and SubjectAccessReview, the garbage collector, leader election.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ApiException, AppsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { AUTOSCALER_FIELD_MANAGER, ownsReplicas } from '../../operator/autoscaling/replicas-owner.ts';
import { ensureResultsSecret } from '../../operator/results-secret.ts';
import { namespaceHolderKeys } from '../../operator/autoscaling/holder-key.ts';
import { HeldRecords } from '../../activator/hold-records.ts';
import { newRunId } from '../../run-request/run-id.ts';
import { controlPlaneSkipReason } from '../control-plane/control-plane.ts';
import { launchBrowser } from '../support/browser.ts';
import { verifyWebhookSignature } from '../support/signature.ts';
import { kubeStatusOf } from '../support/kube-status.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { AUTOSCALING_TEST_CONFIG, autoscalingSuite } from './autoscaling-suite.ts';
import { ACTIVATOR, OPERATOR, startControlPlaneCluster, type ControlPlaneCluster } from './control-plane-cluster.ts';
import { HelloApp } from './hello-app.ts';
import { REPO } from './e2e-cluster.ts';
import { availableAtGeneration, isReady, operatorSuite, readyAtGeneration, STATE_TIMEOUT_MS, SUITE_OPTIONS } from './operator-suite.ts';
import { scaleToZeroSuite } from './scale-to-zero-suite.ts';
import { enrolNamespace } from '../support/enrolment.ts';
import { runCli } from '../support/cli.ts';
import { kubePathOf } from '../support/kube-path.ts';

const skipReason = controlPlaneSkipReason();
if (skipReason !== undefined) console.log(`operator end to end on a real control plane: skipped, ${skipReason}`);

describe.skipIf(skipReason !== undefined)('operator end to end on a real control plane', SUITE_OPTIONS, () => {
  let cluster: ControlPlaneCluster;
  operatorSuite(
    async () =>
      (cluster = await startControlPlaneCluster({
        // The autoscaling suite's short windows (Apps of fixed size are not autoscaled), and the holder, whose
        // async calls' webhooks go to a receiver on the loopback.
        operatorConfig: { ...AUTOSCALING_TEST_CONFIG, webhookAllowCidrs: ['127.0.0.0/8'] },
        holder: true,
      })),
  );

  const wait = <T>(what: string, check: () => Promise<T | false | undefined>) =>
    waitFor(check, { what, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 200 });

  /** An App applied with plain `kubectl apply` (validation on), once Available with a Ready pod. */
  async function kubectlApplyApp(namespace: string, scaling?: Record<string, unknown>): Promise<HelloApp> {
    const app = new HelloApp(cluster.kubeConfig, namespace, { scaling });
    const [namespaceObject, ...objects] = await app.manifests();
    // The namespace first, enrolled by a cluster admin as the README says, then the App and its code.
    const namespaceManifest = join(cluster.controlPlane.dir, `${namespace}-namespace.yaml`);
    await writeFile(namespaceManifest, toYaml(namespaceObject));
    await cluster.kubectl('apply', '-f', namespaceManifest);
    await enrolNamespace(cluster.kubeConfig, namespace);
    const manifest = join(cluster.controlPlane.dir, `${namespace}.yaml`);
    await writeFile(manifest, objects.map((object) => toYaml(object)).join('---\n'));
    await cluster.kubectl('apply', '-f', manifest);
    await wait(`App ${namespace}/hello Available`, async () => availableAtGeneration(await app.read()));
    // As the README tells users to wait: Ready is serving, the rollout of this generation done.
    await cluster.kubectl('wait', '--namespace', namespace, '--for', 'condition=Ready', '--timeout', '60s', 'app/hello');
    return app;
  }

  it('applies an App with kubectl; it is called through its pod, and the management API lists its run after TokenReview and SubjectAccessReview', async () => {
    const app = await kubectlApplyApp(`runlet-cp-${Date.now().toString(36)}`);
    const pod = await wait('the pod Ready', async () => (await app.pods()).find(isReady));
    const { runUrl } = await cluster.sidecar(pod);
    const token = await cluster.token(app.namespace);
    const response = await fetch(`${runUrl}/v4/${app.namespace}/hello/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: 'Ada' }),
    });
    expect(response.status).toBe(200);
    const { run_id: runId } = (await response.json()) as { run_id: string };

    // The management API takes tokens for the API server's own audience (TokenReview's default), as
    // `kubectl create token` issues them, and tokens for Runlet's (an API key's), reviewed for that audience and
    // held to their own namespace: either way RBAC decides, and the default ServiceAccount has no grant yet.
    const runsUrl = `${cluster.operatorUrl}/v2/projects/${app.namespace}/apps/hello/runs`;
    const apiToken = await cluster.serviceAccountToken(app.namespace, 'default');
    expect((await fetch(runsUrl, { headers: { authorization: `Bearer ${token}` } })).status, 'a Runlet token of a service account without a grant').toBe(403);
    const listRuns = () => fetch(runsUrl, { headers: { authorization: `Bearer ${apiToken}` } });
    expect((await listRuns()).status, 'a service account without a grant').toBe(403);
    expect((await fetch(runsUrl, { headers: { authorization: 'Bearer not-a-token' } })).status, 'a token the API server rejects').toBe(401);

    const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRoleBinding({
      namespace: app.namespace,
      body: {
        metadata: { name: 'default-runs-viewer' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-runs-viewer' },
        subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: app.namespace }],
      },
    });
    // The operator's Events on the App, where users look for them.
    const described = await wait('the Ready Event in kubectl describe', async () => {
      const text = await cluster.kubectl('describe', 'app', '--namespace', app.namespace, 'hello');
      return /Normal\s+Ready\s+.*runlet-operator/.test(text) && text;
    });
    expect(described).toMatch(/Events:/);

    const listed = await wait(`run ${runId} listed once the grant applies`, async () => {
      const page = await listRuns();
      if (page.status !== 200) return undefined;
      const body = (await page.json()) as { items: { id: string }[] };
      return body.items.some((run) => run.id === runId) && body;
    });
    expect(listed.items.map((run) => run.id)).toContain(runId);
  });

  it('cancels a run through the management API for a token whose namespace role is edit (runlet-runs-operator aggregated into it), not view', async () => {
    const app = await kubectlApplyApp(`runlet-cp-cancel-${Date.now().toString(36)}`);
    const pod = await wait('the pod Ready', async () => (await app.pods()).find(isReady));
    const { runUrl } = await cluster.sidecar(pod);
    const called = await fetch(`${runUrl}/v4/${app.namespace}/hello/count?async=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.token(app.namespace)}` },
      body: JSON.stringify({ n: 600, pause: 0.1 }),
    });
    expect(called.status).toBe(202);
    const { run_id: runId } = (await called.json()) as { run_id: string };

    const apiToken = await cluster.serviceAccountToken(app.namespace, 'default');
    const runUrlOf = `${cluster.operatorUrl}/v2/projects/${app.namespace}/apps/hello/runs/${runId}`;
    const cancel = () => fetch(`${runUrlOf}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${apiToken}` } });
    const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const bind = (role: string) =>
      rbac.createNamespacedRoleBinding({
        namespace: app.namespace,
        body: { metadata: { name: `default-${role}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role }, subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: app.namespace }] },
      });
    await bind('view');
    await wait(`run ${runId} listed running`, async () => {
      const answer = await fetch(runUrlOf, { headers: { authorization: `Bearer ${apiToken}` } });
      return answer.status === 200 && ((await answer.json()) as { item: { status: string } }).item.status === 'running';
    });
    const refused = await cancel();
    expect(refused.status, 'view lists runs, cancels none').toBe(403);
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/verb "cancel"/);

    await bind('edit');
    // Decisions are cached (a refusal 5 s): the grant applies once the cache lets the review be asked again.
    const accepted = await wait('the cancel accepted once edit is bound', async () => {
      const answer = await cancel();
      return answer.status === 202 && ((await answer.json()) as { item: { id: string } });
    });
    expect(accepted.item.id).toBe(runId);
    const cancelled = await wait(`run ${runId} cancelled`, async () => {
      const answer = await fetch(runUrlOf, { headers: { authorization: `Bearer ${apiToken}` } });
      const { item } = (await answer.json()) as { item: { status: string; reason: string | null } };
      return item.status === 'cancelled' && item;
    });
    expect(cancelled.reason).toBe('cancel_requested');
  });

  it('makes an API key under the real RBAC (a ServiceAccount bound to runlet-api-key, a TokenRequest token) that calls the app and reads its runs; revoked, it is refused within a minute on both', async () => {
    const app = await kubectlApplyApp(`runlet-keys-${Date.now().toString(36)}`);
    const pod = await wait('the pod Ready', async () => (await app.pods()).find(isReady));
    const { runUrl } = await cluster.sidecar(pod);
    const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    // The namespace's administrator: the built-in admin ClusterRole, into which runlet-api-keys-admin is aggregated.
    await rbac.createNamespacedRoleBinding({
      namespace: app.namespace,
      body: {
        metadata: { name: 'default-admin' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
        subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: app.namespace }],
      },
    });
    const admin = { authorization: `Bearer ${await cluster.serviceAccountToken(app.namespace, 'default')}` };
    const keysUrl = `${cluster.operatorUrl}/v2/projects/${app.namespace}/keys`;
    const expiresAt = new Date(Date.now() + 2 * 86_400_000);
    const made = await wait('a key made once the aggregated grant applies', async () => {
      const answer = await fetch(keysUrl, { method: 'POST', headers: { ...admin, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'ci', expiresAt: expiresAt.toISOString() }) });
      return answer.status === 201 && ((await answer.json()) as { item: { expiresAt: string }; token: string });
    });
    expect(Math.abs(Date.parse(made.item.expiresAt) - expiresAt.getTime())).toBeLessThan(5_000);
    const key = { authorization: `Bearer ${made.token}` };
    const call = () => fetch(`${runUrl}/v4/${app.namespace}/hello/run`, { method: 'POST', headers: { ...key, 'content-type': 'application/json' }, body: '{"name":"key"}' });
    const listApps = () => fetch(`${cluster.operatorUrl}/v2/projects/${app.namespace}/apps`, { headers: key });
    expect((await call()).status).toBe(200);
    expect((await wait('the key reading the apps (its binding to runlet-api-key)', async () => (await listApps()).status === 200 || undefined))).toBe(true);
    expect(((await (await fetch(keysUrl, { headers: admin })).json()) as { items: { name: string }[] }).items.map((item) => item.name)).toEqual(['ci']);

    expect((await fetch(`${keysUrl}/ci`, { method: 'DELETE', headers: admin })).status).toBe(204);
    // Within a minute (the sidecar asks again whether the key exists every minute; the management API every 30 s).
    const revokedBound = { what: 'the revoked key refused', timeoutMs: 90_000, intervalMs: 1_000 };
    await waitFor(async () => (await call()).status === 401, revokedBound);
    await waitFor(async () => (await listApps()).status === 401, revokedBound);
  });

  it('serves the dashboard: signed in with a token, it shows the App and its runs, and makes and revokes a key', async () => {
    const app = await kubectlApplyApp(`runlet-dash-${Date.now().toString(36)}`);
    const pod = await wait('the pod Ready', async () => (await app.pods()).find(isReady));
    const { runUrl } = await cluster.sidecar(pod);
    const called = await fetch(`${runUrl}/v4/${app.namespace}/hello/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await cluster.token(app.namespace)}` },
      body: '{"name":"Ada"}',
    });
    const runId = called.headers.get('x-request-id')!;
    const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRoleBinding({
      namespace: app.namespace,
      body: {
        metadata: { name: 'default-admin' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
        subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: app.namespace }],
      },
    });
    const adminToken = await cluster.serviceAccountToken(app.namespace, 'default');
    await wait('the admin grant applied', async () => (await fetch(`${cluster.operatorUrl}/v2/projects/${app.namespace}/keys`, { headers: { authorization: `Bearer ${adminToken}` } })).status === 200 || undefined);

    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      page.setDefaultTimeout(STATE_TIMEOUT_MS);
      await page.goto(cluster.operatorUrl);
      await page.getByLabel('Project (namespace)').fill(app.namespace);
      await page.getByLabel('Service-account token').fill(adminToken);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect.poll(() => page.getByRole('row', { name: /hello/ }).textContent(), { timeout: STATE_TIMEOUT_MS }).toContain('ready');
      await page.getByRole('link', { name: 'hello' }).click();
      await page.getByRole('link', { name: runId }).click();
      await expect.poll(() => page.locator('main').textContent(), { timeout: STATE_TIMEOUT_MS }).toContain('success');

      await page.getByRole('link', { name: 'API keys' }).click();
      await page.getByLabel('Name').fill('ci');
      await page.getByRole('button', { name: 'Create key' }).click();
      const token = await page.getByLabel('Token').inputValue();
      const call = () => fetch(`${runUrl}/v4/${app.namespace}/hello/run`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"name":"key"}' });
      expect((await call()).status).toBe(200);
      page.once('dialog', (dialog) => void dialog.accept());
      await page.getByRole('button', { name: 'Revoke key ci' }).click();
      await page.getByText('Key ci revoked.').waitFor();
      expect((await cluster.kubectl('get', 'serviceaccounts', '--namespace', app.namespace, '--selector', 'runlet.dev/api-key=true', '--output', 'name')).trim()).toBe('');
    } finally {
      await browser.close();
    }
  });

  it('brings a deleted child Service back', async () => {
    const app = await kubectlApplyApp(`runlet-cp-${Date.now().toString(36)}`);
    const [service] = await app.services();
    expect(service).toBeDefined();
    await cluster.kubectl('delete', 'service', '--namespace', app.namespace, service!.metadata!.name!, '--wait=false');
    const back = await wait('the Service re-created', async () => (await app.services()).find((s) => s.metadata?.uid !== service!.metadata?.uid));
    expect(back.metadata?.name).toBe(service!.metadata?.name);
  });

  it('deleting an App lets the garbage collector remove its Deployment, ReplicaSets, pods and Service', async () => {
    const app = await kubectlApplyApp(`runlet-cp-${Date.now().toString(36)}`);
    await cluster.kubectl('delete', 'app', '--namespace', app.namespace, 'hello', '--wait=false');
    const replicaSets = async () => JSON.parse(await cluster.kubectl('get', 'replicasets', '--namespace', app.namespace, '-o', 'json')).items.length;
    await wait('everything the App owned gone', async () => {
      const [pods, deployment, services, sets] = await Promise.all([app.pods(), app.deployment(), app.services(), replicaSets()]);
      return pods.length === 0 && deployment === undefined && services.length === 0 && sets === 0;
    });
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const configMap = await core.readNamespacedConfigMap({ namespace: app.namespace, name: app.codeConfigMap });
    expect(configMap.metadata?.name, 'the code ConfigMap is the user’s, not the App’s').toBe(app.codeConfigMap);
  });

  it('lets the real garbage collector remove the sidecar RBAC with the last App of a namespace, and repairs a deleted RoleBinding at once (no pods needed)', async () => {
    const namespace = `runlet-cp-${Date.now().toString(36)}`;
    const [first, second, third] = ['hello', 'second', 'third'].map((name) => new HelloApp(cluster.kubeConfig, namespace, { name }));
    await first!.apply();
    await second!.apply();
    const kubectlJson = async (...args: string[]) => {
      const output = await cluster.kubectl('get', '--namespace', namespace, '--ignore-not-found', '-o', 'json', ...args);
      return output.trim() === '' ? undefined : (JSON.parse(output) as { metadata: { uid: string; ownerReferences?: { name: string }[] } });
    };
    const sidecarRbac = () => Promise.all([kubectlJson('serviceaccount', 'runlet-sidecar'), kubectlJson('rolebinding', 'runlet-sidecar')]);
    const ownedBy = (...names: string[]) => async () => {
      const objects = await sidecarRbac();
      return objects.every((object) => object?.metadata.ownerReferences?.map((ref) => ref.name).sort().join() === names.join()) && objects;
    };
    const [, binding] = await wait('the sidecar RBAC owned by both Apps', ownedBy('hello', 'second'));

    await cluster.kubectl('delete', 'rolebinding', '--namespace', namespace, 'runlet-sidecar');
    await wait('the RoleBinding applied again', async () => {
      const again = await kubectlJson('rolebinding', 'runlet-sidecar');
      return again !== undefined && again.metadata.uid !== binding!.metadata.uid;
    });

    await first!.delete();
    await wait('the sidecar RBAC owned by the second App alone', ownedBy('second'));
    await second!.delete();
    await wait('the sidecar ServiceAccount and RoleBinding gone with the last App', async () => (await sidecarRbac()).every((object) => object === undefined));
    await third!.apply();
    await wait('the sidecar RBAC applied again for a new App', ownedBy('third'));
  });

  it('autoscales through the real scale subresource: the autoscaler owns spec.replicas, a reconcile keeps it, a kubectl scale is overridden with an Event', async () => {
    const app = await kubectlApplyApp(`runlet-cp-${Date.now().toString(36)}`, { minReplicas: 1, maxReplicas: 2 });
    const deployment = await wait('spec.replicas owned by the autoscaler (server-side apply handover)', async () => {
      const found = await app.deployment();
      return ownsReplicas(found as KubeObject, AUTOSCALER_FIELD_MANAGER) && found;
    });
    const name = deployment.metadata!.name!;
    await cluster.kubectl('scale', 'deployment', name, '--namespace', app.namespace, '--replicas', '5');
    const warning = await wait('the ScaleOverridden Event', async () => (await app.events()).find((event) => event.reason === 'ScaleOverridden'));
    expect(warning).toMatchObject({ type: 'Warning' });
    expect(warning.message).toContain('set to 5 outside Runlet');
    const settled = await wait('spec.replicas back within [1, 2]', async () => {
      const replicas = (await app.deployment())?.spec?.replicas;
      return replicas !== undefined && replicas <= 2 && replicas;
    });
    // A spec change is reconciled (a server-side apply of the Deployment without spec.replicas): the size stays.
    await app.patchSpec({ env: [{ name: 'TOUCH', value: 'yes' }] });
    const touched = (await app.read()).metadata.generation!;
    await wait('the spec change reconciled', async () => (await app.read()).status?.observedGeneration === touched);
    await wait('the rollout of the change done', async () => readyAtGeneration(await app.read()));
    expect((await app.deployment())?.spec?.replicas).toBe(settled);
  });

  autoscalingSuite(() => cluster);

  it('refuses loopback addresses in Endpoints and an applied Service port without protocol, as the fake API server does in the same words', async () => {
    const namespace = `runlet-cp-${Date.now().toString(36)}`;
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const api = new KubeApi(kubeConfigCredentials(cluster.kubeConfig), { fieldManager: 'control-plane-test' });
    const service = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace }, spec: { ports: [{ name: 'http', port: 80 }] } } as KubeObject;
    await expect(api.apply(service).finally(() => api.close())).rejects.toThrow(
      'failed to create typed patch object: .spec.ports: element 0: associative list with keys has an element that omits key field "protocol" (and doesn\'t have default value)',
    );

    const endpoints = (ip: string) => ({ metadata: { name: 'web' }, subsets: [{ addresses: [{ ip }], ports: [{ name: 'http', port: 8000 }] }] });
    const refusal = await core.createNamespacedEndpoints({ namespace, body: endpoints('127.0.0.1') }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ApiException);
    expect((refusal as ApiException<string>).code).toBe(422);
    expect(JSON.parse((refusal as ApiException<string>).body).message).toBe(
      'Endpoints "web" is invalid: subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8)',
    );
    // What the test kubelet reports pods at instead (test/kubelet/pod-network.ts); nothing dials it.
    const documentation = `${cluster.kubelet.network.prefix}254`;
    const created = await core.createNamespacedEndpoints({ namespace, body: endpoints(documentation) });
    expect(created.subsets?.[0]?.addresses?.[0]?.ip).toBe(documentation);
    await core.deleteNamespace({ name: namespace });
  });

  scaleToZeroSuite(() => cluster);

  /**
   * An App `stuck` whose pod never starts (its code ConfigMap does not exist), in a namespace of its own whose
   * default ServiceAccount has the ClusterRole `role`.
   */
  async function stuckApp(prefix: string, role: 'edit' | 'view'): Promise<{ namespace: string; core: CoreV1Api }> {
    const namespace = `${prefix}-${Date.now().toString(36)}`;
    const stuck = new HelloApp(cluster.kubeConfig, namespace, { name: 'stuck', minReplicas: 0, scaling: { maxReplicas: 1 } });
    const [namespaceObject, , manifest] = await stuck.manifests();
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: namespaceObject });
    await enrolNamespace(cluster.kubeConfig, namespace);
    manifest.spec = { ...manifest.spec, runtime: { python: { module: 'main', code: { configMap: { name: 'no-such-code' } } } } };
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, body: manifest });
    await cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace,
      body: { metadata: { name: `default-${role}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role }, subjects: [{ kind: 'ServiceAccount', name: 'default', namespace }] },
    });
    return { namespace, core };
  }

  it('lists a sync and an async call held at zero, and cancels both for a token with edit: the sync caller gets 409 run-cancelled; both are recorded cancelled in the results store (install.yaml’s operator rights), the async one’s webhook signed', async () => {
    // An App whose pod never starts: its calls wait at the holder until cancelled.
    const { namespace, core } = await stuckApp('runlet-cp-held', 'edit');
    const apiToken = await cluster.serviceAccountToken(namespace, 'default');
    const callerToken = await cluster.callerToken(namespace);
    const runs = `${cluster.operatorUrl}/v2/projects/${namespace}/apps/stuck/runs`;
    const asCaller = { authorization: `Bearer ${apiToken}` };
    const receiver = await WebhookReceiver.start();
    try {
      const call = (query: string, headers: Record<string, string> = {}) =>
        fetch(`${cluster.holder!.url}/v4/${namespace}/stuck/run${query}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${callerToken}`, ...headers },
          body: JSON.stringify({ name: 'Waiting' }),
        });
      // The activator's App cache has the App once it holds a call for it (until then: 404 app-not-found).
      const accepted = await wait('an async call held', async () => {
        const answer = await call(`?async=true&webhookEndpoint=${encodeURIComponent(receiver.at().toString())}`, { 'x-webhook-secret': 'held-secret' });
        return answer.status === 202 && ((await answer.json()) as { run_id: string });
      });
      const sync = call('');
      // Awaited below; a failure before then leaves it to end with the holder, not as an unhandled rejection.
      sync.catch(() => undefined);

      const pending = await wait('both held calls listed pending', async () => {
        const answer = await fetch(`${runs}?status=pending`, { headers: asCaller });
        const items = answer.status === 200 ? ((await answer.json()) as { items: RunRecord[] }).items : [];
        return items.length === 2 && items;
      });
      const syncRun = pending.find((run) => run.mode === 'sync')!;
      expect(pending.find((run) => run.mode === 'async')).toMatchObject({ id: accepted.run_id, status: 'pending', startedAt: null });
      for (const id of [accepted.run_id, syncRun.id]) {
        const answer = await fetch(`${runs}/${id}/cancel`, { method: 'POST', headers: asCaller });
        const text = await answer.text();
        expect(answer.status, text).toBe(202);
        expect((JSON.parse(text) as { item: RunRecord }).item).toMatchObject({ id, status: 'cancelled', reason: 'cancel_requested', startedAt: null });
        // Recorded before the cancel answered, whether or not its webhook has been delivered yet.
        const got = await fetch(`${runs}/${id}`, { headers: asCaller });
        expect(got.status, `GET of the cancelled run ${id}`).toBe(200);
      }
      const syncAnswer = await sync;
      expect(syncAnswer.status).toBe(409);
      // Neither is listed pending any more: the async one's holder was told its record went.
      const stillPending = await fetch(`${runs}?status=pending`, { headers: asCaller });
      expect(((await stillPending.json()) as { items: RunRecord[] }).items).toEqual([]);
      expect(await syncAnswer.json()).toMatchObject({ type: 'https://runlet.dev/problems#run-cancelled' });

      await receiver.received(1, STATE_TIMEOUT_MS);
      const delivery = receiver.deliveries[0]!;
      expect(verifyWebhookSignature('held-secret', delivery.headers, delivery.body)).toBe(true);
      expect(JSON.parse(delivery.body)).toMatchObject({ run_id: accepted.run_id, status: 'failure', status_code: 409, error: { type: 'Cancelled' } });
      const recorded = await wait('both runs listed cancelled, the webhook delivered', async () => {
        const items = ((await (await fetch(runs, { headers: asCaller })).json()) as { items: RunRecord[] }).items;
        return items.length === 2 && items.every((run) => run.status === 'cancelled') && items.find((run) => run.mode === 'async')?.webhook?.state === 'delivered' && items;
      });
      expect(recorded.map((run) => run.reason)).toEqual(['cancel_requested', 'cancel_requested']);
      // Kept where this cluster keeps runs, the results store (as install.yaml installs it), and nothing in etcd.
      for (const run of recorded) expect(await cluster.resultsRun!(namespace, 'stuck', run.id)).toMatchObject({ status: 'cancelled', reason: 'cancel_requested' });
      const runLogs = await cluster.kubectl('get', 'runlogs', '--namespace', namespace, '-l', 'runlet.dev/held-runs=true', '-o', 'name');
      expect(runLogs.trim()).toBe('');
    } finally {
      await receiver.close();
      await core.deleteNamespace({ name: namespace });
    }
  });

  it('lets the activator read no Secret of runlet-system but its key under install.yaml’s RBAC (not the results store’s DSN, nor a list), create none there, and keep held calls in runlet-system-held only', async () => {
    // The embedded PostgreSQL's Secret, made as `runlet operator` makes it at its first start, with the operator's own
    // token (its results Role): the DSN, whose password opens every tenant's run history.
    const asOperator = new KubeApi(kubeConfigCredentials(await cluster.serviceAccountConfig(OPERATOR.namespace, OPERATOR.serviceAccount)));
    const asActivator = new KubeApi(kubeConfigCredentials(await cluster.serviceAccountConfig(ACTIVATOR.namespace, ACTIVATOR.serviceAccount)));
    const secrets = (namespace: string) => `/api/v1/namespaces/${namespace}/secrets`;
    try {
      const { dsn } = await ensureResultsSecret(asOperator, { namespace: OPERATOR.namespace, name: 'runlet-postgres', host: `runlet-postgres.${OPERATOR.namespace}.svc` });
      expect(dsn).toMatch(/^postgres(ql)?:\/\//);
      expect(await kubeStatusOf(asActivator.get(kubePathOf(`${secrets(OPERATOR.namespace)}/runlet-postgres`))), 'get the DSN Secret').toBe(403);
      expect(await kubeStatusOf(asActivator.list(kubePathOf(secrets(OPERATOR.namespace)))), 'list the release namespace’s Secrets').toBe(403);
      expect(await kubeStatusOf(asActivator.list(kubePathOf(secrets(OPERATOR.namespace)), { labelSelector: 'runlet.dev/held-call-for' })), 'list them by the held calls’ label').toBe(403);
      expect(await kubeStatusOf(asActivator.list(kubePathOf('/api/v1/secrets'))), 'list every Secret').toBe(403);
      // Nor put one there where the operator looks (a create cannot be limited to a name): the key is the operator's to make.
      const planted = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'runlet-planted' }, stringData: { dsn: 'postgres://attacker.example/runs' } };
      expect(await kubeStatusOf(asActivator.create(kubePathOf(secrets(OPERATOR.namespace)), planted as KubeObject)), 'create a Secret there').toBe(403);
      // Its own key, and its held calls' namespace, where the records are kept.
      expect(await kubeStatusOf(asActivator.get(kubePathOf(`${secrets(OPERATOR.namespace)}/runlet-holder-control`))), 'get the control key').toBe(200);
      expect(await kubeStatusOf(asActivator.list(kubePathOf(secrets(ACTIVATOR.heldCallsNamespace)))), 'list the held calls').toBe(200);
    } finally {
      await asOperator.close();
      await asActivator.close();
    }
  });

  it('lets the operator and the activator write nothing in kube-system or a namespace not enrolled under install.yaml’s RBAC; an App there says so and is reconciled once `runlet namespace enable` ran', async () => {
    const asOperator = new KubeApi(kubeConfigCredentials(await cluster.serviceAccountConfig(OPERATOR.namespace, OPERATOR.serviceAccount)));
    const asActivator = new KubeApi(kubeConfigCredentials(await cluster.serviceAccountConfig(ACTIVATOR.namespace, ACTIVATOR.serviceAccount)));
    const namespace = `runlet-cp-enrol-${Date.now().toString(36)}`;
    const app = new HelloApp(cluster.kubeConfig, namespace);
    const [namespaceObject, configMap, manifest] = await app.manifests();
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    try {
      // The rights the finding named, by the real authorizer: a token of any ServiceAccount of kube-system, a
      // Deployment, its scale, a RoleBinding there; the same in a namespace nobody enrolled.
      await core.createNamespace({ body: namespaceObject });
      for (const target of ['kube-system', namespace]) {
        const token = { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: ['runlet'] } };
        expect(await kubeStatusOf(asOperator.create(kubePathOf(`/api/v1/namespaces/${target}/serviceaccounts/default/token`), token as unknown as KubeObject)), `operator: a token in ${target}`).toBe(403);
        expect(await kubeStatusOf(asOperator.mergePatch(kubePathOf(`/apis/apps/v1/namespaces/${target}/deployments/coredns`), { spec: { replicas: 0 } })), `operator: patch a Deployment in ${target}`).toBe(403);
        const binding = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'runlet-sidecar' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-sidecar' }, subjects: [] };
        expect(await kubeStatusOf(asOperator.create(kubePathOf(`/apis/rbac.authorization.k8s.io/v1/namespaces/${target}/rolebindings`), binding as unknown as KubeObject)), `operator: a RoleBinding in ${target}`).toBe(403);
        expect(await kubeStatusOf(asActivator.get(kubePathOf(`/apis/apps/v1/namespaces/${target}/deployments/coredns/scale`))), `activator: read a scale in ${target}`).toBe(403);
      }
      // An App there is left alone, and says how to enrol its namespace.
      await core.createNamespacedConfigMap({ namespace, body: configMap });
      await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, body: manifest });
      const refused = await wait('the App reported NamespaceNotEnrolled', async () => {
        const current = await app.read();
        return current.status?.conditions?.find((condition) => condition.type === 'ChildrenApplied' && condition.reason === 'NamespaceNotEnrolled');
      });
      expect(refused.message).toContain(`runlet namespace enable ${namespace}`);
      expect((await cluster.kubeConfig.makeApiClient(AppsV1Api).listNamespacedDeployment({ namespace })).items).toEqual([]);

      // A cluster admin enrols it with the command, as the README says: the App is then reconciled.
      const enabled = await runCli(['namespace', 'enable', namespace], { env: { KUBECONFIG: cluster.controlPlane.kubeconfigPath } });
      expect(enabled.code, enabled.stderr).toBe(0);
      await wait(`App ${namespace}/hello Available once enrolled`, async () => availableAtGeneration(await app.read()));
    } finally {
      await asOperator.close();
      await asActivator.close();
    }
  });

  it('takes in hand a held async call an earlier version left in runlet-system, once moved by the command docs/scale-to-zero.md gives for the upgrade', async () => {
    // An App whose pod never starts: its calls stay held.
    const { namespace, core } = await stuckApp('runlet-cp-upgrade', 'view');
    const asReader = { authorization: `Bearer ${await cluster.serviceAccountToken(namespace, 'default')}` };
    const callerToken = await cluster.callerToken(namespace);
    const admin = new KubeApi(kubeConfigCredentials(cluster.kubeConfig));
    const bin = await mkdtemp(join(tmpdir(), 'runlet-cp-kubectl-'));
    try {
      // The activator's App cache has the App once it holds a call for it (until then its sweep would drop the
      // call as one of an App gone).
      await wait('an async call held', async () => {
        const answer = await fetch(`${cluster.holder!.url}/v4/${namespace}/stuck/run?async=true`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${callerToken}` },
          body: '{}',
        });
        return answer.status === 202;
      });
      // The record an activator of the earlier version wrote in the release namespace, claimed by its pod, now gone.
      const earlier = new HeldRecords({ api: admin, namespace: OPERATOR.namespace, identity: 'runlet-activator-earlier', staleClaimMs: 300_000, ttlMs: 86_400_000, keys: namespaceHolderKeys(admin) });
      const runId = newRunId();
      const url = `/v4/${namespace}/stuck/run?async=true`;
      await earlier.save({ runId, namespace, appName: 'stuck', method: 'POST', url, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"name":"Left"}'), acceptedAt: Date.now(), authenticatedProject: namespace });

      // The upgrade's step, as the page gives it, with the tier's kubectl.
      const doc = await readFile(join(REPO, 'docs/scale-to-zero.md'), 'utf8');
      const step = doc.slice(doc.indexOf('Upgrading from a version that kept held calls in the release namespace'));
      const command = step.match(/```sh\n([\s\S]*?)```/)?.[1];
      expect(command, 'the upgrade command in docs/scale-to-zero.md').toContain('runlet-system-held');
      await symlink(cluster.controlPlane.kubectl, join(bin, 'kubectl'));
      await promisify(execFile)('bash', ['-o', 'pipefail', '-c', command!], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, KUBECONFIG: cluster.controlPlane.kubeconfigPath }, timeout: 60_000 });
      expect((await admin.list(kubePathOf(`/api/v1/namespaces/${OPERATOR.namespace}/secrets`), { labelSelector: 'runlet.dev/held-call-for' })).items).toEqual([]);

      // The activator's sweep (every minute; here at once) takes it in hand: its signature holds, its claim is this
      // activator's, and the management API lists it pending.
      await cluster.holder!.recover();
      const moved = await admin.get<KubeObject>(kubePathOf(`/api/v1/namespaces/${ACTIVATOR.heldCallsNamespace}/secrets/runlet-held-${runId}`));
      expect(moved.metadata?.annotations?.['runlet.dev/claimed-by']).toBe('e2e-activator-1');
      const listed = await wait('the moved call listed pending', async () => {
        const answer = await fetch(`${cluster.operatorUrl}/v2/projects/${namespace}/apps/stuck/runs/${runId}`, { headers: asReader });
        return answer.status === 200 && ((await answer.json()) as { item: RunRecord }).item;
      });
      expect(listed).toMatchObject({ id: runId, status: 'pending', async: true });
    } finally {
      await rm(bin, { recursive: true, force: true });
      await admin.close();
      await core.deleteNamespace({ name: namespace });
    }
  });

  // Last: it stops the first operator, whose holder the scale-to-zero suite uses.
  it('hands the lease over to a second operator when the first stops, which then reconciles', async () => {
    const coordination = cluster.kubeConfig.makeApiClient(CoordinationV1Api);
    const holder = async () => {
      try {
        return (await coordination.readNamespacedLease({ namespace: OPERATOR.namespace, name: OPERATOR.lease })).spec?.holderIdentity;
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return undefined;
        throw error;
      }
    };
    expect(await holder()).toBe('e2e-operator-1');
    const second = await cluster.startOperator('e2e-operator-2');
    expect(await holder(), 'the first keeps the lease while it runs').toBe('e2e-operator-1');
    await cluster.stopFirstOperator();
    await wait('the second operator holding the lease', async () => (await holder()) === 'e2e-operator-2');
    expect(second.url).toBeDefined();
    await kubectlApplyApp(`runlet-cp-${Date.now().toString(36)}`);
  });
});
