// `runlet operator`: reconciles App resources in every namespace. Settings come from --config (YAML or JSON),
// then the environment, then flags, each overriding the one before (operator/config.ts lists every setting).
import type { KubeConfig } from '@kubernetes/client-node';
import { KubeApi } from '../kube/client.ts';
import { kubeConfigCredentials } from '../kube/kubeconfig.ts';
import { loadKubeCredentials } from '../kube/load-credentials.ts';
import { SERVICE_ACCOUNT_DIR } from '../kube/in-cluster.ts';
import { ConfigError, readConfigFile, resolveConfig, type ConfigLayer, type OperatorConfig } from '../operator/config.ts';
import { createOperator, type OperatorHolderOptions } from '../operator/main.ts';
import { ISSUER_AUTH_OPTIONS, ISSUER_AUTH_USAGE } from '../run-request/auth/config.ts';
import { ensureResultsSecret } from '../operator/results-secret.ts';
import { createLogger } from '../sidecar/logger.ts';
import { RESULTS_DSN_ENV, openResultsWhenReachable, type OpeningResults } from '../results/open.ts';
import { readEnvBackedOptions, type EnvBackedOption } from './arguments.ts';
import { CliError } from './cli-error.ts';
import { issuerAuthenticator } from './issuer-auth.ts';

export const OPERATOR_USAGE = `Usage: runlet operator [options]

Reconciles App resources (all namespaces) into Deployments, Services, Ingresses and the sidecar's RBAC,
and keeps their status. Replicas elect a leader through a Lease; standbys serve health and metrics.
Kubernetes access as the sidecar's: KUBECONFIG, else ~/.kube/config, else the pod's service account.

Options (environment variable in brackets); flags override the environment, which overrides --config:
  --config FILE                   YAML or JSON file with any settings (see docs/operator.md) [RUNLET_OPERATOR_CONFIG]
  --sidecar-image IMAGE           image with the runlet command, run as each pod's sidecar [RUNLET_SIDECAR_IMAGE]
  --python-runtime-image IMAGE    Python runtime image for apps that name none [RUNLET_PYTHON_RUNTIME_IMAGE]
  --ingress-class NAME            create an Ingress per app, of this class [RUNLET_INGRESS_CLASS]
  --ingress-host HOST             create an Ingress per app, on this host ({namespace} in it: a host per namespace) [RUNLET_INGRESS_HOST]
  --ingress-tls true|false        the ingress host serves HTTPS [RUNLET_INGRESS_TLS]
  --ingress-tls-secret NAME       certificate Secret for the host [RUNLET_INGRESS_TLS_SECRET]
  --native-sidecars auto|true|false  sidecar as a native sidecar (default auto: when the API server is >= 1.29) [RUNLET_NATIVE_SIDECARS]
  --webhook-allow-cidrs LIST      comma-separated CIDRs webhooks may reach despite the SSRF guard [RUNLET_WEBHOOK_ALLOW_CIDRS]
  --image-pull-secrets LIST       comma-separated Secret names (in each app namespace) app pods pull images with
                                  [RUNLET_IMAGE_PULL_SECRETS]
  --leader-election-namespace NS  namespace of the Lease (default: POD_NAMESPACE, else default) [RUNLET_LEADER_ELECTION_NAMESPACE]
  --lease-name NAME               (default runlet-operator) [RUNLET_LEASE_NAME]
  --identity NAME                 this replica in the Lease (default: POD_NAME, else host-pid) [RUNLET_IDENTITY]
  --host ADDRESS                  address of every port of the operator's (default 0.0.0.0) [RUNLET_OPERATOR_HOST]
  --port N                        port of the management API, /healthz, /ready (default 8080) [RUNLET_METRICS_PORT]
  --metrics-port N                port of /metrics (and /healthz, /ready), apart from the management API: for
                                  Prometheus, not tenants (default 8081) [RUNLET_OPERATOR_METRICS_PORT]
  --workers N                     Apps reconciled concurrently (default 4) [RUNLET_OPERATOR_WORKERS]
  --holder on|off|external        hold calls to Apps at zero replicas (default on; off keeps min_replicas = 0 at one
                                  replica; external: runlet activator pods hold them, this operator holds none) [RUNLET_HOLDER]
  --holder-host ADDRESS           address of the holder (default 0.0.0.0) [RUNLET_HOLDER_HOST]
  --holder-port N                 port of the holder (default 8090) [RUNLET_HOLDER_PORT]
  --holder-max-calls-per-app N    calls to one App the holder takes while it starts; more get 503 over-capacity at
                                  once (default 250) [RUNLET_HOLDER_MAX_CALLS_PER_APP]
  --holder-max-calls N            calls to all Apps together the holder takes (default 1000) [RUNLET_HOLDER_MAX_CALLS]
  --holder-max-body-mib N         MiB of held calls' bodies the holder keeps; a body past them gets 503
                                  request-buffer-full at once (default 64) [RUNLET_HOLDER_MAX_BODY_MIB]
  --log-level LEVEL               (default info) [RUNLET_LOG_LEVEL]
  --results-retention-days N      days the results store keeps an App's runs unless its spec.runs.retentionDays
                                  says otherwise (default 30) [RUNLET_RESULTS_RETENTION_DAYS]
  --results-collector-url URL     the collector Service's origin, where pods send their run records (with
                                  RUNLET_RESULTS_DSN set; unset, pods keep writing RunLogs)
                                  [RUNLET_RESULTS_COLLECTOR_URL]
  --results-collector-port N      port of the results collector, apart from --port (default 8082)
                                  [RUNLET_RESULTS_COLLECTOR_PORT]
  --service-account-dir DIR       where the pod's service-account token and CA are mounted
                                  (default ${SERVICE_ACCOUNT_DIR}) [RUNLET_SERVICE_ACCOUNT_DIR]

The results store: RUNLET_RESULTS_DSN, a libpq URL (postgresql://user:password@host:5432/db?sslmode=...), only
from the environment (it holds a password); or, with the chart's embedded PostgreSQL, RUNLET_RESULTS_POSTGRES_SECRET
names the Secret (in POD_NAMESPACE) whose \`dsn\` it is, made with a new password when missing. Set, runs are kept in
PostgreSQL (docs/results-store.md): the schema is migrated once the database answers, tried again with backoff
until then (logged; /ready answers 503 saying why, and run lists 503 run-store-unavailable). Unset, runs are kept
in RunLogs.

The holder authenticates callers as the sidecars do, from the same options and variables:
${ISSUER_AUTH_USAGE}`;

