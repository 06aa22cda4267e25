// Runlet installed on a real Node, for the suites that need real pods: the control plane of control-plane.sh
// with a kubelet, kube-proxy, containerd and runc (node.sh), and install.yaml applied with kubectl — its operator,
// activator and embedded PostgreSQL running as pods from the images `make images` built. One per test file (it
// takes minutes to start on a loaded machine): real-kubelet.test.ts and cross-tenant.test.ts share it.
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { parse, parseAllDocuments, stringify } from 'yaml';
import type { App } from '../../crds/app-schema.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { forKube120 } from '../control-plane/kube-1.20.ts';
import { postgresVolume } from '../control-plane/postgres-volume.ts';
import { BUILT_IMAGES, NODE_ADDRESS, REAL_NODE_CONTROL_PLANE, startRealNode, type RealNode } from '../control-plane/node.ts';
import { REPO } from './e2e-cluster.ts';

export const OPERATOR_NAMESPACE = 'runlet-system';
/** The run interface's audience: the sidecars take only tokens for it. */
export const RUN_AUDIENCE = 'runlet';
/** Pods start from local images, but a loaded 2-core machine starts Node and Python slowly. */
export const STATE_TIMEOUT_MS = 120_000;

/**
 * The Services the pods reach by name in a cluster, at fixed addresses of the tier's Service range (10.0.0.0/24):
 * the Node has no cluster DNS, so the operator is given the embedded PostgreSQL's, and the sidecars the
 * collector's (its own Service, on the operator pods' collector port), by address.
 */
export const SERVICE_ADDRESSES = { 'runlet-postgres': '10.0.0.200', 'runlet-operator': '10.0.0.201', 'runlet-collector': '10.0.0.202' } as const;

const run = promisify(execFile);

interface ManifestObject {
  kind?: string;
  metadata?: { name?: string };
  data?: Record<string, string>;
  spec?: { clusterIP?: string; template?: { spec?: { containers?: Array<{ env?: Array<{ name: string; value?: string }> }> } } };
}

/**
 * install.yaml as kube-apiserver 1.20 serves it, its operator allowed to deliver webhooks to `cidr`, its
 * Services at SERVICE_ADDRESSES and the operator pointed at them; and `volume` for the embedded PostgreSQL's
 * claim (postgres-volume.ts: the tier has no storage provisioner).
 */
function installManifest(manifest: string, cidr: string, volume: Record<string, unknown>): string {
  const addressEnv: Record<string, string> = {
    RUNLET_RESULTS_POSTGRES_HOST: SERVICE_ADDRESSES['runlet-postgres'],
    RUNLET_RESULTS_COLLECTOR_URL: `http://${SERVICE_ADDRESSES['runlet-collector']}:8082`,
  };
  const objects = parseAllDocuments(forKube120(manifest))
    .map((document) => document.toJS() as ManifestObject)
    .map((object): ManifestObject => {
      const name = object.metadata?.name ?? '';
      if (object.kind === 'Service' && name in SERVICE_ADDRESSES) return { ...object, spec: { ...object.spec, clusterIP: SERVICE_ADDRESSES[name as keyof typeof SERVICE_ADDRESSES] } };
      if (object.kind === 'Deployment' && name === 'runlet-operator') {
        for (const container of object.spec!.template!.spec!.containers!) {
          for (const variable of container.env ?? []) if (variable.name in addressEnv) variable.value = addressEnv[variable.name];
        }
        return object;
      }
      const file = object.kind === 'ConfigMap' ? object.data?.['operator.yaml'] : undefined;
      if (file === undefined) return object;
      return { ...object, data: { ...object.data, 'operator.yaml': stringify({ ...parse(file), webhookAllowCidrs: [cidr] }) } };
    });
  return [...objects, volume].map((object) => stringify(object)).join('---\n');
}

export interface RealNodeCluster {
  readonly controlPlane: ControlPlane;
  readonly node: RealNode;
  /** The control plane's admin (system:masters). */
  readonly admin: KubeConfig;
  readonly core: CoreV1Api;
  /** `kubectl ARGS` as admin; resolves to its stdout, rejects with its stderr. */
  kubectl(...args: string[]): Promise<string>;
  /** A client authenticated with `token` alone (a tenant's ServiceAccount token, an API key). */
  configWithToken(user: string, token: string): KubeConfig;
  diagnostics(): string;
  stop(): Promise<void>;
}

