// `runlet activator`: holds the calls to Apps at zero replicas, in a Deployment of its own (activator/main.ts).
import { hostname } from 'node:os';
import { SERVICE_ACCOUNT_DIR } from '../kube/in-cluster.ts';
import { loadKubeCredentials } from '../kube/load-credentials.ts';
import { createActivator } from '../activator/main.ts';
import { DEFAULT_HOLD_LIMITS } from '../activator/hold-bounds.ts';
import { ISSUER_AUTH_OPTIONS, ISSUER_AUTH_USAGE } from '../run-request/auth/config.ts';
import { createLogger } from '../sidecar/logger.ts';
import { parseSecondsFlag, readEnvBackedOptions, type EnvBackedOption } from './arguments.ts';
import { CliError } from './cli-error.ts';
import { issuerAuthenticator } from './issuer-auth.ts';

export const ACTIVATOR_USAGE = `Usage: runlet activator [options]

Holds the calls to Apps at zero replicas: the Endpoints of such an App point at the activators (the operator
writes them from the holder Service's addresses). It authenticates a call as the App's sidecars would, wakes
the App and hands the call to a pod once one is ready (docs/scale-to-zero.md). Replicas are alike; run two or
more. Kubernetes access as the operator's: KUBECONFIG, else ~/.kube/config, else the pod's service account.

Options (environment variable in brackets); flags override the environment:
  --host ADDRESS                  address of the holder (default 0.0.0.0) [RUNLET_ACTIVATOR_HOST]
  --port N                        port of the holder, the one the holder Service names (default 8090) [RUNLET_ACTIVATOR_PORT]
  --admin-host ADDRESS            address of /healthz, /ready, /metrics, /load (default 0.0.0.0) [RUNLET_ACTIVATOR_ADMIN_HOST]
  --admin-port N                  port of /healthz, /ready, /metrics, /load (default 8081) [RUNLET_ACTIVATOR_ADMIN_PORT]
  --identity NAME                 this replica, in its claims on held async calls (default: POD_NAME, else host-pid) [RUNLET_IDENTITY]
  --key-namespace NS              namespace of the control key Secret (default: POD_NAMESPACE, else default) [RUNLET_HOLDER_KEY_NAMESPACE]
  --key-secret NAME               the control key Secret, which the operator makes and signs its requests to the
                                  holder with; waited for until it exists (default runlet-holder-control)
                                  [RUNLET_HOLDER_KEY_SECRET]. Each App namespace's hand-over key is read from
                                  its own Secret runlet-holder-key
  --held-namespace NS             namespace of the records of async calls held at zero (Secrets), apart from the
                                  key's (default: the key namespace's name + -held) [RUNLET_HELD_CALLS_NAMESPACE]
  --drain-seconds S               on SIGTERM, /ready answers 503 this long before the holder closes (default 5) [RUNLET_ACTIVATOR_DRAIN_SECONDS]
  --max-calls-per-app N           calls to one App held while it starts; more get 503 over-capacity at once
                                  (default 250) [RUNLET_ACTIVATOR_MAX_CALLS_PER_APP]
  --max-calls N                   calls to all Apps together held here (default 1000) [RUNLET_ACTIVATOR_MAX_CALLS]
  --max-calls-per-namespace N     calls to the Apps of one namespace held here together, at most --max-calls:
                                  one tenant's burst leaves the rest to the others (default: half of
                                  --max-calls) [RUNLET_ACTIVATOR_MAX_CALLS_PER_NAMESPACE]
  --max-body-mib N                MiB of held calls' bodies kept here, one namespace's at most half; a body past
                                  them gets 503 request-buffer-full at once (default 64) [RUNLET_ACTIVATOR_MAX_BODY_MIB]
  --watchdog-seconds S            restart the App watch after this long without an event or bookmark (default 120) [RUNLET_WATCHDOG_SECONDS]
  --log-level LEVEL               (default info) [RUNLET_LOG_LEVEL]
  --service-account-dir DIR       where the pod's service-account token and CA are mounted
                                  (default ${SERVICE_ACCOUNT_DIR}) [RUNLET_SERVICE_ACCOUNT_DIR]

On SIGTERM it stops being ready, waits --drain-seconds, then closes: async calls in hand are handed over or
stay recorded for another replica; sync and stream calls still waiting for a pod are cut.

It authenticates callers as the sidecars do, from the same options and variables:
${ISSUER_AUTH_USAGE}`;

