// A custom App on the in-memory API server with the test kubelet (local-cluster.ts): its pod is probed through the
// sidecar alone. The app container has no probe and no port of its own — the kubelet probes the pod IP, which
// every pod of the cluster reaches, so a probe there would need the app's server listening there, callable around
// the sidecar — and is told to listen on 127.0.0.1 (HOST). The pod becomes Ready through the sidecar's readiness,
// which follows the app's ready path asked on the loopback, and its NetworkPolicy admits only the sidecar's ports.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, NetworkingV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { APP_LABEL } from '../../crds/api-group.ts';
import { waitFor } from '../support/wait.ts';
import { startLocalCluster, PYTHON_IMAGE, type LocalCluster } from './local-cluster.ts';
import { isReady, STATE_TIMEOUT_MS, SUITE_OPTIONS } from './operator-suite.ts';

const NAMESPACE = 'team-b';
const APP = 'web';
const APP_PORT = 9000;

/**
 * The custom app's server: it listens where HOST and PORT say, answers /health always and /ready while the file
 * READY_FILE exists, and any other path with where it listens and what it was asked.
 */
const SERVER = [
  'import http.server, json, os',
  'host, port = os.environ["HOST"], int(os.environ["PORT"])',
  'class App(http.server.BaseHTTPRequestHandler):',
  '    def log_message(self, *args): pass',
  '    def do_GET(self):',
  '        if self.path == "/health": return self.answer(200, {"ok": True})',
  '        if self.path == "/ready": return self.answer(200 if os.path.exists(os.environ["READY_FILE"]) else 503, {})',
  '        self.answer(200, {"listens": host, "path": self.path})',
  '    def answer(self, status, body):',
  '        data = json.dumps(body).encode()',
  '        self.send_response(status); self.send_header("content-type", "application/json")',
  '        self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)',
  'http.server.ThreadingHTTPServer((host, port), App).serve_forever()',
].join('\n');

describe('a custom App probed through its sidecar, on the in-memory API server with the test kubelet', SUITE_OPTIONS, () => {
  let cluster: LocalCluster;
  let gates: string;
  const readyFile = () => join(gates, 'ready');

  beforeAll(async () => {
    gates = mkdtempSync(join(tmpdir(), 'runlet-custom-probes-'));
    cluster = await startLocalCluster();
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
    rmSync(gates, { recursive: true, force: true });
  }, 120_000);
  beforeEach((context) => {
    context.onTestFailed(() => console.log(cluster.diagnostics()));
  });

  const pods = async (): Promise<V1Pod[]> =>
    (await cluster.kubeConfig.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: NAMESPACE, labelSelector: `${APP_LABEL}=${APP}` })).items;
  const waitForPod = (what: string, predicate: (pod: V1Pod) => boolean): Promise<V1Pod> =>
    waitFor(
      async () => {
        const [pod, ...others] = await pods();
        return pod !== undefined && others.length === 0 && predicate(pod) && pod;
      },
      { what: `${NAMESPACE}/${APP}: ${what}`, timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 },
    );
  const appContainerStarted = (pod: V1Pod) => pod.status?.containerStatuses?.find((status) => status.name === 'app')?.started === true;

  it('has no probe on the app’s own port, becomes Ready only once the app’s ready path passes on the loopback, and leaves Ready when it fails', async () => {
    await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: 'runlet.dev',
      version: 'v1alpha1',
      plural: 'apps',
      namespace: NAMESPACE,
      body: {
        apiVersion: 'runlet.dev/v1alpha1',
        kind: 'App',
        metadata: { name: APP, namespace: NAMESPACE },
        spec: {
          runtime: { custom: { image: PYTHON_IMAGE, entrypoint: ['python3', '-c', SERVER], port: APP_PORT, healthcheckEndpoint: '/health', readycheckEndpoint: '/ready' } },
          // The App's own HOST is not the platform's: the server still gets 127.0.0.1.
          env: [{ name: 'READY_FILE', value: readyFile() }, { name: 'HOST', value: '0.0.0.0' }],
          scaling: { minReplicas: 1, maxReplicas: 1, replicaConcurrency: 4, responseGracePeriod: 30 },
          runs: { keepFinished: 200, retention: 86400 },
        },
      },
    });

    // The app has started (its liveness through the sidecar passed), but its ready path answers 503: not Ready.
    const started = await waitForPod('the app container started', appContainerStarted);
    const spec = started.spec!;
    const app = spec.containers.find((container) => container.name === 'app')!;
    const probes = (container: V1Container) => [container.startupProbe, container.readinessProbe, container.livenessProbe].filter((probe) => probe !== undefined);
    expect(app.ports).toBeUndefined();
    expect(app.readinessProbe).toBeUndefined();
    expect(probes(app).map((probe) => probe.httpGet)).toEqual([{ path: '/app-healthz', port: 8001 }, { path: '/app-healthz', port: 8001 }]);
    for (const container of [...(spec.initContainers ?? []), ...spec.containers]) {
      for (const probe of probes(container)) expect(probe.httpGet?.port ?? probe.tcpSocket?.port, `a probe of ${container.name}`).not.toBe(APP_PORT);
    }
    expect(app.env).toEqual(expect.arrayContaining([{ name: 'PORT', value: String(APP_PORT) }, { name: 'HOST', value: '127.0.0.1' }]));
    expect(app.env!.filter((variable) => variable.name === 'HOST')).toHaveLength(1);
    const notReady = await waitForPod('the app container started and the pod not Ready', (pod) => appContainerStarted(pod) && !isReady(pod));
    const sidecar = cluster.kubelet.pod(notReady.metadata!.name!, NAMESPACE)!;
    const { adminUrl, runUrl } = await cluster.sidecar(notReady);
    expect((await fetch(`${adminUrl}/ready`)).status).toBe(503);
    expect(sidecar.container('app').ready, 'the app container itself: no readiness probe of its own').toBe(true);

    writeFileSync(readyFile(), '');
    const ready = await waitForPod('Ready once the app’s ready path passes', isReady);
    expect(ready.metadata!.uid).toBe(notReady.metadata!.uid);
    // It serves through the sidecar, and the server listens where HOST told it to.
    const answer = await fetch(`${runUrl}/v4/${NAMESPACE}/${APP}/who?x=1`, { headers: { authorization: `Bearer ${await cluster.token(NAMESPACE)}` } });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ listens: '127.0.0.1', path: '/who?x=1' });

    rmSync(readyFile());
    await waitForPod('not Ready again once the app’s ready path fails', (pod) => !isReady(pod));
  });

  it('is rendered a NetworkPolicy admitting the sidecar’s run port and, from the operator’s pods alone, its admin port: never the app’s own', async () => {
    const policy = await waitFor(
      async () => (await cluster.kubeConfig.makeApiClient(NetworkingV1Api).listNamespacedNetworkPolicy({ namespace: NAMESPACE })).items.find((item) => item.metadata?.name === APP),
      { what: 'the App’s NetworkPolicy', timeoutMs: STATE_TIMEOUT_MS },
    );
    const ingress = policy.spec!.ingress!;
    expect(ingress.map((rule) => rule.ports!.map((port) => port.port))).toEqual([[8000], [8001]]);
    expect(ingress[0]!._from).toBeUndefined();
    expect(ingress[1]!._from).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'default' } }, podSelector: { matchLabels: { 'runlet.dev/app-peer': 'true' } } }]);
  });
});
