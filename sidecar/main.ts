// The pod sidecar, composed: one app's target, its run store (the pod's RunLog with a journal in the
// emptyDir, or SQLite), the replica that runs calls, the run port (the run interface behind the front) and
// the admin port (probes, metrics, drain), and the watch of the app container's readiness. `runlet sidecar`
// (cli/sidecar-command.ts) only turns flags into these settings.
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { Registry } from './prom-client.ts';
import { KubeApi } from '../kube/client.ts';
import { loadKubeCredentials } from '../kube/load-credentials.ts';
import { kubeServiceAccountCheck } from '../run-request/auth/service-account-check.ts';
import { readAdminKeys } from './admin-cancel.ts';
import { createAdminInterface, createAdminServer } from './admin-interface.ts';
import { podTermination } from './pod-termination.ts';
import { AppRegistry, AppTarget, type AppTargetOptions } from './apps.ts';
import type { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import { LoadMeter } from './load/load-meter.ts';
import { collectWhenIdle, gcExposed } from './idle-collection.ts';
import { nudgeMemoryReducer } from './memory-reducer-nudge.ts';
import { Replica } from './replica.ts';
import type { RequestTimeouts } from '../run-request/request-timeouts.ts';
import { createRunInterface } from './run-interface.ts';
import { createRunServer } from './run-server.ts';
import { RunLogJournal } from './runs/runlog-journal.ts';
import { RunLogStore } from './runs/runlog-store.ts';
import type { SqliteRunStore } from './runs/sqlite-run-store.ts';
import { RESULTS_TOKEN_FILE_ENV, RESULTS_URL_ENV, ResultsShipperStore } from './runs/results-shipper-store.ts';
import type { RunStore } from './runs/store.ts';
import { RuntimeWatcher } from './runtimes/runtime-watch.ts';
import { AppHealthCheck } from './runtimes/app-health.ts';

export interface SidecarSettings {
  app: AppTargetOptions;
  /**
   * Where the app container listens (the loopback), the path that says it is ready (null: ready once it
   * listens) and, for a custom app, its health path, which the admin port's `/app-healthz` asks (null: no such route).
   */
  runtime: { origin: string; readyPath: string | null; healthPath?: string | null };
  ports: { run: number; admin: number };
  /**
   * The pod's RunLog (with its journal in `dataDir`), SQLite in `dataDir`, or the results collector at
   * `resultsUrl` (with the journal in `dataDir`, batches sent with the pod's projected token in `resultsTokenFile`).
   */
  runStore: 'runlog' | 'sqlite' | 'results';
  resultsUrl?: string;
  resultsTokenFile?: string;
  dataDir: string;
  /** Where the pod's service account is mounted, for the RunLog store. */
  serviceAccountDir: string;
  replicaName: string;
  bodyLimitBytes: number;
  timeouts: RequestTimeouts;
  /** What all the run port's connections may hold of requests still arriving (`--request-buffer-bytes`). */
  requestBufferBytes: number;
  /** How long a caller may read nothing of an answer written as it comes; then `client_stalled`. */
  clientStallTimeoutMs?: number;
  webhookAllowCidrs: string[];
  /** Verifies callers' bearer tokens; undefined: callers are not authenticated. */
  auth: RunAuthenticator | undefined;
  /** Shared with the holder (scale to zero): vouches for held calls' run ids. */
  holderKey?: Uint8Array;
  /**
   * Where the namespace's admin key Secret is mounted (admin-cancel.ts), which signs the operator's cancels;
   * null: the admin port takes no cancel.
   */
  adminKeyDir: string | null;
  /**
   * Whether the admin port's /drain asks the API server if this pod (`replicaName` in the project's namespace)
   * is being deleted (pod-termination.ts), with the pod's service account; false: it drains nothing (SIGTERM does).
   */
  drainWhenPodDeleted: boolean;
  /** How long a drained replica not stopped keeps passing liveness (admin-interface.ts has the default). */
  drainedLivenessMs?: number;
  logger: Logger;
}

/** A start that failed for a reason the settings can fix: the message names the setting (its flag). */
export class SidecarStartError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SidecarStartError';
  }
}

export interface RunningSidecar {
  /** Stops taking runs, lets those accepted (and their webhooks) finish, flushes the records, then closes all. */
  drainAndClose(): Promise<void>;
}