const MIB = 1024 * 1024;
const OPTIONS = {
  host: { env: ['RUNLET_ACTIVATOR_HOST'], default: '0.0.0.0' },
  port: { env: ['RUNLET_ACTIVATOR_PORT'], default: '8090' },
  'admin-host': { env: ['RUNLET_ACTIVATOR_ADMIN_HOST'], default: '0.0.0.0' },
  'admin-port': { env: ['RUNLET_ACTIVATOR_ADMIN_PORT'], default: '8081' },
  identity: { env: ['RUNLET_IDENTITY', 'POD_NAME'], default: `${hostname()}-${process.pid}` },
  'key-namespace': { env: ['RUNLET_HOLDER_KEY_NAMESPACE', 'POD_NAMESPACE'], default: 'default' },
  'key-secret': { env: ['RUNLET_HOLDER_KEY_SECRET'], default: 'runlet-holder-control' },
  'held-namespace': { env: ['RUNLET_HELD_CALLS_NAMESPACE'] },
  'drain-seconds': { env: ['RUNLET_ACTIVATOR_DRAIN_SECONDS'], default: '5' },
  'max-calls-per-app': { env: ['RUNLET_ACTIVATOR_MAX_CALLS_PER_APP'], default: String(DEFAULT_HOLD_LIMITS.callsPerApp) },
  'max-calls': { env: ['RUNLET_ACTIVATOR_MAX_CALLS'], default: String(DEFAULT_HOLD_LIMITS.calls) },
  'max-calls-per-namespace': { env: ['RUNLET_ACTIVATOR_MAX_CALLS_PER_NAMESPACE'] },
  'max-body-mib': { env: ['RUNLET_ACTIVATOR_MAX_BODY_MIB'], default: String(DEFAULT_HOLD_LIMITS.bodyBytes / MIB) },
  'watchdog-seconds': { env: ['RUNLET_WATCHDOG_SECONDS'], default: '120' },
  'log-level': { env: ['RUNLET_LOG_LEVEL'], default: 'info' },
  'service-account-dir': { env: ['RUNLET_SERVICE_ACCOUNT_DIR'], default: SERVICE_ACCOUNT_DIR },
  ...ISSUER_AUTH_OPTIONS,
} as const satisfies Record<string, EnvBackedOption>;

/** The operator's levels (operator/config.ts): the chart gives both its `operator.logLevel`. */
const LOG_LEVELS: readonly string[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
/** A drain longer than a pod's default termination grace period (30 s) would be cut by the kubelet anyway. */
const MAX_DRAIN_SECONDS = 30;

export async function runActivatorCommand(args: string[]): Promise<number> {
  const option = readEnvBackedOptions(args, OPTIONS, ACTIVATOR_USAGE);
  const port = (name: 'port' | 'admin-port'): number => {
    const value = option(name)!;
    if (!/^\d+$/.test(value) || Number(value) > 65535) throw new CliError(`--${name} must be a port number, got "${value}"`, 2);
    return Number(value);
  };
  const level = option('log-level')!;
  if (!LOG_LEVELS.includes(level)) throw new CliError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got "${level}"`, 2);
  const drain = option('drain-seconds')!;
  const drainMs = drain === '0' ? 0 : parseSecondsFlag('drain-seconds', drain, MAX_DRAIN_SECONDS);
  const count = (name: 'max-calls-per-app' | 'max-calls' | 'max-calls-per-namespace' | 'max-body-mib'): number => {
    const value = option(name)!;
    if (!/^[1-9]\d{0,6}$/.test(value)) throw new CliError(`--${name} must be a whole number from 1 to 9999999, got "${value}"`, 2);
    return Number(value);
  };
  const keyNamespace = option('key-namespace')!;
  const heldNamespace = option('held-namespace') ?? `${keyNamespace}-held`;
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(heldNamespace)) throw new CliError(`--held-namespace must be a namespace name (a DNS label of at most 63 characters), got "${heldNamespace}"`, 2);
  // Listing the records cannot be limited to them: in the key's namespace it would reach every Secret there.
  if (heldNamespace === keyNamespace) throw new CliError(`--held-namespace must be a namespace of its own, not the key's (${keyNamespace}): the right to list held calls would reach its other Secrets`, 2);
  if (option('max-calls-per-namespace') !== undefined && count('max-calls-per-namespace') > count('max-calls')) {
    throw new CliError(`--max-calls-per-namespace (${count('max-calls-per-namespace')}) must be at most --max-calls (${count('max-calls')})`, 2);
  }
  const config = {
    host: option('host')!,
    port: port('port'),
    adminHost: option('admin-host')!,
    adminPort: port('admin-port'),
    identity: option('identity')!,
    keySecret: { namespace: keyNamespace, name: option('key-secret')! },
    heldNamespace,
    drainMs,
    limits: {
      callsPerApp: count('max-calls-per-app'),
      calls: count('max-calls'),
      ...(option('max-calls-per-namespace') === undefined ? {} : { callsPerNamespace: count('max-calls-per-namespace') }),
      bodyBytes: count('max-body-mib') * MIB,
    },
    watchdogMs: parseSecondsFlag('watchdog-seconds', option('watchdog-seconds')!, 3600),
  };
  const logger = createLogger({ name: 'runlet-activator', level });
  const serviceAccountDir = option('service-account-dir');
  let kubeConfig;
  try {
    kubeConfig = await (await loadKubeCredentials({ serviceAccountDir })).kubeConfig();
  } catch (error) {
    throw new CliError(`runlet activator: ${(error as Error).message}`);
  }
  const auth = issuerAuthenticator(option, serviceAccountDir, logger, { command: 'runlet activator', otherwise: 'or give the options the sidecars are given' });

  const activator = createActivator({ kubeConfig, config, auth, logger });
  let addresses;
  try {
    addresses = await activator.listen();
  } catch (error) {
    // The admin server may be up already: closed, so that the process exits (and its pod restarts) rather than
    // answer probes without holding calls.
    await activator.stop();
    await auth.close();
    throw new CliError(`runlet activator: could not start: ${(error as Error).message}`);
  }
  logger.info({ ...addresses, identity: config.identity, heldNamespace: config.heldNamespace, cluster: kubeConfig.getCurrentCluster()?.server }, 'activator listening');

  await new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
  await activator.stop();
  await auth.close();
  return 0;
}