const OPTIONS = {
  config: { env: ['RUNLET_OPERATOR_CONFIG'] },
  'sidecar-image': { env: ['RUNLET_SIDECAR_IMAGE'] },
  'python-runtime-image': { env: ['RUNLET_PYTHON_RUNTIME_IMAGE'] },
  'ingress-class': { env: ['RUNLET_INGRESS_CLASS'] },
  'ingress-host': { env: ['RUNLET_INGRESS_HOST'] },
  'ingress-tls': { env: ['RUNLET_INGRESS_TLS'] },
  'ingress-tls-secret': { env: ['RUNLET_INGRESS_TLS_SECRET'] },
  'native-sidecars': { env: ['RUNLET_NATIVE_SIDECARS'] },
  'webhook-allow-cidrs': { env: ['RUNLET_WEBHOOK_ALLOW_CIDRS'] },
  'image-pull-secrets': { env: ['RUNLET_IMAGE_PULL_SECRETS'] },
  'leader-election-namespace': { env: ['RUNLET_LEADER_ELECTION_NAMESPACE'] },
  'lease-name': { env: ['RUNLET_LEASE_NAME'] },
  identity: { env: ['RUNLET_IDENTITY'] },
  host: { env: ['RUNLET_OPERATOR_HOST'] },
  port: { env: ['RUNLET_METRICS_PORT'] },
  'metrics-port': { env: ['RUNLET_OPERATOR_METRICS_PORT'] },
  workers: { env: ['RUNLET_OPERATOR_WORKERS'] },
  holder: { env: ['RUNLET_HOLDER'] },
  'holder-host': { env: ['RUNLET_HOLDER_HOST'] },
  'holder-port': { env: ['RUNLET_HOLDER_PORT'] },
  'holder-max-calls-per-app': { env: ['RUNLET_HOLDER_MAX_CALLS_PER_APP'] },
  'holder-max-calls': { env: ['RUNLET_HOLDER_MAX_CALLS'] },
  'holder-max-body-mib': { env: ['RUNLET_HOLDER_MAX_BODY_MIB'] },
  'log-level': { env: ['RUNLET_LOG_LEVEL'] },
  'results-retention-days': { env: ['RUNLET_RESULTS_RETENTION_DAYS'] },
  'results-collector-url': { env: ['RUNLET_RESULTS_COLLECTOR_URL'] },
  'results-collector-port': { env: ['RUNLET_RESULTS_COLLECTOR_PORT'] },
  'service-account-dir': { env: ['RUNLET_SERVICE_ACCOUNT_DIR'], default: SERVICE_ACCOUNT_DIR },
  ...ISSUER_AUTH_OPTIONS,
} as const satisfies Record<string, EnvBackedOption>;