/**
 * The control plane, its real Node, and install.yaml applied (its operator allowed to deliver webhooks to the
 * Node's address); resolves once the operator's rollout is done.
 */
export async function startRealNodeCluster(): Promise<RealNodeCluster> {
  const controlPlane = await startControlPlane(REAL_NODE_CONTROL_PLANE);
  let node: RealNode | undefined;
  const stop = async () => {
    try {
      await node?.stop();
    } finally {
      await controlPlane.stop();
    }
  };
  try {
    node = await startRealNode(controlPlane);
    const admin = new KubeConfig();
    admin.loadFromFile(controlPlane.kubeconfigPath);
    const kubectl = async (...args: string[]) => {
      try {
        const { stdout } = await run(controlPlane.kubectl, ['--kubeconfig', controlPlane.kubeconfigPath, ...args], { timeout: STATE_TIMEOUT_MS * 2 });
        return stdout;
      } catch (error) {
        throw new Error(`kubectl ${args.join(' ')} failed: ${(error as { stderr?: string }).stderr ?? (error as Error).message}`, { cause: error });
      }
    };
    const manifest = join(controlPlane.dir, 'install.yaml');
    await writeFile(manifest, installManifest(await readFile(join(REPO, 'install.yaml'), 'utf8'), `${NODE_ADDRESS}/32`, await postgresVolume(controlPlane.dir)));
    await kubectl('apply', '-f', manifest);
    await kubectl('rollout', 'status', '--namespace', OPERATOR_NAMESPACE, 'deployment/runlet-operator', '--timeout', `${STATE_TIMEOUT_MS / 1000}s`);
    const started = node;
    return {
      controlPlane,
      node: started,
      admin,
      core: admin.makeApiClient(CoreV1Api),
      kubectl,
      configWithToken(user, token) {
        const config = new KubeConfig();
        config.loadFromOptions({
          clusters: [{ name: 'control-plane', server: controlPlane.server, caFile: controlPlane.caFile }],
          users: [{ name: user, token }],
          contexts: [{ name: user, cluster: 'control-plane', user }],
          currentContext: user,
        });
        return config;
      },
      diagnostics: () => [started.diagnostics(), controlPlane.diagnostics()].join('\n'),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * A custom app's server (from the Python runtime image): answers every GET and POST with its method, path and
 * body, as JSON. It listens where the operator tells it to (HOST=127.0.0.1, PORT): only the sidecar, in the pod,
 * reaches it there.
 */
const ECHO_SERVER = [
  'import http.server, json',
  'class Echo(http.server.BaseHTTPRequestHandler):',
  '    def do_GET(self): self.answer()',
  '    def do_POST(self): self.answer()',
  '    def answer(self):',
  '        body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()',
  '        data = json.dumps({"method": self.command, "path": self.path, "body": body}).encode()',
  '        self.send_response(200); self.send_header("content-type", "application/json")',
  '        self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)',
  'import os',
  'http.server.ThreadingHTTPServer((os.environ["HOST"], int(os.environ["PORT"])), Echo).serve_forever()',
].join('\n');

/** Creates an App `name` in `namespace` running the echo server on `port`, one replica. */
export async function createEchoApp(admin: KubeConfig, namespace: string, name: string, port: number): Promise<void> {
  const body: App = {
    apiVersion: 'runlet.dev/v1alpha1',
    kind: 'App',
    metadata: { name, namespace },
    spec: {
      runtime: { custom: { image: BUILT_IMAGES.pythonRuntime, entrypoint: ['python3', '-c', ECHO_SERVER], port, healthcheckEndpoint: '/health', readycheckEndpoint: '/ready' } },
      scaling: { minReplicas: 1, maxReplicas: 1, replicaConcurrency: 4, responseGracePeriod: 30 },
      runs: { keepFinished: 200, retention: 86400 },
    },
  } as App;
  await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'runlet.dev', version: 'v1alpha1', plural: 'apps', namespace, body });
}
