// The operator, composed: watches fill caches on every replica (app-watches.ts); the elected leader alone
// reconciles Apps and looks after RunLogs (leader-duties.ts); the HTTP server serves health, metrics and the
// management API on every replica.
//
//   App / Deployment / code ConfigMap events ─▶ work queue (dedup, backoff) ─▶ reconcile ─▶ apply + status
//   RunLog events ─▶ RunLog cache ─▶ management API (every replica)
//                                 ─▶ run counters ─▶ App.status.runs (leader, rate-limited)
//   Pod / RunLog events, sweeps   ─▶ RunLog janitor ─▶ runs of gone pods failed, RunLogs past retention deleted (leader)
import type { KubeConfig } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import { KubeApi } from '../kube/client.ts';
import { kubeConfigCredentials } from '../kube/kubeconfig.ts';
import { LeaderElector } from '../kube/leader.ts';
import { objectKey } from '../kube/watch.ts';
import { RunLogSource } from '../management/runlog-source.ts';
import { watchAppObjects } from './app-watches.ts';
import { switchEndpoints } from './autoscaling/endpoints-switch.ts';
import { startHolder, type Holder, type HolderOptions } from './autoscaling/holder.ts';
import type { OperatorConfig } from './config.ts';
import { LeaderDuties } from './leader-duties.ts';
import { mountManagementApi } from './management.ts';
import { OperatorMetrics } from './metrics.ts';
import { createReconcileQueue } from './reconcile-queue.ts';
import { createReconciler } from './reconcile.ts';
import { RunCounters } from './run-counters.ts';
import { RunLogJanitor } from './runlog-janitor.ts';
import { buildOperatorServer } from './server.ts';
import { SidecarRbacApplier } from './sidecar-rbac.ts';

/** Who owns the fields of the objects the operator applies and patches (managedFields). */
const FIELD_MANAGER = 'runlet-operator';

export interface OperatorOptions {
  /** Where the API server is: `server.kubeConfig()` in tests, `loadFromDefault()` in a cluster. */
  kubeConfig: KubeConfig;
  /** A complete configuration: `resolveConfig(...)` from operator/config.ts fills the defaults. */
  config: OperatorConfig;
  /** Default: pino to stderr at `config.logLevel`. */
  logger?: Logger;
  /** Node process metrics in /metrics (default true; several operators in one test process may skip them). */
  processMetrics?: boolean;
  /** Wall clock for RunLog retention and the completion time of lost runs; tests move it. Default the system's. */
  clock?: () => Date;
  /** Holds calls to Apps at zero replicas, on `config.holder` (autoscaling/holder.ts); absent: no holder. */
  holder?: OperatorHolderOptions;
}

/** What the holder needs beyond the operator's own: how callers and replicas are trusted. */
export type OperatorHolderOptions = Pick<HolderOptions, 'auth' | 'holderKey' | 'replicaAddress' | 'coldStartTimeoutMs' | 'retryDelayMs'>;

/** The Apps the operator knows, as the management API asks: without I/O (it is the watch cache). */
export interface AppCache {
  hasApp(projectId: string, appName: string): boolean;
  get(namespace: string, name: string): App | undefined;
  list(): App[];
}

export interface Operator {
  /** Health, readiness, metrics and the management API (/v2); register more routes before `listen()`. */
  readonly server: FastifyInstance;
  readonly metrics: OperatorMetrics;
  readonly apps: AppCache;
  readonly isLeader: boolean;
  /** Every watch has filled its cache (the RunLog cache of the management API too). */
  readonly ready: boolean;
  /** The holder, once `listen()` started it (when the options ask for one). */
  readonly holder: Holder | undefined;
  /** Starts the watches and the campaign for leadership; returns at once. */
  start(): void;
  /** Listens on `config.server` (and the holder on `config.holder`); resolves with the server's address (`http://host:port`). */
  listen(): Promise<string>;
  /** Releases leadership, finishes the reconciles in hand, stops watching and closes the server. */
  stop(): Promise<void>;
}