type OptionName = keyof typeof OPTIONS;

export async function runOperatorCommand(args: string[]): Promise<number> {
  const option = readOptions(args);
  const config = await loadConfig(option);
  const logger = createLogger({ name: 'runlet-operator', level: config.logLevel });
  // Found as the sidecar finds its own (kube/load-credentials.ts): no credentials is an error at start, where
  // client-node's loadFromDefault would fall back to http://localhost:8080 and fail on every call after.
  let kubeConfig;
  try {
    kubeConfig = await (await loadKubeCredentials({ serviceAccountDir: option('service-account-dir') })).kubeConfig();
  } catch (error) {
    throw new CliError(`runlet operator: ${(error as Error).message}`);
  }

  const embeddedDsn = await ensureEmbeddedResultsSecret(kubeConfig);

  const holder: OperatorHolderOptions | 'external' | undefined = !config.holder.enabled
    ? undefined
    : !config.holder.inOperator
      ? 'external'
      : {
          auth: issuerAuthenticator(option, option('service-account-dir'), logger, {
            command: 'runlet operator',
            otherwise: 'or run without the holder: --holder off (RUNLET_HOLDER=off), or leave it to runlet activator: --holder external',
          }),
        };
  if (holder === undefined) logger.warn('the holder is off (holder.enabled: false): Apps with min_replicas = 0 are kept at one replica');
  if (holder === 'external') logger.info({ service: `${config.holder.serviceNamespace}/${config.holder.serviceName}` }, 'calls to Apps at zero are held by runlet activator pods (holder.inOperator: false), listed by this Service');

  const dsn = process.env[RESULTS_DSN_ENV] || embeddedDsn;
  let results: OpeningResults | undefined;
  if (dsn !== undefined && dsn !== '') {
    results = openResultsWhenReachable({ dsn, logger });
  } else {
    logger.warn(`${RESULTS_DSN_ENV} is not set: runs are kept in RunLogs (about the last 200 per replica), not in a results store`);
  }

  const operator = createOperator({ kubeConfig, config, logger, holder, results: results && { store: results.store, state: results.state, usage: results.usage } });
  // Listening first: probes get answers while the caches fill.
  let address: string;
  try {
    address = await operator.listen();
  } catch (error) {
    // The health server may be up already: closed, so that the process exits (and its pod restarts) rather
    // than answer probes without doing its work.
    await operator.stop();
    throw new CliError(`runlet operator: could not start: ${(error as Error).message}`);
  }
  operator.start();
  logger.info({ address, holder: operator.holder?.url, metrics: operator.metricsUrl, identity: config.leaderElection.identity, cluster: kubeConfig.getCurrentCluster()?.server }, 'operator listening');

  await new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
  await operator.stop();
  if (typeof holder === 'object') await holder.auth?.close();
  await results?.close();
  return 0;
}

/**
 * With the chart's embedded PostgreSQL (RUNLET_RESULTS_POSTGRES_SECRET names its Secret), the Secret is made
 * when missing, and its `dsn` is read from it through the API: a pod spec's secretKeyRef would be read only when
 * the container starts, so an operator that made the Secret would have to restart to see it.
 */