export async function startSidecar(settings: SidecarSettings): Promise<RunningSidecar> {
  const { logger } = settings;
  const target = new AppTarget(settings.app);
  const apps = new AppRegistry();
  apps.add(target);
  const registry = new Registry();
  // The replica's load: served on the admin port at /load, which the operator's autoscaler scrapes (also
  // written into the RunLog's status for `kubectl get runlog`; never the autoscaler's path).
  const load = new LoadMeter(target.admission);
  const store: RunStore =
    settings.runStore === 'runlog'
      ? await openRunLogStore(target, settings, registry, load)
      : settings.runStore === 'results'
        ? await openResultsShipper(target, settings, registry)
        : await openSqliteStore(settings);
  // The RunLog store asks with its own client; the results shipper talks to no API server but for this.
  const apiKeyClient = settings.runStore === 'results' ? await checkApiKeysWithApiServer(settings).catch(async (err: unknown) => {
    await store.close();
    throw err;
  }) : undefined;
  const replica = new Replica({
    apps,
    store,
    replicaName: settings.replicaName,
    logger,
    bodyLimitBytes: settings.bodyLimitBytes,
    bodyTimeoutMs: settings.timeouts.bodyMs,
    requestDeadlineMs: settings.timeouts.deadlineMs,
    requestBufferBytes: settings.requestBufferBytes,
    clientStallTimeoutMs: settings.clientStallTimeoutMs,
    webhooks: { allowCidrs: settings.webhookAllowCidrs },
    auth: settings.auth,
    holderKey: settings.holderKey,
    registry,
  });
  const watcher = new RuntimeWatcher(target, { origin: settings.runtime.origin, readyPath: settings.runtime.readyPath }, logger);
  const { healthPath } = settings.runtime;
  const runServer = createRunServer(createRunInterface(replica), logger, { bodyLimitBytes: settings.bodyLimitBytes, timeouts: settings.timeouts });
  // The pod check's own client, made at the first /drain: most pods are deleted without one being asked.
  let podApi: Promise<KubeApi> | undefined;
  const podClient = (): Promise<KubeApi> => {
    podApi ??= loadKubeCredentials({ serviceAccountDir: settings.serviceAccountDir }).then((credentials) => new KubeApi(credentials, { requestTimeoutMs: API_KEY_CHECK_TIMEOUT_MS }));
    podApi.catch(() => (podApi = undefined));
    return podApi;
  };
  const { adminKeyDir } = settings;
  const adminServer = createAdminServer(
    createAdminInterface(replica, {
      drain: { pod: settings.drainWhenPodDeleted ? podTermination(podClient, target.projectId, settings.replicaName) : null },
      drainedLivenessMs: settings.drainedLivenessMs,
      cancels: { projectId: target.projectId, appName: target.appName, keys: () => (adminKeyDir === null ? Promise.resolve([]) : readAdminKeys(adminKeyDir)) },
      load,
      ...(healthPath === undefined || healthPath === null ? {} : { appHealth: new AppHealthCheck(settings.runtime.origin, healthPath) }),
    }),
  );
  await listen(runServer, settings.ports.run, 'run');
  await listen(adminServer, settings.ports.admin, 'admin');
  watcher.start();
  load.start();
  // The heap a busy period grew, given back once it is over: by one collection when the pod's NODE_OPTIONS expose
  // `gc`, or else by V8's memory reducer, nudged (either module says why).
  const memoryReducer = gcExposed() ? collectWhenIdle() : nudgeMemoryReducer();
  // While the app container starts, which takes longer: its first call then finds the keys in hand.
  void settings.auth?.prefetchKeys();
  logger.info({ app: `${target.projectId}/${target.appName}`, runPort: settings.ports.run, adminPort: settings.ports.admin }, 'sidecar listening');

  return {
    async drainAndClose() {
      try {
        await replica.drain();
      } catch (err) {
        // The runs themselves finished; only their last records could not be written (the store says which).
        logger.error({ err }, 'drain could not flush every run record');
      } finally {
        watcher.stop();
        load.stop();
        memoryReducer.stop();
        await closeServer(runServer);
        await closeServer(adminServer);
        await apps.close();
        await store.close();
        await apiKeyClient?.close();
        await (await podApi?.catch(() => undefined))?.close();
      }
    },
  };
}

/** Runs the sidecar until SIGTERM or SIGINT, then drains it. */
export async function runSidecar(settings: SidecarSettings): Promise<void> {
  const sidecar = await startSidecar(settings);
  await new Promise<void>((resolveSignal) => {
    process.once('SIGTERM', () => resolveSignal());
    process.once('SIGINT', () => resolveSignal());
  });
  await sidecar.drainAndClose();
}

/** As the RunLog store's client waits for the API server. */
const API_KEY_CHECK_TIMEOUT_MS = 10_000;

