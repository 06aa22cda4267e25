// The operator on a real Kubernetes control plane (test/control-plane: kube-apiserver, controller manager and
// scheduler from Debian's kubernetes 1.20 source), pods run by the test kubelet: the shared end-to-end suites
// (operator-suite.ts; autoscaling-suite.ts and scale-to-zero-suite.ts with the real Deployment controller acting
// on the scale), then what only a real server shows — kubectl applies with validation on, the operator's
// ClusterRole, TokenReview and SubjectAccessReview, the garbage collector, leader election.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ApiException, CoordinationV1Api, CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { AUTOSCALER_FIELD_MANAGER, ownsReplicas } from '../../operator/autoscaling/replicas-owner.ts';
import { controlPlaneSkipReason } from '../control-plane/control-plane.ts';
import { waitFor } from '../support/wait.ts';
import { AUTOSCALING_TEST_CONFIG, autoscalingSuite } from './autoscaling-suite.ts';
import { OPERATOR, startControlPlaneCluster, type ControlPlaneCluster } from './control-plane-cluster.ts';
import { HelloApp } from './hello-app.ts';
import { availableAtGeneration, isReady, operatorSuite, readyAtGeneration, STATE_TIMEOUT_MS, SUITE_OPTIONS } from './operator-suite.ts';
import { scaleToZeroSuite } from './scale-to-zero-suite.ts';

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
    const manifest = join(cluster.controlPlane.dir, `${namespace}.yaml`);
    await writeFile(manifest, (await app.manifests()).map((object) => toYaml(object)).join('---\n'));
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
    // `kubectl create token` issues them; the run interface's audience is runlet.
    const runsUrl = `${cluster.operatorUrl}/v2/projects/${app.namespace}/apps/hello/runs`;
    const apiToken = await cluster.serviceAccountToken(app.namespace, 'default');
    expect((await fetch(runsUrl, { headers: { authorization: `Bearer ${token}` } })).status, 'a token for another audience').toBe(401);
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
