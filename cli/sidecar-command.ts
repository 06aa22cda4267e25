// `runlet sidecar`: the sidecar container of an app's pod. The operator renders these flags; every one also
// reads an environment variable so a pod template can set them either way.
import { hostname } from 'node:os';
import { once } from 'node:events';
import type { Server } from 'node:http';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { SqliteRunStore } from '../sidecar/runs/sqlite-run-store.ts';
import { createAdminInterface, createAdminServer } from '../sidecar/admin-interface.ts';
import type { RunAuthenticator } from '../sidecar/auth/authenticator.ts';
import { loadRunAuthConfig, RUN_AUTH_OPTIONS, RUN_AUTH_USAGE } from '../sidecar/auth/config.ts';
import { AppRegistry, AppTarget } from '../sidecar/apps.ts';
import { createLogger } from '../sidecar/logger.ts';
import { Replica } from '../sidecar/replica.ts';
import { createRunInterface, DEFAULT_BODY_LIMIT_BYTES } from '../sidecar/run-interface.ts';
import { createRunServer } from '../sidecar/run-server.ts';
import { DEFAULT_RESULT_LIMIT_BYTES } from '../sidecar/runtimes/runtime-connections.ts';
import { RuntimeWatcher } from '../sidecar/runtimes/runtime-watch.ts';
import { SERVICE_ACCOUNT_DIR } from '../kube/in-cluster.ts';
import { loadKubeCredentials } from '../kube/load-credentials.ts';
import { RunLogJournal } from '../sidecar/runs/runlog-journal.ts';
import { RunLogStore } from '../sidecar/runs/runlog-store.ts';
import { DEFAULT_REQUEST_BODY_TIMEOUT_MS, DEFAULT_REQUEST_HEAD_TIMEOUT_MS, MAX_REQUEST_TIMEOUT_SECONDS } from '../sidecar/request-timeouts.ts';
import { parseSecondsFlag, readEnvBackedOptions, type EnvBackedOption } from './arguments.ts';
import { CliError } from './cli-error.ts';

export const SIDECAR_USAGE = `Usage: runlet sidecar --project ID --app NAME [options]

The run interface in front of one app's runtime container (in a pod, beside it).

Options (environment variable in brackets):
  --project ID                project id, the namespace [RUNLET_PROJECT, POD_NAMESPACE]
  --app NAME                  app name [RUNLET_APP]
  --runtime python|custom     the app container's runtime (default python) [RUNLET_RUNTIME]
  --app-port N                port of the app container (default 8192) [RUNLET_APP_PORT]
  --ready-path PATH           runtime readiness path (python: /healthz) [RUNLET_READY_PATH]
  --port N                    run interface port (default 8000) [RUNLET_PORT]
  --admin-port N              probes, metrics, drain (default 8001) [RUNLET_ADMIN_PORT]
  --concurrency N             calls in flight to the app (default 4) [RUNLET_CONCURRENCY]
  --queue-depth N             calls waiting for a slot (default 10 x concurrency) [RUNLET_QUEUE_DEPTH]
  --response-grace-period S   run time limit in seconds (default 900) [RUNLET_RESPONSE_GRACE_PERIOD]
  --run-store runlog|sqlite   where runs are recorded: the pod's RunLog (default in a cluster) or SQLite in
                              --data-dir (default elsewhere) [RUNLET_RUN_STORE]
  --data-dir DIR              where async runs are made durable: the RunLog's journal, or the SQLite store
                              (default /var/run/runlet, the pod's emptyDir) [RUNLET_DATA_DIR]
  --replica NAME              this replica's name on run records [POD_NAME]
  --service-account-dir DIR   where the pod's service-account token and CA are mounted, for the RunLog
                              (default ${SERVICE_ACCOUNT_DIR}) [RUNLET_SERVICE_ACCOUNT_DIR]
  --webhook-allow-cidrs LIST  comma-separated CIDRs webhooks may reach despite the SSRF guard [RUNLET_WEBHOOK_ALLOW_CIDRS]
  --body-limit-bytes N        request body limit (default 16 MiB) [RUNLET_BODY_LIMIT_BYTES]
  --result-limit-bytes N      the largest result a Python function may return (default 32 MiB) [RUNLET_RESULT_LIMIT_BYTES]
  --request-head-timeout S    longest a request's head may take to arrive, then 408 (default 10) [RUNLET_REQUEST_HEAD_TIMEOUT]
  --request-body-timeout S    longest pause while a request's body arrives, then 408 (default 30) [RUNLET_REQUEST_BODY_TIMEOUT]
  --log-level LEVEL           (default info) [RUNLET_LOG_LEVEL]
  --auth on|off               verify callers' bearer tokens (default on; off exposes the app to anyone who reaches the pod) [RUNLET_AUTH]
${RUN_AUTH_USAGE}`;