async function ensureEmbeddedResultsSecret(kubeConfig: KubeConfig): Promise<string | undefined> {
  const name = process.env.RUNLET_RESULTS_POSTGRES_SECRET;
  if (name === undefined || name === '') return undefined;
  const namespace = process.env.POD_NAMESPACE || 'default';
  const host = process.env.RUNLET_RESULTS_POSTGRES_HOST || `${name}.${namespace}.svc`;
  const api = new KubeApi(kubeConfigCredentials(kubeConfig));
  try {
    return (await ensureResultsSecret(api, { namespace, name, host })).dsn;
  } catch (error) {
    throw new CliError(`runlet operator: the embedded PostgreSQL's Secret ${namespace}/${name}: ${(error as Error).message}`);
  } finally {
    await api.close();
  }
}

async function loadConfig(option: (name: OptionName) => string | undefined): Promise<OperatorConfig> {
  const integer = (name: OptionName): number | undefined => {
    const value = option(name);
    if (value === undefined) return undefined;
    if (!/^\d+$/.test(value)) throw new CliError(`--${name} must be a whole number, got "${value}"`, 2);
    return Number(value);
  };
  const boolean = (name: OptionName): boolean | undefined => {
    const value = option(name);
    if (value === undefined) return undefined;
    if (value === 'true' || value === '1') return true;
    if (value === 'false' || value === '0') return false;
    throw new CliError(`--${name} must be true or false, got "${value}"`, 2);
  };
  const holderMode = (): { enabled?: boolean; inOperator?: boolean } => {
    const value = option('holder');
    if (value === undefined) return {};
    if (value === 'on') return { enabled: true, inOperator: true };
    if (value === 'off') return { enabled: false };
    if (value === 'external') return { enabled: true, inOperator: false };
    throw new CliError(`--holder must be on, off or external, got "${value}"`, 2);
  };
  const autoOrBoolean = (name: OptionName): 'auto' | boolean | undefined => {
    const value = option(name);
    if (value === 'auto') return 'auto';
    if (value === undefined || ['true', '1', 'false', '0'].includes(value)) return boolean(name);
    throw new CliError(`--${name} must be auto, true or false, got "${value}"`, 2);
  };
  const ingress = {
    className: option('ingress-class'),
    host: option('ingress-host'),
    tls: boolean('ingress-tls'),
    tlsSecretName: option('ingress-tls-secret'),
  };
  const cidrs = option('webhook-allow-cidrs');
  const pullSecrets = option('image-pull-secrets');
  const overrides: ConfigLayer = {
    sidecarImage: option('sidecar-image'),
    pythonRuntimeImage: option('python-runtime-image'),
    // Any ingress setting turns the Ingress on.
    ingress: Object.values(ingress).some((value) => value !== undefined) ? ingress : undefined,
    nativeSidecars: autoOrBoolean('native-sidecars'),
    webhookAllowCidrs: cidrs === undefined ? undefined : cidrs.split(',').map((cidr) => cidr.trim()).filter(Boolean),
    imagePullSecrets: pullSecrets === undefined ? undefined : pullSecrets.split(',').map((name) => ({ name: name.trim() })).filter(({ name }) => name !== ''),
    leaderElection: { namespace: option('leader-election-namespace'), leaseName: option('lease-name'), identity: option('identity') },
    server: { host: option('host'), port: integer('port'), metricsPort: integer('metrics-port') },
    holder: {
      ...holderMode(),
      host: option('holder-host'),
      port: integer('holder-port'),
      maxHeldCallsPerApp: integer('holder-max-calls-per-app'),
      maxHeldCalls: integer('holder-max-calls'),
      maxHeldBodyMiB: integer('holder-max-body-mib'),
    },
    workers: integer('workers'),
    results: { retentionDays: integer('results-retention-days'), collectorUrl: option('results-collector-url'), collectorPort: integer('results-collector-port') },
    // Checked against the known levels by resolveConfig.
    logLevel: option('log-level') as OperatorConfig['logLevel'] | undefined,
  };
  try {
    const file = option('config');
    return resolveConfig(file === undefined ? {} : await readConfigFile(file), overrides);
  } catch (error) {
    if (error instanceof ConfigError) throw new CliError(`${error.message}\n\nRun "runlet operator --help" for the options.`, 2);
    throw error;
  }
}

function readOptions(args: string[]): (name: OptionName) => string | undefined {
  return readEnvBackedOptions(args, OPTIONS, OPERATOR_USAGE);
}
