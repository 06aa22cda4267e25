// `runlet sidecar`: the sidecar container of an app's pod (sidecar/main.ts composes it). The operator renders
// these flags; every one also reads an environment variable so a pod template can set them either way. This file
// only reads and checks them.
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { SERVICE_ACCOUNT_DIR } from '../kube/in-cluster.ts';
import type { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import { loadRunAuthConfig, RUN_AUTH_OPTIONS, RUN_AUTH_USAGE } from '../run-request/auth/config.ts';
import { HOLDER_KEY_ENV, holderKeyFromText } from '../run-request/auth/held-run.ts';
import { RESULTS_TOKEN_FILE_ENV, RESULTS_URL_ENV } from '../sidecar/runs/results-shipper-store.ts';
import { ADMIN_KEY_DIR } from '../sidecar/admin-cancel.ts';
import { createLogger } from '../sidecar/logger.ts';
import { DEFAULT_CLIENT_STALL_TIMEOUT_MS } from '../sidecar/active-runs.ts';
import { runSidecar, SidecarStartError } from '../sidecar/main.ts';
import { DEFAULT_REQUEST_BUFFER_BYTES } from '../run-request/request-budget.ts';
import { DEFAULT_REQUEST_BODY_TIMEOUT_MS, DEFAULT_REQUEST_DEADLINE_MS, DEFAULT_REQUEST_HEAD_TIMEOUT_MS, MAX_REQUEST_TIMEOUT_SECONDS } from '../run-request/request-timeouts.ts';
import { DEFAULT_BODY_LIMIT_BYTES } from '../run-request/request-body.ts';
import type { AppTargetOptions } from '../sidecar/apps.ts';
import { DEFAULT_RESULT_LIMIT_BYTES } from '../sidecar/runtimes/runtime-connections.ts';
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
  --health-path PATH          a custom app's health path: the admin port's /app-healthz asks it on the
                              loopback (the app container's liveness probe); unset: no /app-healthz [RUNLET_HEALTH_PATH]
  --port N                    run interface port (default 8000) [RUNLET_PORT]
  --admin-port N              probes, metrics, drain, cancel (default 8001) [RUNLET_ADMIN_PORT]; its /drain
                              drains only while the API server says this pod (--replica) is being deleted
  --admin-key-dir DIR         the namespace's admin key Secret, mounted: signs cancels on the admin port
                              (default ${ADMIN_KEY_DIR}; none there: no cancel is taken) [RUNLET_ADMIN_KEY_DIR]
  --concurrency N             calls in flight to the app (default 4) [RUNLET_CONCURRENCY]
  --queue-depth N             calls waiting for a slot (default 10 x concurrency) [RUNLET_QUEUE_DEPTH]
  --response-grace-period S   run time limit in seconds (default 900) [RUNLET_RESPONSE_GRACE_PERIOD]
  --run-store runlog|sqlite|results
                              where runs are recorded: the pod's RunLog (default in a cluster), SQLite in
                              --data-dir (default elsewhere), or the operator's results collector at
                              RUNLET_RESULTS_URL, batches sent with the pod's projected token in the file
                              RUNLET_RESULTS_TOKEN_FILE [RUNLET_RUN_STORE]
  --data-dir DIR              where async runs are made durable: the RunLog's journal, or the SQLite store
                              (default /var/run/runlet, the pod's emptyDir) [RUNLET_DATA_DIR]
  --replica NAME              this replica's name on run records [POD_NAME]
  --service-account-dir DIR   where the pod's service-account token and CA are mounted, for the RunLog
                              and the API server's key set
                              (default ${SERVICE_ACCOUNT_DIR}) [RUNLET_SERVICE_ACCOUNT_DIR]
  --webhook-allow-cidrs LIST  comma-separated CIDRs webhooks may reach despite the SSRF guard [RUNLET_WEBHOOK_ALLOW_CIDRS]
  --body-limit-bytes N        request body limit (default 16 MiB) [RUNLET_BODY_LIMIT_BYTES]
  --result-limit-bytes N      the largest result a Python function may return (default 32 MiB) [RUNLET_RESULT_LIMIT_BYTES]
  --keep-results on|off       keep each run's result for the get of the run (default off; not with
                              --run-store runlog) [RUNLET_KEEP_RESULTS]
  --result-keep-bytes N       the largest result kept (default 1 MiB) [RUNLET_RESULT_KEEP_BYTES]
  --result-ttl S              how long a kept result is returned (default 3600) [RUNLET_RESULT_TTL]
  --request-head-timeout S    longest a request's head may take to arrive, then 408 (default 10) [RUNLET_REQUEST_HEAD_TIMEOUT]
  --request-body-timeout S    longest pause while a request's body arrives, then 408 (default 30) [RUNLET_REQUEST_BODY_TIMEOUT]
  --request-deadline S        longest a request may take to arrive whole, then 408 (default 60) [RUNLET_REQUEST_DEADLINE]
  --request-buffer-bytes N    what all connections may hold of requests still arriving, then 503 (default 64 MiB)
                              [RUNLET_REQUEST_BUFFER_BYTES]
  --client-stall-timeout S    longest a caller may read nothing of a stream (or of a custom app's or a large
                              result's answer) before the run is cut, cancelled client_stalled, and its slot
                              freed (default 60) [RUNLET_CLIENT_STALL_TIMEOUT]
  --log-level LEVEL           (default info) [RUNLET_LOG_LEVEL]
  --auth on|off               verify callers' bearer tokens (default on; off exposes the app to anyone who reaches the pod) [RUNLET_AUTH]
${RUN_AUTH_USAGE}`;

const OPTIONS = {
  project: { env: ['RUNLET_PROJECT', 'POD_NAMESPACE'] },
  app: { env: ['RUNLET_APP'] },
  runtime: { env: ['RUNLET_RUNTIME'], default: 'python' },
  'app-port': { env: ['RUNLET_APP_PORT'], default: '8192' },
  'ready-path': { env: ['RUNLET_READY_PATH'] },
  'health-path': { env: ['RUNLET_HEALTH_PATH'] },
  port: { env: ['RUNLET_PORT'], default: '8000' },
  'admin-port': { env: ['RUNLET_ADMIN_PORT'], default: '8001' },
  'admin-key-dir': { env: ['RUNLET_ADMIN_KEY_DIR'], default: ADMIN_KEY_DIR },
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
  'keep-results': { env: ['RUNLET_KEEP_RESULTS'], default: 'off' },
  'result-keep-bytes': { env: ['RUNLET_RESULT_KEEP_BYTES'], default: '1048576' },
  'result-ttl': { env: ['RUNLET_RESULT_TTL'], default: '3600' },
  'request-head-timeout': { env: ['RUNLET_REQUEST_HEAD_TIMEOUT'], default: String(DEFAULT_REQUEST_HEAD_TIMEOUT_MS / 1000) },
  'request-body-timeout': { env: ['RUNLET_REQUEST_BODY_TIMEOUT'], default: String(DEFAULT_REQUEST_BODY_TIMEOUT_MS / 1000) },
  'request-deadline': { env: ['RUNLET_REQUEST_DEADLINE'], default: String(DEFAULT_REQUEST_DEADLINE_MS / 1000) },
  'request-buffer-bytes': { env: ['RUNLET_REQUEST_BUFFER_BYTES'], default: String(DEFAULT_REQUEST_BUFFER_BYTES) },
  'client-stall-timeout': { env: ['RUNLET_CLIENT_STALL_TIMEOUT'], default: String(DEFAULT_CLIENT_STALL_TIMEOUT_MS / 1000) },
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
  // Appended to the app's loopback origin: anything but a path would name another host (`@host/`).
  const path = (name: 'ready-path' | 'health-path'): string | null => {
    const value = option(name) || null;
    if (value !== null && !value.startsWith('/')) throw new CliError(`--${name} must be an HTTP path starting with "/", got "${value}"`, 2);
    return value;
  };
  const readyPath = path('ready-path') ?? (runtime === 'python' ? '/healthz' : null);
  const healthPath = path('health-path');
  const logger = createLogger({ name: 'runlet-sidecar', level: option('log-level') });

  const app: AppTargetOptions = {
    projectId: required('project'),
    appName: required('app'),
    runtime,
    replicaConcurrency: concurrency,
    responseGracePeriodSeconds: integer('response-grace-period', 1, 43200),
    queueDepth: option('queue-depth') ? integer('queue-depth', 0, 1_000_000) : undefined,
    resultLimitBytes: integer('result-limit-bytes', 1, 2 ** 31 - 1),
  };
  const runStore = option('run-store') ?? (process.env.KUBERNETES_SERVICE_HOST ? 'runlog' : 'sqlite');
  if (runStore !== 'runlog' && runStore !== 'sqlite' && runStore !== 'results') throw new CliError(`--run-store must be runlog, sqlite or results, got "${runStore}"`, 2);
  const keepResults = required('keep-results');
  if (keepResults !== 'on' && keepResults !== 'off') throw new CliError(`--keep-results must be on or off, got "${keepResults}"`, 2);
  if (keepResults === 'on') {
    // A RunLog lives in etcd, whose objects are bounded to about 1 MiB: it holds records, never results.
    if (runStore === 'runlog') throw new CliError('--keep-results on needs --run-store sqlite or results: the RunLog store keeps no results', 2);
    app.resultKeeping = { maxBytes: integer('result-keep-bytes', 1, 16_777_216), ttlSeconds: integer('result-ttl', 1, 2_592_000) };
  }
  const authSwitch = required('auth');
  if (authSwitch !== 'on' && authSwitch !== 'off') throw new CliError(`--auth must be on or off, got "${authSwitch}"`, 2);
  let auth: RunAuthenticator | undefined;
  if (authSwitch === 'on') {
    // Imported only when callers are authenticated: jose and its key-set client are ~9 MB of RSS.
    const { RunAuthenticator } = await import('../run-request/auth/authenticator.ts');
    try {
      auth = new RunAuthenticator(loadRunAuthConfig((name) => option(name), app.projectId, process.env, required('service-account-dir')), { logger });
    } catch (err) {
      throw new CliError(`${(err as Error).message} (or --auth off)`, 2);
    }
  }

  try {
    await runSidecar({
      app,
      runtime: {
        origin: `http://127.0.0.1:${integer('app-port', 1, 65535)}`,
        readyPath,
        healthPath,
      },
      ports: { run: integer('port', 0, 65535), admin: integer('admin-port', 0, 65535) },
      runStore,
      resultsUrl: process.env[RESULTS_URL_ENV],
      resultsTokenFile: process.env[RESULTS_TOKEN_FILE_ENV],
      dataDir: resolve(required('data-dir')),
      serviceAccountDir: required('service-account-dir'),
      replicaName: option('replica') || hostname(),
      bodyLimitBytes: integer('body-limit-bytes', 1, 1 << 30),
      timeouts: {
        headMs: parseSecondsFlag('request-head-timeout', required('request-head-timeout'), MAX_REQUEST_TIMEOUT_SECONDS),
        bodyMs: parseSecondsFlag('request-body-timeout', required('request-body-timeout'), MAX_REQUEST_TIMEOUT_SECONDS),
        deadlineMs: parseSecondsFlag('request-deadline', required('request-deadline'), MAX_REQUEST_TIMEOUT_SECONDS),
      },
      requestBufferBytes: integer('request-buffer-bytes', 1, 2 ** 40),
      clientStallTimeoutMs: parseSecondsFlag('client-stall-timeout', required('client-stall-timeout'), MAX_REQUEST_TIMEOUT_SECONDS),
      webhookAllowCidrs: (option('webhook-allow-cidrs') ?? '').split(',').map((cidr) => cidr.trim()).filter(Boolean),
      auth,
      holderKey: secretFromEnv(process.env[HOLDER_KEY_ENV], holderKeyFromText),
      adminKeyDir: resolve(required('admin-key-dir')),
      // Off the pod (no POD_NAME), there is no pod to ask about: SIGTERM drains.
      drainWhenPodDeleted: option('replica') !== undefined && option('replica') !== '',
      logger,
    });
  } catch (err) {
    if (err instanceof SidecarStartError) throw new CliError(err.message);
    throw err;
  }
  return 0;
}

/**
 * A secret from the sidecar's environment (the pod spec the operator renders), checked by `parse`: undefined
 * when it is not set, and a usage error (exit 2) saying why when it is not one: the holder key (none: no call
 * is held).
 */
function secretFromEnv<T>(text: string | undefined, parse: (text: string) => T): T | undefined {
  if (text === undefined || text === '') return undefined;
  try {
    return parse(text);
  } catch (err) {
    throw new CliError((err as Error).message, 2);
  }
}

function readOptions(args: string[]): (name: OptionName) => string | undefined {
  return readEnvBackedOptions(args, OPTIONS, SIDECAR_USAGE);
}
