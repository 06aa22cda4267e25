// The e2e suite's cluster on a real Kubernetes control plane (test/control-plane): kube-apiserver with RBAC,
// service-account tokens and OwnerReferencesPermissionEnforcement, the controller manager (Deployment →
// ReplicaSet → Pod, garbage collector) and the scheduler, which binds App pods to the test kubelet's Node;
// the kubelet runs them as local processes. install.yaml (with the CRDs) is applied with kubectl, validation
// on, less what 1.20 does not serve (kube-1.20.ts), and the operator and the activator run in this process with
// tokens of install.yaml's ServiceAccounts, so their ClusterRoles and Roles are what they may do. Sidecars use
// their pod's service-account token, as in a cluster. Runs are kept in a results store, as the chart installs
// one by default: a real PostgreSQL of the test's in place of the embedded one (whose StatefulSet install.yaml
// creates, its pod left Pending: this kubelet runs no claims nor exec probes), the pods sending their records
// to the operators' collector through a loopback relay standing for the operator Service.
// The kubelet reports pods at addresses of the test pod network (a documentation range, test/kubelet/pod-network.ts),
// which the API server takes in Endpoints as it would not 127.0.0.1; nothing dials them: the test process and
// every sidecar refuse any connection but to the loopback (test/support/loopback-only.ts), and close() fails
// if one was attempted.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { ConfigLayer } from '../../operator/config.ts';
import type { Operator, OperatorHolderOptions, OperatorOptions } from '../../operator/main.ts';
import type { Holder } from '../../activator/holder.ts';
import { createActivator } from '../../activator/main.ts';
import pino from 'pino';
import { SIDECAR_ADMIN_PORT, SIDECAR_RUN_PORT } from '../../operator/render/names.ts';
import { RunAuthenticator } from '../../run-request/auth/authenticator.ts';
import { DEFAULT_AUDIENCE } from '../../run-request/auth/config.ts';
import { installLoopbackGuard } from '../support/loopback-only.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { forKube120 } from '../control-plane/kube-1.20.ts';
import { localImages, requestToken, startControlPlaneKubelet } from '../control-plane/process-kubelet.ts';
import { sidecarUrls, type Kubelet } from '../kubelet/index.ts';
import { waitFor } from '../support/wait.ts';
import { startPostgres } from '../support/postgres.ts';
import { startTcpRelay } from '../support/tcp-relay.ts';
import { openResults } from '../../results/open.ts';
import { REPO, createNoPodsQuota, listHolder, startTestOperator, withPrivateImage, type E2eCluster, type TestOperatorOptions } from './e2e-cluster.ts';
import { freePort } from '../support/custom-app.ts';
import { isAlive, readOrEmpty } from '../support/process-checks.ts';

const SIDECAR_IMAGE = 'registry.test/runlet:e2e';
const PYTHON_IMAGE = 'registry.test/runlet-python:e2e';
const TOKEN_AUDIENCE = 'runlet';
/** install.yaml's operator identity: the ServiceAccount its ClusterRole is bound to, and its Lease. */
export const OPERATOR = { namespace: 'runlet-system', serviceAccount: 'runlet-operator', lease: 'runlet-operator' } as const;
/**
 * install.yaml's activator identity: the ServiceAccount its ClusterRole and Roles are bound to, and the namespace
 * install.yaml makes for the records of held async calls.
 */
export const ACTIVATOR = { namespace: 'runlet-system', serviceAccount: 'runlet-activator', deployment: 'runlet-activator', heldCallsNamespace: 'runlet-system-held' } as const;
/** The Service whose Endpoints list the holder (named apart from any the chart may ship: the tier writes its Endpoints). */
const HOLDER_SERVICE = 'runlet-e2e-holder';
const FIRST_OPERATOR = 'e2e-operator-1';

const run = promisify(execFile);

export interface ControlPlaneCluster extends E2eCluster {
  readonly controlPlane: ControlPlane;
  readonly kubelet: Kubelet;
  /** The operator's HTTP server: health, metrics and the management API (/v2). */
  readonly operatorUrl: string;
  /** `kubectl ARGS` as admin; resolves to its stdout, rejects with its stderr. */
  kubectl(...args: string[]): Promise<string>;
  /** A token of a service account (TokenRequest), for the API server's audience unless others are given. */
  serviceAccountToken(namespace: string, name: string, audiences?: string[]): Promise<string>;
  /** A client authenticated as a service account (a token from the TokenRequest API). */
  serviceAccountConfig(namespace: string, name: string, audiences?: string[]): Promise<KubeConfig>;
  /** Another operator under the same ServiceAccount and Lease (for leader handover). */
  startOperator(identity: string): Promise<Operator & { url: string | undefined }>;
  /** Stops the operator the cluster started with (`e2e-operator-1`). */
  stopFirstOperator(): Promise<void>;
  /** With `holder: true`, the activator's holder (scale to zero), while it runs. */
  readonly holder: Holder | undefined;
  /** The pod-network address the holder's Endpoints list it at. */
  readonly holderIp: string | undefined;
  /** A token the run interface accepts, whether the holder or a sidecar verifies it (as `token`). */
  callerToken(namespace: string): Promise<string>;
}