export function createOperator(options: OperatorOptions): Operator {
  const { config } = options;
  const logger = options.logger ?? pino({ name: 'runlet-operator', level: config.logLevel }, pino.destination({ dest: 2, sync: false }));
  const api = new KubeApi(kubeConfigCredentials(options.kubeConfig), { fieldManager: FIELD_MANAGER, requestTimeoutMs: config.requestTimeoutSeconds * 1000 });
  const metrics = new OperatorMetrics({ processMetrics: options.processMetrics });
  const rbac = new SidecarRbacApplier(api);
  const watchdogMs = config.watchdogSeconds * 1000;

  const watches = watchAppObjects({
    api,
    logger,
    watchdogMs,
    metrics,
    reconcileSoon,
    appDeleted: (key) => {
      queue.forget(key);
      counters.appDeleted(key);
    },
    podChanged: (pod, gone) => janitor.podChanged(pod, gone),
  });
  const { apps, pods } = watches;
  const appCache: AppCache = {
    hasApp: (namespace, name) => apps.get(namespace, name) !== undefined,
    get: (namespace, name) => apps.get(namespace, name),
    list: () => apps.list(),
  };

  // RunLogs: one cache, for the management API, the counters and the janitor alike (RunLogs are large).
  const runLogs = new RunLogSource({
    api,
    logger,
    watchdogMs,
    apps: appCache,
    onRestart: (resource, reason) => metrics.watchRestarted(resource, reason),
    onRunLog: {
      onUpsert: (runLog) => {
        counters.runLogChanged(runLog);
        janitor.runLogChanged(runLog);
      },
      onDelete: (runLog) => counters.runLogDeleted(runLog),
    },
  });
  const counters = new RunCounters({
    api,
    apps: appCache,
    logger,
    minIntervalMs: config.runLogs.countersIntervalSeconds * 1000,
    onWrite: () => metrics.runCounterWrites.inc(),
  });
  const janitor = new RunLogJanitor({
    api,
    runLogs,
    pods: { get: (namespace, name) => pods.get(namespace, name) },
    apps: appCache,
    logger,
    now: options.clock ?? (() => new Date()),
    sweepIntervalMs: config.runLogs.sweepSeconds * 1000,
    onRunsClosed: (lost, undelivered) => {
      metrics.runsLost.inc(lost);
      metrics.webhooksUndelivered.inc(undelivered);
    },
    onRunLogDeleted: () => metrics.runLogsDeleted.inc(),
  });
  metrics.observeRunsCached(() => runLogs.runs);
  const cachesSynced = (): boolean => watches.all.every((watch) => watch.synced) && runLogs.synced;

  const holderService = { namespace: config.holder.serviceNamespace, name: config.holder.serviceName };
  const switchAppEndpoints = (app: App) => switchEndpoints(api, app, holderService);
  const queue = createReconcileQueue({ workers: config.workers, reconcile: createReconciler({ api, config, apps: appCache, rbac, logger, switchEndpoints: switchAppEndpoints }), metrics, logger });
  function reconcileSoon(namespace: string | undefined, name: string | undefined): void {
    if (namespace !== undefined && name !== undefined) queue.add(objectKey(namespace, name));
  }

  const duties = new LeaderDuties({
    queue,
    rbac,
    janitor,
    counters,
    reconcileAll: () => {
      for (const app of apps.list()) reconcileSoon(app.metadata.namespace, app.metadata.name);
    },
    appsSynced: () => apps.whenSynced(),
    allSynced: () => Promise.all([...watches.all.map((watch) => watch.whenSynced()), runLogs.ready()]),
    resyncMs: config.resyncSeconds * 1000,
  });
  const elector = new LeaderElector({
    api,
    namespace: config.leaderElection.namespace,
    leaseName: config.leaderElection.leaseName,
    identity: config.leaderElection.identity,
    leaseDurationMs: config.leaderElection.leaseDurationSeconds * 1000,
    renewDeadlineMs: config.leaderElection.renewDeadlineSeconds * 1000,
    retryPeriodMs: config.leaderElection.retryPeriodSeconds * 1000,
    logger,
    onStartedLeading: () => {
      metrics.leader.set(1);
      duties.begin();
    },
    onStoppedLeading: () => {
      metrics.leader.set(0);
      duties.end();
    },
  });

  const server = buildOperatorServer({
    metrics,
    logger,
    health: {
      ready: () => ({
        ready: cachesSynced(),
        detail: { leader: elector.isLeader, apps: apps.size, reconcileQueue: queue.depth },
      }),
    },
  });
  mountManagementApi(server, { api, runs: runLogs, apps: runLogs, logger });

  let started = false;
  let holder: Holder | undefined;
  return {
    server,
    metrics,
    apps: appCache,
    get isLeader() {
      return elector.isLeader;
    },
    get ready() {
      return cachesSynced();
    },
    get holder() {
      return holder;
    },
    start() {
      if (started) return;
      started = true;
      for (const watch of watches.all) watch.start();
      runLogs.start();
      elector.start();
      logger.info({ identity: config.leaderElection.identity }, 'operator started');
    },
    async listen() {
      const url = await server.listen({ host: config.server.host, port: config.server.port });
      if (options.holder !== undefined && holder === undefined) {
        holder = await startHolder({
          ...options.holder,
          api,
          apps: appCache,
          appsSynced: () => apps.whenSynced(),
          logger,
          identity: config.leaderElection.identity,
          watchdogMs,
          host: config.holder.host,
          port: config.holder.port,
        });
        // Async calls a previous run of this replica (or a dead one) accepted and had not handed over yet.
        const recovered = await holder.recover();
        if (recovered > 0) logger.info({ recovered }, 'holder: handing over held async calls found at start');
      }
      return url;
    },
    async stop() {
      await holder?.close();
      await elector.stop();
      await duties.ended();
      await Promise.all([...watches.all.map((watch) => watch.stop()), runLogs.stop()]);
      await server.close();
      await api.close();
      logger.info('operator stopped');
    },
  };
}

/** Creates and starts an operator (and its HTTP server, unless `listen: false`). */
export async function startOperator(options: OperatorOptions & { listen?: boolean }): Promise<Operator & { url: string | undefined }> {
  const operator = createOperator(options);
  operator.start();
  const url = options.listen === false ? undefined : await operator.listen();
  return Object.assign(operator, { url });
}