const OPTIONS = {
  project: { env: ['RUNLET_PROJECT', 'POD_NAMESPACE'] },
  app: { env: ['RUNLET_APP'] },
  runtime: { env: ['RUNLET_RUNTIME'], default: 'python' },
  'app-port': { env: ['RUNLET_APP_PORT'], default: '8192' },
  'ready-path': { env: ['RUNLET_READY_PATH'] },
  port: { env: ['RUNLET_PORT'], default: '8000' },
  'admin-port': { env: ['RUNLET_ADMIN_PORT'], default: '8001' },
  concurrency: { env: ['RUNLET_CONCURRENCY'], default: '4' },
  'queue-depth': { env: ['RUNLET_QUEUE_DEPTH'] },
  'response-grace-period': { env: ['RUNLET_RESPONSE_GRACE_PERIOD'], default: '900' },
  'run-store': { env: ['RUNLET_RUN_STORE'] },
  'data-dir': { env: ['RUNLET_DATA_DIR'], default: '/var/run/runlet' },
  replica: { env: ['POD_NAME'] },
  'service-account-dir': { env: ['RUNLET_SERVICE_ACCOUNT_DIR'], default: SERVICE_ACCOUNT_DIR },
  'webhook-allow-cidrs': { env: ['RUNLET_WEBHOOK_ALLOW_CIDRS'], default: '' },
  'body-limit-bytes': { env: ['RUNLET_BODY_LIMIT_BYTES'], default: String(DEFAULT_BODY_LIMIT_BYTES) },
  'result-limit-bytes': { env: ['RUNLET_RESULT_LIMIT_BYTES'], default: String(DEFAULT_RESULT_LIMIT_BYTES) },
  'request-head-timeout': { env: ['RUNLET_REQUEST_HEAD_TIMEOUT'], default: String(DEFAULT_REQUEST_HEAD_TIMEOUT_MS / 1000) },
  'request-body-timeout': { env: ['RUNLET_REQUEST_BODY_TIMEOUT'], default: String(DEFAULT_REQUEST_BODY_TIMEOUT_MS / 1000) },
  'log-level': { env: ['RUNLET_LOG_LEVEL'], default: 'info' },
  auth: { env: ['RUNLET_AUTH'], default: 'on' },
  ...RUN_AUTH_OPTIONS,
} as const satisfies Record<string, EnvBackedOption>;

type OptionName = keyof typeof OPTIONS;