export interface ControlPlaneClusterOptions {
  /** More operator settings (both operators). */
  operatorConfig?: ConfigLayer;
  /**
   * Every operator runs the holder (scale to zero), as each replica does in a cluster; the first one's is the
   * one the Service runlet-system/runlet-e2e-holder lists.
   */
  holder?: boolean;
  /**
   * The results store the operators keep runs in (the test's own, to read or stop its database); absent, the
   * cluster starts a PostgreSQL of its own. The sidecars send their batches (`--run-store results`) to the
   * operators' collector through a relay standing for the operator Service. Null: no results store, the runs in
   * RunLogs (`--run-store runlog`), as the chart installs with `results.postgres.embedded.enabled=false` and no
   * existingSecret.
   */
  results?: NonNullable<OperatorOptions['results']> | null;
  /** The API server writes an audit log (`controlPlane.auditLogPath`). */
  audit?: boolean;
}

export async function startControlPlaneCluster(options: ControlPlaneClusterOptions = {}): Promise<ControlPlaneCluster> {
  const workDir = await mkdtemp(join(tmpdir(), 'runlet-control-plane-e2e-'));
  const guard = installLoopbackGuard(join(workDir, 'refused-connections.log'));
  const controlPlane = await startControlPlane({ audit: options.audit }).catch((error: unknown) => {
    guard.uninstall();
    throw error;
  });
  // Closed in reverse: the operators, the kubelet, the control plane, then the logs and pod directories; the
  // guard's record is read before the directory goes.
  const stops: (() => Promise<void>)[] = [
    () => rm(workDir, { recursive: true, force: true }),
    async () => {
      guard.uninstall();
      guard.assertNoneRefused();
    },
    () => controlPlane.stop(),
  ];
  const closeAll = async () => {
    for (const stop of stops.reverse()) await stop();
  };
  try {
    const admin = new KubeConfig();
    admin.loadFromFile(controlPlane.kubeconfigPath);
    const core = admin.makeApiClient(CoreV1Api);
    const kubectl = async (...args: string[]) => {
      try {
        const { stdout } = await run(controlPlane.kubectl, ['--kubeconfig', controlPlane.kubeconfigPath, ...args], { timeout: 60_000 });
        return stdout;
      } catch (error) {
        throw new Error(`kubectl ${args.join(' ')} failed: ${(error as { stderr?: string }).stderr ?? (error as Error).message}`, { cause: error });
      }
    };

    const manifest = join(workDir, 'install.yaml');
    await writeFile(manifest, forKube120(await readFile(join(REPO, 'install.yaml'), 'utf8')));
    await kubectl('apply', '-f', manifest);
    await kubectl('wait', '--for', 'condition=Established', '--timeout', '60s', 'crd/apps.runlet.dev', 'crd/runlogs.runlet.dev');
    // The operator and the activator run in this process instead (same ServiceAccounts and Lease), where the test
    // reads their logs.
    await kubectl('scale', '--namespace', OPERATOR.namespace, 'deployment/runlet-operator', `deployment/${ACTIVATOR.deployment}`, '--replicas', '0');

    const tokenOf = (namespace: string, name: string, audiences?: string[]) => requestToken(core, namespace, name, { audiences });
    const serviceAccountConfig = async (namespace: string, name: string, audiences?: string[]) => {
      const config = new KubeConfig();
      config.loadFromOptions({
        clusters: [{ name: 'control-plane', server: controlPlane.server, caFile: controlPlane.caFile }],
        users: [{ name: `${namespace}/${name}`, token: await tokenOf(namespace, name, audiences) }],
        contexts: [{ name: 'sa', cluster: 'control-plane', user: `${namespace}/${name}` }],
        currentContext: 'sa',
      });
      return config;
    };

    const kubelet = await startControlPlaneKubelet({
      kubeConfig: admin,
      server: controlPlane.server,
      workDir: join(workDir, 'kubelet'),
      images: withPrivateImage(localImages(controlPlane.server, { runlet: SIDECAR_IMAGE, pythonRuntime: PYTHON_IMAGE }, { node: guard.node, env: guard.env }), PYTHON_IMAGE),
    });
    stops.push(() => kubelet.stop());

    const holderOptions = options.holder ? await prepareHolder(workDir, controlPlane, () => tokenOf(ACTIVATOR.namespace, ACTIVATOR.serviceAccount)) : undefined;
    const holder: OperatorHolderOptions | undefined =
      holderOptions === undefined
        ? undefined
        : {
            ...holderOptions,
            // As the holder's default dials the pod's IP: here a label for the local port standing for its run port.
            replicaAddress: (replica) => kubelet.network.dialTarget(replica.ip, SIDECAR_RUN_PORT),
          };
    // The operators' ports, newest last: the collector relay (the operator Service) sends to the newest running.
    const operatorPorts: number[] = [];
    // Runs are kept in a real PostgreSQL (test/support/postgres.ts), as the chart keeps them by default: the test's
    // own when it gives one (to stop it, or to read it), else one of the cluster's.
    const results = options.results === null ? undefined : (options.results ?? (await startOwnResultsStore(stops)));
    const collector = results === undefined ? undefined : await startTcpRelay(() => operatorPorts.at(-1));
    if (collector !== undefined) stops.push(() => collector.close());
    const operatorConfig: ConfigLayer = {
      ...options.operatorConfig,
      // The holder key's Secret lives in the release namespace, as the chart configures it. The held calls are in
      // the namespace install.yaml makes for them.
      holder: { serviceNamespace: OPERATOR.namespace, serviceName: HOLDER_SERVICE, heldCallsNamespace: ACTIVATOR.heldCallsNamespace },
      // The operator Service, as the pods reach it: a relay to the newest operator running.
      ...(collector === undefined ? {} : { results: { ...options.operatorConfig?.results, collectorUrl: `http://127.0.0.1:${collector.port}` } }),
    };

    /** The activator's admin port, once it listens (an ephemeral one): the operator's leader asks it for its waiting calls. */
    let activatorAdminPort = 0;
    const operatorLogs: string[] = [];
    const startOperator = async (identity: string) => {
      const logPath = join(workDir, `operator-${identity}.log`);
      operatorLogs.push(logPath);
      const options: TestOperatorOptions = {
        kubeConfig: await serviceAccountConfig(OPERATOR.namespace, OPERATOR.serviceAccount),
        sidecarImage: SIDECAR_IMAGE,
        pythonRuntimeImage: PYTHON_IMAGE,
        logPath,
        leaseNamespace: OPERATOR.namespace,
        leaseName: OPERATOR.lease,
        identity,
        // No sidecar setting: the operator reads 1.20 from /version and renders the classic sidecar itself.
        listen: true,
        config: operatorConfig,
        holder: holder === undefined ? undefined : 'external',
        replicaAdminAddress: (pod) => kubelet.network.dialTarget(pod.status!.podIP!, SIDECAR_ADMIN_PORT),
        holderControlAddress: (address) => kubelet.network.dialTarget(address.ip, address.port),
        // The leader scrapes each ready replica's admin port at its pod IP: here a label for a local port.
        loadAddress: (pod) => kubelet.network.dialTarget(pod.status!.podIP!, SIDECAR_ADMIN_PORT),
        results: results === undefined ? undefined : { ...results, port: await freePort() },
        // And each activator's admin port (its /load), at the address its Endpoints list: the activator's admin server.
        activatorLoadAddress: (activator) => kubelet.network.dialTarget(activator.ip, activatorAdminPort),
      };
      const operator = await startTestOperator(options);
      // The collector Service's relay goes to the operator's collector port (apart from the management API's).
      const port = Number(new URL(operator.collectorUrl ?? operator.url!).port);
      operatorPorts.push(port);
      // Stopped by a test (leader handover) or at close, whichever comes first; once.
      let stopped: Promise<void> | undefined;
      const stopOnce = operator.stop.bind(operator);
      operator.stop = () =>
        (stopped ??= (async () => {
          operatorPorts.splice(operatorPorts.indexOf(port), 1);
          await stopOnce();
        })());
      stops.push(() => operator.stop());
      return operator;
    };
    const operator = await startOperator(FIRST_OPERATOR);
    // The activator as `runlet activator` composes it, with its own ServiceAccount: install.yaml's RBAC for the
    // activator Deployment is what it may do.
    const activatorLog = join(workDir, 'activator.log');
    const activator =
      holder === undefined
        ? undefined
        : createActivator({
            kubeConfig: await serviceAccountConfig(ACTIVATOR.namespace, ACTIVATOR.serviceAccount),
            config: {
              host: '127.0.0.1',
              port: 0,
              adminHost: '127.0.0.1',
              adminPort: 0,
              identity: 'e2e-activator-1',
              keySecret: { namespace: ACTIVATOR.namespace, name: 'runlet-holder-control' },
              heldNamespace: ACTIVATOR.heldCallsNamespace,
              watchdogMs: 60_000,
              drainMs: 0,
            },
            ...holder,
            logger: pino({ name: 'runlet-activator', level: 'debug' }, pino.destination({ dest: activatorLog, mkdir: true, sync: true })),
            processMetrics: false,
          });
    const holderIp = activator === undefined ? undefined : kubelet.network.assignLoopbackServer('the activator');
    if (activator !== undefined) {
      stops.push(() => activator.stop());
      const { url, adminUrl } = await activator.listen();
      activatorAdminPort = Number(new URL(adminUrl).port);
      await listHolder(admin, { namespace: OPERATOR.namespace, name: HOLDER_SERVICE }, holderIp!, Number(new URL(url).port));
    }

    const localPod = (pod: V1Pod) =>
      waitFor(() => kubelet.pod(pod.metadata!.name!, pod.metadata!.namespace), { what: `pod ${pod.metadata!.name} running in the test kubelet` });

    return {
      description: 'a real control plane (kube-apiserver 1.20) with the test kubelet',
      kubeConfig: admin,
      controlPlane,
      kubelet,
      operatorUrl: operator.url!,
      kubectl,
      serviceAccountToken: (namespace, name, audiences) => tokenOf(namespace, name, audiences),
      serviceAccountConfig,
      startOperator,
      stopFirstOperator: () => operator.stop(),
      async sidecar(pod) {
        return sidecarUrls(await localPod(pod));
      },
      token: (namespace) => tokenOf(namespace, 'default', [TOKEN_AUDIENCE]),
      ...(results === undefined ? {} : { resultsRun: (namespace: string, app: string, runId: string) => results.store.getRun(namespace, app, runId) }),
      callerToken: (namespace) => tokenOf(namespace, 'default', [TOKEN_AUDIENCE]),
      get holder() {
        return activator?.holder;
      },
      holderIp,
      refusePods: (namespace) => createNoPodsQuota(admin, namespace),
      stopCheck(pod) {
        const local = kubelet.pod(pod.metadata!.name!, pod.metadata!.namespace);
        if (local === undefined) throw new Error(`pod ${pod.metadata!.name} does not run in the test kubelet`);
        const pids = local.processes().map((p) => p.pid);
        return async () => pids.every((pid) => !isAlive(pid));
      },
      diagnostics: () =>
        [...operatorLogs.map((path) => `== ${path}\n${readOrEmpty(path)}`), `== ${activatorLog}\n${readOrEmpty(activatorLog)}`, kubelet.diagnostics(), controlPlane.diagnostics()].join('\n'),
      close: closeAll,
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/**
 * The holder's trust, as the sidecars': tokens of the API server's issuer for the run interface's audience (its
 * key set fetched with the activator's own token). What it may do is install.yaml's RBAC alone; the key it
 * signs hand-overs with is the Secret the operator makes, which the sidecars read through their copies.
 */
/** A PostgreSQL of the cluster's own (test/support/postgres.ts) and the results store on it, stopped with the cluster. */
async function startOwnResultsStore(stops: (() => Promise<void>)[]): Promise<NonNullable<OperatorOptions['results']>> {
  const postgres = await startPostgres();
  stops.push(() => postgres.stop());
  const opened = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('control_plane')), logger: pino({ level: 'silent' }) });
  stops.push(() => opened.close());
  return { store: opened.store };
}

async function prepareHolder(workDir: string, controlPlane: ControlPlane, activatorToken: () => Promise<string>): Promise<Omit<OperatorHolderOptions, 'replicaAddress'>> {
  const tokenFile = join(workDir, 'holder-jwks-token');
  await writeFile(tokenFile, await activatorToken());
  return {
    auth: new RunAuthenticator({ audience: DEFAULT_AUDIENCE, jwksUrl: `${controlPlane.server}/openid/v1/jwks`, jwksCaFile: controlPlane.caFile, jwksTokenFile: tokenFile }),
    retryDelayMs: 200,
  };
}