/**
 * The SQLite file in `dataDir`: one it cannot open (a read-only or foreign directory) stops the start, saying which
 * and why. Loaded only here: a pod's sidecar, which sends its runs elsewhere, does not load node:sqlite.
 */
async function openSqliteStore(settings: SidecarSettings): Promise<SqliteRunStore> {
  const { SqliteRunStore } = await import('./runs/sqlite-run-store.ts');
  try {
    return new SqliteRunStore({ dataDir: settings.dataDir, logger: settings.logger });
  } catch (err) {
    throw new SidecarStartError(`--data-dir: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The pod's RunLog, through the API server (in-cluster service account, or KUBECONFIG), with its journal in
 * `dataDir`: opened first, so a data dir that cannot be written fails the start rather than the first async run.
 */
async function openRunLogStore(target: AppTarget, settings: SidecarSettings, registry: Registry, load: LoadMeter): Promise<RunLogStore> {
  const { logger } = settings;
  let journal;
  try {
    journal = await RunLogJournal.open({ dataDir: settings.dataDir, logger });
  } catch (err) {
    throw new SidecarStartError(`--data-dir: ${(err as Error).message}`, { cause: err });
  }
  let credentials;
  try {
    credentials = await loadKubeCredentials({ serviceAccountDir: settings.serviceAccountDir });
  } catch (err) {
    await journal.close();
    // A missing or broken kubeconfig or service account: the message names the file and what to fix.
    throw new SidecarStartError(`--run-store runlog: ${(err as Error).message}`, { cause: err });
  }
  const store = new RunLogStore({ credentials, namespace: target.projectId, podName: settings.replicaName, appName: target.appName, journal, registry, logger, load });
  // In a cluster, API keys' tokens are admitted only while their ServiceAccount exists (a revoked key: within a minute).
  settings.auth?.checkApiKeysWith(kubeServiceAccountCheck(store.client));
  store.start();
  return store;
}

/**
 * In a cluster, an API key's token is admitted only while its ServiceAccount exists (a revoked key: within a
 * minute), asked of the API server with the pod's own credentials; without them the sidecar does not start,
 * rather than admit revoked keys until their tokens expire. None with auth off: no token is checked.
 */
async function checkApiKeysWithApiServer(settings: SidecarSettings): Promise<KubeApi | undefined> {
  if (settings.auth === undefined) return undefined;
  let credentials;
  try {
    credentials = await loadKubeCredentials({ serviceAccountDir: settings.serviceAccountDir });
  } catch (err) {
    throw new SidecarStartError(`--run-store results with auth on asks the API server whether API keys still exist: ${(err as Error).message}`, { cause: err });
  }
  const client = new KubeApi(credentials, { requestTimeoutMs: API_KEY_CHECK_TIMEOUT_MS });
  settings.auth.checkApiKeysWith(kubeServiceAccountCheck(client));
  return client;
}

/** The results collector, with the journal in `dataDir`; the pod's projected token for the collector says who sends. */
async function openResultsShipper(target: AppTarget, settings: SidecarSettings, registry: Registry): Promise<ResultsShipperStore> {
  const { logger, resultsUrl, resultsTokenFile } = settings;
  if (resultsUrl === undefined || resultsUrl === '') throw new SidecarStartError(`--run-store results needs the collector's URL: ${RESULTS_URL_ENV}`);
  if (resultsTokenFile === undefined || resultsTokenFile === '') {
    throw new SidecarStartError(`--run-store results sends its batches with the pod's projected token for the collector: ${RESULTS_TOKEN_FILE_ENV} is not set`);
  }
  let journal;
  try {
    journal = await RunLogJournal.open({ dataDir: settings.dataDir, logger });
  } catch (err) {
    throw new SidecarStartError(`--data-dir: ${(err as Error).message}`, { cause: err });
  }
  return new ResultsShipperStore({ collectorUrl: resultsUrl, namespace: target.projectId, tokenFile: resultsTokenFile, journal, logger, registry });
}

async function listen(server: Server, port: number, name: string): Promise<void> {
  server.listen(port, '0.0.0.0');
  try {
    await once(server, 'listening');
  } catch (err) {
    throw new SidecarStartError(`the ${name} port ${port} could not be opened: ${(err as Error).message}`, { cause: err });
  }
}

/** Stops accepting connections, closes the idle kept-alive ones, and waits for answers in progress. */
async function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolveClose) => server.close(() => resolveClose()));
  server.closeIdleConnections();
  await closed;
}