export async function runSidecarCommand(args: string[]): Promise<number> {
  const option = readOptions(args);
  const required = (name: OptionName): string => {
    const value = option(name);
    if (!value) throw new CliError(`--${name} is required (or ${OPTIONS[name].env.join(' / ')})\n\n${SIDECAR_USAGE}`, 2);
    return value;
  };
  const integer = (name: OptionName, min: number, max: number): number => {
    const value = Number(required(name));
    if (!Number.isInteger(value) || value < min || value > max) throw new CliError(`--${name} must be an integer from ${min} to ${max}, got "${option(name)}"`, 2);
    return value;
  };
  const runtime = required('runtime');
  if (runtime !== 'python' && runtime !== 'custom') throw new CliError(`--runtime must be python or custom, got "${runtime}"`, 2);
  const concurrency = integer('concurrency', 1, 1000);
  const logger = createLogger({ name: 'runlet-sidecar', level: option('log-level') });

  const target = new AppTarget({
    projectId: required('project'),
    appName: required('app'),
    runtime,
    replicaConcurrency: concurrency,
    responseGracePeriodSeconds: integer('response-grace-period', 1, 43200),
    queueDepth: option('queue-depth') ? integer('queue-depth', 0, 1_000_000) : undefined,
    resultLimitBytes: integer('result-limit-bytes', 1, 2 ** 31 - 1),
  });
  const bodyLimitBytes = integer('body-limit-bytes', 1, 1 << 30);
  const timeouts = {
    headMs: parseSecondsFlag('request-head-timeout', required('request-head-timeout'), MAX_REQUEST_TIMEOUT_SECONDS),
    bodyMs: parseSecondsFlag('request-body-timeout', required('request-body-timeout'), MAX_REQUEST_TIMEOUT_SECONDS),
  };
  const allowCidrs = (option('webhook-allow-cidrs') ?? '').split(',').map((cidr) => cidr.trim()).filter(Boolean);
  const runtimeOrigin = `http://127.0.0.1:${integer('app-port', 1, 65535)}`;
  const readyPath = option('ready-path') || (runtime === 'python' ? '/healthz' : null);
  const runPort = integer('port', 0, 65535);
  const adminPort = integer('admin-port', 0, 65535);
  const runStore = option('run-store') ?? (process.env.KUBERNETES_SERVICE_HOST ? 'runlog' : 'sqlite');
  if (runStore !== 'runlog' && runStore !== 'sqlite') throw new CliError(`--run-store must be runlog or sqlite, got "${runStore}"`, 2);
  const replicaName = option('replica') || hostname();
  const authSwitch = required('auth');
  if (authSwitch !== 'on' && authSwitch !== 'off') throw new CliError(`--auth must be on or off, got "${authSwitch}"`, 2);
  let auth: RunAuthenticator | undefined;
  if (authSwitch === 'on') {
    // Imported only when callers are authenticated: jose and its key-set client are ~9 MB of RSS.
    const { RunAuthenticator } = await import('../sidecar/auth/authenticator.ts');
    try {
      auth = new RunAuthenticator(loadRunAuthConfig((name) => option(name), target.projectId), { logger });
    } catch (err) {
      throw new CliError(`${(err as Error).message} (or --auth off)`, 2);
    }
  }

  const apps = new AppRegistry();
  apps.add(target);
  const registry = new Registry();
  const dataDir = resolve(required('data-dir'));
  const store = runStore === 'runlog' ? await runLogStore(target, replicaName, { dataDir, serviceAccountDir: required('service-account-dir') }, registry, logger) : new SqliteRunStore({ dataDir, logger });
  const replica = new Replica({ apps, store, replicaName, logger, bodyLimitBytes, bodyTimeoutMs: timeouts.bodyMs, webhooks: { allowCidrs }, auth, registry });
  const watcher = new RuntimeWatcher(target, { origin: runtimeOrigin, readyPath }, logger);

  const runServer = createRunServer(createRunInterface(replica), logger, { bodyLimitBytes, timeouts });
  const adminServer = createAdminServer(createAdminInterface(replica));
  await listen(runServer, runPort, 'run');
  await listen(adminServer, adminPort, 'admin');
  watcher.start();
  logger.info({ app: `${target.projectId}/${target.appName}`, runPort, adminPort }, 'sidecar listening');

  await new Promise<void>((resolveSignal) => {
    process.once('SIGTERM', () => resolveSignal());
    process.once('SIGINT', () => resolveSignal());
  });
  try {
    await replica.drain();
  } catch (err) {
    // The runs themselves finished; only their last records could not be written (the store says which).
    logger.error({ err }, 'drain could not flush every run record');
  } finally {
    watcher.stop();
    await closeServer(runServer);
    await closeServer(adminServer);
    await apps.close();
    await store.close();
  }
  return 0;
}

/**
 * The pod's RunLog, through the API server (in-cluster service account, or KUBECONFIG), with its journal in
 * `dataDir`: opened first, so a data dir that cannot be written fails the start rather than the first async run.
 */
async function runLogStore(
  target: AppTarget,
  podName: string,
  { dataDir, serviceAccountDir }: { dataDir: string; serviceAccountDir: string },
  registry: Registry,
  logger: Logger,
): Promise<RunLogStore> {
  let journal;
  try {
    journal = await RunLogJournal.open({ dataDir, logger });
  } catch (err) {
    throw new CliError(`--data-dir: ${(err as Error).message}`);
  }
  let credentials;
  try {
    credentials = await loadKubeCredentials({ serviceAccountDir });
  } catch (err) {
    await journal.close();
    // A missing or broken kubeconfig or service account: the message names the file and what to fix.
    throw new CliError(`--run-store runlog: ${(err as Error).message}`);
  }
  const store = new RunLogStore({ credentials, namespace: target.projectId, podName, appName: target.appName, journal, registry, logger });
  store.start();
  return store;
}

async function listen(server: Server, port: number, name: string): Promise<void> {
  server.listen(port, '0.0.0.0');
  try {
    await once(server, 'listening');
  } catch (err) {
    throw new CliError(`the ${name} port ${port} could not be opened: ${(err as Error).message}`, 1);
  }
}

/** Stops accepting connections, closes the idle kept-alive ones, and waits for answers in progress. */
async function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolveClose) => server.close(() => resolveClose()));
  server.closeIdleConnections();
  await closed;
}

function readOptions(args: string[]): (name: OptionName) => string | undefined {
  return readEnvBackedOptions(args, OPTIONS, SIDECAR_USAGE);
}
