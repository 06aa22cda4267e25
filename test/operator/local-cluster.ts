// The cluster of this machine: the in-memory API server (test/kube) with the test kubelet (test/kubelet)
// running each pod as local processes — `runlet sidecar` from cli/runlet.ts and the Python runtime from
// runtime/python — and the operator in-process. Sidecars verify tokens with their project's HS256 key and
// against a stand-in for the cluster's service-account issuer, and record runs in their pod's RunLog through
// the fake API server, as in a cluster. Nothing dials anything but the loopback: pods are reported at
// addresses of the test pod network (test/kubelet/pod-network.ts), and the test process and every sidecar
// refuse any other connection (test/support/loopback-only.ts); close() fails if one was attempted.
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import type { ConfigLayer } from '../../operator/config.ts';
import { signLocalToken } from '../../run-request/auth/local-key.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { sidecarUrls, startKubelet, type ImageTable, type Kubelet } from '../kubelet/index.ts';
import { waitFor } from '../support/wait.ts';
import { HELD_CALLS_NAMESPACE, REPO, installCrds, listHolder, refusePodsLikeQuota, startTestOperator, withPrivateImage, type E2eCluster } from './e2e-cluster.ts';
import { startServiceAccountIssuer, type ServiceAccountIssuer } from './service-account-issuer.ts';
import { isAlive, readOrEmpty } from '../support/process-checks.ts';
import { installLoopbackGuard } from '../support/loopback-only.ts';
import type { Operator, OperatorHolderOptions, OperatorOptions } from '../../operator/main.ts';
import { freePort } from '../support/custom-app.ts';
import type { Holder } from '../../activator/holder.ts';
import { createActivator, type Activator } from '../../activator/main.ts';
import { SIDECAR_ADMIN_PORT, SIDECAR_RUN_PORT } from '../../operator/render/names.ts';
import { IMAGE_JEMALLOC_PATH } from '../../operator/render/sidecar-container.ts';
import { RunAuthenticator } from '../../run-request/auth/authenticator.ts';
import { loadIssuerAuthConfig } from '../../run-request/auth/config.ts';

const SIDECAR_IMAGE = 'registry.test/runlet:e2e';
/** The service-account token every pod's sidecar sends to the API server. */
export const SIDECAR_TOKEN = 'e2e-sidecar-token';
/** The Python runtime image: `python3` on this machine, with the runtime on its path (a custom App may run it too). */
export const PYTHON_IMAGE = 'registry.test/runlet-python:e2e';

/** What a test can do to this cluster beyond the shared suite: the API server's and kubelet's controls. */
export interface LocalCluster extends E2eCluster {
  readonly server: KubeApiServer;
  readonly kubelet: Kubelet;
  /** The operator's HTTP server: health and the management API (/v2). */
  readonly operatorUrl: string;
  /** The operator's metrics, on a port of their own. */
  readonly operatorMetricsUrl: string;
  /** The HS256 key every sidecar verifies run-interface tokens with (`signLocalToken`). */
  readonly authKey: string;
  /** The service-account token issuer every sidecar trusts, whatever the project. */
  readonly issuer: ServiceAccountIssuer;
  /** The operator in this process. */
  readonly operator: Operator;
  /** With `holder: true`: the activator in this process, as `runlet activator` composes it (its own App watch, key, metrics). */
  readonly activator: Activator | undefined;
  /** With `holder: true`: what the activator's holder was started with, to start another like it. */
  readonly holderOptions: OperatorHolderOptions | undefined;
  /** With `holder: true`: the activator's holder, while it runs. */
  readonly holder: Holder | undefined;
  /** The pod-network address the holder's Endpoints list it at. */
  readonly holderIp: string | undefined;
  /** With `holder: true`: the activator's admin server (/healthz, /ready, /metrics, /load). */
  readonly activatorAdminUrl: string | undefined;
  /** A token the holder and the sidecars both accept: the issuer's, for the namespace's default service account. */
  callerToken(namespace: string): Promise<string>;
}

/**
 * `results`: the operator keeps runs in this results store, and its sidecars send them to its collector
 * (`--run-store results`) rather than writing RunLogs.
 * `holder`: scale to zero, with an activator (activator/main.ts, as `runlet activator` composes it) holding the
 * calls, trusting the issuer's tokens: the control key's Secret is `default/runlet-holder-control`; each app
 * namespace's own hand-over key the operator makes there (`runlet-holder-key`), where the sidecars read it from
 * their environment (a secretKeyRef) and the activator by that name; and the
 * Endpoints `default/runlet-holder` list the activator, as the endpoints controller lists the activator pods'
 * holder port for the Service. The records of held async calls are in the namespace `default-held`, as the chart
 * makes one of their own. The operator holds no call itself (`holder: 'external'`).
 */
export async function startLocalCluster(
  options: { operatorConfig?: ConfigLayer; holder?: boolean; coldStartTimeoutMs?: OperatorHolderOptions['coldStartTimeoutMs']; results?: NonNullable<OperatorOptions['results']> } = {},
): Promise<LocalCluster> {
  const workDir = await mkdtemp(join(tmpdir(), 'runlet-operator-e2e-'));
  const guard = installLoopbackGuard(join(workDir, 'refused-connections.log'));
  // The held async calls' own namespace, which the chart creates.
  const server = await startKubeApiServer({ namespaces: ['default', 'kube-system', 'kube-public', 'kube-node-lease', HELD_CALLS_NAMESPACE] });
  const kubeConfig = server.kubeConfig();
  const serviceAccountDir = join(workDir, 'serviceaccount');
  // A token of their own (the server accepts any): the request log tells the sidecars' requests from the operator's.
  await server.writeServiceAccount(serviceAccountDir, { token: SIDECAR_TOKEN });
  await installCrds(kubeConfig);

  const authKey = randomBytes(32).toString('hex');
  const issuer = await startServiceAccountIssuer();
  const images: ImageTable = withPrivateImage({
    [SIDECAR_IMAGE]: {
      commands: { runlet: [...guard.node, join(REPO, 'cli/runlet.ts')] },
      // The sidecar runs on this machine's malloc: the image's jemalloc is not here.
      files: { [IMAGE_JEMALLOC_PATH]: '' },
      // What the sidecar would find in a cluster: API access (the service account, here mounted in the work dir;
      // no kubeconfig, not even one in the user's home) and a token verifier.
      env: { ...guard.env, ...server.inClusterEnv, RUNLET_SERVICE_ACCOUNT_DIR: serviceAccountDir, KUBECONFIG: '', HOME: workDir, RUNLET_RUN_STORE: 'runlog', RUNLET_AUTH_KEY: authKey, RUNLET_AUTH_JWKS_URL: issuer.jwksUrl },
    },
    [PYTHON_IMAGE]: {
      commands: { python: ['python3'], python3: ['python3'] },
      env: { PYTHONPATH: join(REPO, 'runtime/python'), PYTHONUNBUFFERED: '1' },
    },
  }, PYTHON_IMAGE);
  const kubelet = await startKubelet({ kubeConfig, images, workDir: join(workDir, 'kubelet') });
  const holderOptions: OperatorHolderOptions | undefined = options.holder
    ? {
        // What `runlet operator` builds from the sidecars' own RUNLET_AUTH_JWKS_URL (the issuer; no project key).
        auth: new RunAuthenticator(loadIssuerAuthConfig((name) => (name === 'auth-jwks-url' ? issuer.jwksUrl : undefined), {})),
        // As the holder's default dials the pod's IP: here a label for the local port standing for its run port.
        replicaAddress: (replica) => kubelet.network.dialTarget(replica.ip, SIDECAR_RUN_PORT),
        retryDelayMs: 200,
        coldStartTimeoutMs: options.coldStartTimeoutMs,
      }
    : undefined;
  /** The activator's admin port, once it listens (an ephemeral one): the operator's leader asks it for its waiting calls. */
  let activatorAdminPort = 0;
  let activatorAdminUrl: string | undefined;
  const operatorLog = join(workDir, 'operator.log');
  const operator = await startTestOperator({
    kubeConfig,
    sidecarImage: SIDECAR_IMAGE,
    pythonRuntimeImage: PYTHON_IMAGE,
    logPath: operatorLog,
    leaseNamespace: 'default',
    listen: true,
    config: options.operatorConfig,
    holder: holderOptions === undefined ? undefined : 'external',
    replicaAdminAddress: (pod) => kubelet.network.dialTarget(pod.status!.podIP!, SIDECAR_ADMIN_PORT),
    holderControlAddress: (address) => kubelet.network.dialTarget(address.ip, address.port),
    // The leader scrapes each ready replica's admin port at its pod IP: here a label for a local port.
    loadAddress: (pod) => kubelet.network.dialTarget(pod.status!.podIP!, SIDECAR_ADMIN_PORT),
    // The sidecars send their batches to the operator's collector on the loopback.
    results: options.results === undefined ? undefined : { ...options.results, port: await freePort() },
    // And each activator's admin port (its /load), at the address its Endpoints list: the activator's admin server.
    activatorLoadAddress: (activator) => kubelet.network.dialTarget(activator.ip, activatorAdminPort),
  });
  const activatorLog = join(workDir, 'activator.log');
  const activator =
    holderOptions === undefined
      ? undefined
      : createActivator({
          kubeConfig,
          config: {
            host: '127.0.0.1',
            port: 0,
            adminHost: '127.0.0.1',
            adminPort: 0,
            identity: 'activator-0',
            keySecret: { namespace: 'default', name: 'runlet-holder-control' },
            heldNamespace: HELD_CALLS_NAMESPACE,
            watchdogMs: 60_000,
            drainMs: 0,
          },
          ...holderOptions,
          logger: pino({ name: 'runlet-activator', level: 'debug' }, pino.destination({ dest: activatorLog, mkdir: true, sync: true })),
          processMetrics: false,
        });
  // In a cluster the holder listens in the activator's pods: an address of the pod network stands for it here.
  const holderIp = activator === undefined ? undefined : kubelet.network.assignLoopbackServer('the activator');
  if (activator !== undefined) {
    const { url, adminUrl } = await activator.listen();
    activatorAdminUrl = adminUrl;
    activatorAdminPort = Number(new URL(adminUrl).port);
    await listHolder(kubeConfig, { namespace: 'default', name: 'runlet-holder' }, holderIp!, Number(new URL(url).port));
  }

  const localPod = (pod: V1Pod) =>
    waitFor(() => kubelet.pod(pod.metadata!.name!, pod.metadata!.namespace), { what: `pod ${pod.metadata!.name} running in the test kubelet` });

  return {
    description: 'the in-memory API server with the test kubelet',
    kubeConfig,
    server,
    kubelet,
    operatorUrl: operator.url!,
    operatorMetricsUrl: operator.metricsUrl!,
    authKey,
    issuer,
    operator,
    activator,
    holderOptions,
    get holder() {
      return activator?.holder;
    },
    holderIp,
    activatorAdminUrl,
    callerToken: (namespace) => issuer.token(namespace),
    async sidecar(pod) {
      return sidecarUrls(await localPod(pod));
    },
    token: (namespace) => signLocalToken({ projectId: namespace, key: authKey }),
    refusePods: async (namespace) => refusePodsLikeQuota(server, namespace),
    stopCheck(pod) {
      const local = kubelet.pod(pod.metadata!.name!, pod.metadata!.namespace);
      if (local === undefined) throw new Error(`pod ${pod.metadata!.name} does not run in the test kubelet`);
      const pids = local.processes().map((p) => p.pid);
      return async () => pids.every((pid) => !isAlive(pid));
    },
    diagnostics: () => `== ${operatorLog}\n${readOrEmpty(operatorLog)}\n== ${activatorLog}\n${readOrEmpty(activatorLog)}\n${kubelet.diagnostics()}`,
    async close() {
      await activator?.stop();
      await operator.stop();
      await kubelet.stop();
      await server.close();
      await issuer.close();
      guard.uninstall();
      guard.assertNoneRefused();
    },
  };
}
