// The operator, composed: watches fill caches on every replica; the elected leader alone reconciles Apps and
// looks after RunLogs; the HTTP server serves health, metrics and the management API on every replica.
//
//   App / Deployment / code ConfigMap events ─▶ work queue (dedup, backoff) ─▶ reconcile ─▶ apply + status
//   RunLog events ─▶ RunLog cache ─▶ management API (every replica)
//                                 ─▶ run counters ─▶ App.status.runs (leader, rate-limited)
//   Pod / RunLog events, sweeps   ─▶ RunLog janitor ─▶ runs of gone pods failed, RunLogs past retention deleted (leader)
import type { KubeConfig } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import { APP_PLURAL, RUNLET_API_VERSION } from '../crds/api-group.ts';
import { RunLogSource } from '../management/runlog-source.ts';
import type { OperatorConfig } from './config.ts';
import { KubeApi, type KubeObject } from './kube-api.ts';
import { LeaderElector } from './leader.ts';
import { mountManagementApi } from './management.ts';
import { OperatorMetrics } from './metrics.ts';
import { createReconciler } from './reconcile.ts';
import { APP_LABEL, MANAGED_SELECTOR, owningAppName } from './render/labels.ts';
import { RunCounters } from './run-counters.ts';
import { RunLogJanitor } from './runlog-janitor.ts';
import type { PodObject } from './runlog-verdict.ts';
import { buildOperatorServer } from './server.ts';
import { SidecarRbacApplier } from './sidecar-rbac.ts';
import { ResourceWatch, metadataOnly, objectKey } from './watch.ts';
import { WorkQueue } from './work-queue.ts';

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
}

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
  /** Starts the watches and the campaign for leadership; returns at once. */
  start(): void;
  /** Listens on `config.server`; resolves with the address (`http://host:port`). */
  listen(): Promise<string>;
  /** Releases leadership, finishes the reconciles in hand, stops watching and closes the server. */
  stop(): Promise<void>;
}

interface DeploymentObject extends KubeObject {
  status?: { replicas?: number; readyReplicas?: number };
}

export function createOperator(options: OperatorOptions): Operator {
  const { config } = options;
  const logger = options.logger ?? pino({ name: 'runlet-operator', level: config.logLevel }, pino.destination({ dest: 2, sync: false }));
  const api = new KubeApi(options.kubeConfig, { requestTimeoutMs: config.requestTimeoutSeconds * 1000 });
  const metrics = new OperatorMetrics({ processMetrics: options.processMetrics });
  const rbac = new SidecarRbacApplier(api);
  const clock = options.clock ?? (() => new Date());
  const watchOptions = { api, logger, watchdogMs: config.watchdogSeconds * 1000 };

  const apps: ResourceWatch<App & KubeObject> = new ResourceWatch<App & KubeObject>({
    ...watchOptions,
    name: 'apps',
    path: `/apis/${RUNLET_API_VERSION}/${APP_PLURAL}`,
    onRestart: (reason) => metrics.watchRestarted('apps', reason),
    handlers: {
      // Status writes (ours) leave the generation alone: only spec changes and new Apps need a reconcile.
      onUpsert: (app, previous) => {
        if (previous?.metadata.generation !== app.metadata.generation) enqueue(app.metadata.namespace, app.metadata.name);
      },
      onDelete: (app) => {
        queue.forget(objectKey(app.metadata.namespace, app.metadata.name));
        counters.appDeleted(objectKey(app.metadata.namespace, app.metadata.name));
      },
    },
  });
  const deployments = new ResourceWatch<DeploymentObject>({
    ...watchOptions,
    name: 'deployments',
    path: '/apis/apps/v1/deployments',
    labelSelector: MANAGED_SELECTOR,
    onRestart: (reason) => metrics.watchRestarted('deployments', reason),
    // Which App owns it and how many replicas are ready: not the pod template.
    transform: (deployment) => ({ ...metadataOnly(deployment), status: { replicas: deployment.status?.replicas, readyReplicas: deployment.status?.readyReplicas } }),
    handlers: {
      onUpsert: (deployment, previous) => {
        if (deploymentEventMatters(deployment, previous)) enqueue(deployment.metadata?.namespace, owningAppName(deployment));
      },
      onDelete: (deployment) => enqueue(deployment.metadata?.namespace, owningAppName(deployment)),
    },
  });
  // Code ConfigMaps labelled runlet.dev/app roll out as soon as they change; others at the next resync.
  const codeConfigMaps = new ResourceWatch<KubeObject>({
    ...watchOptions,
    name: 'configmaps',
    path: '/api/v1/configmaps',
    labelSelector: APP_LABEL,
    onRestart: (reason) => metrics.watchRestarted('configmaps', reason),
    // That it changed is all that matters here: the reconcile reads the code itself.
    transform: metadataOnly,
    handlers: { onUpsert: (configMap) => enqueueUsersOf(configMap), onDelete: (configMap) => enqueueUsersOf(configMap) },
  });
  // The pods of Apps, to notice the ones that go: whether a pod exists and whether it has ended is all that matters.
  const pods = new ResourceWatch<PodObject>({
    ...watchOptions,
    name: 'pods',
    path: '/api/v1/pods',
    labelSelector: APP_LABEL,
    onRestart: (reason) => metrics.watchRestarted('pods', reason),
    transform: (pod) => ({ ...metadataOnly(pod), status: { phase: pod.status?.phase } }),
    handlers: { onUpsert: (pod) => janitor.podChanged(pod, false), onDelete: (pod) => janitor.podChanged(pod, true) },
  });
  // The Services of Apps: one deleted by someone else is applied again at once, not at the next resync.
  const services = new ResourceWatch<KubeObject>({
    ...watchOptions,
    name: 'services',
    path: '/api/v1/services',
    labelSelector: MANAGED_SELECTOR,
    onRestart: (reason) => metrics.watchRestarted('services', reason),
    transform: metadataOnly,
    handlers: { onDelete: (service) => enqueue(service.metadata?.namespace, owningAppName(service)) },
  });
  const watches = [apps, deployments, codeConfigMaps, pods, services];

  // RunLogs: one cache, for the management API, the counters and the janitor alike (RunLogs are large).
  const runLogs = new RunLogSource({
    api,
    logger,
    watchdogMs: watchOptions.watchdogMs,
    apps: { hasApp: (namespace, name) => apps.get(namespace, name) !== undefined },
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
    apps: { get: (namespace, name) => apps.get(namespace, name), list: () => apps.list() },
    logger,
    minIntervalMs: config.runLogs.countersIntervalSeconds * 1000,
    onWrite: () => metrics.runCounterWrites.inc(),
  });
  const janitor = new RunLogJanitor({
    api,
    runLogs,
    pods: { get: (namespace, name) => pods.get(namespace, name) },
    apps: { get: (namespace, name) => apps.get(namespace, name) },
    logger,
    now: clock,
    sweepIntervalMs: config.runLogs.sweepSeconds * 1000,
    onRunsClosed: (lost, undelivered) => {
      metrics.runsLost.inc(lost);
      metrics.webhooksUndelivered.inc(undelivered);
    },
    onRunLogDeleted: () => metrics.runLogsDeleted.inc(),
  });
  metrics.observeRunsCached(() => runLogs.runs);
  const cachesSynced = (): boolean => watches.every((watch) => watch.synced) && runLogs.synced;

  const reconcile = createReconciler({ api, config, apps: { get: (namespace, name) => apps.get(namespace, name) }, rbac, logger });
  const queue = new WorkQueue({
    workers: config.workers,
    handle: async (key) => {
      const [namespace, name] = splitKey(key);
      const stopTimer = metrics.reconcileDuration.startTimer();
      try {
        const outcome = await reconcile(namespace, name);
        metrics.reconciles.inc({ outcome });
        logger.debug({ app: key, outcome }, 'reconciled');
      } catch (error) {
        metrics.reconciles.inc({ outcome: 'error' });
        metrics.reconcileErrors.inc();
        throw error;
      } finally {
        stopTimer();
      }
    },
    onDepthChange: (depth) => metrics.queueDepth.set(depth),
    onFailure: (key, error, failures, retryInMs) => logger.warn({ app: key, err: error, failures, retryInMs }, 'reconcile failed; retrying'),
  });

  /**
   * A Deployment event matters when it shows replicas the App's status does not, or someone edited the
   * Deployment (a new generation). Not the Deployment a reconcile just created: its status is in the App's.
   */
  function deploymentEventMatters(deployment: DeploymentObject, previous: DeploymentObject | undefined): boolean {
    if (previous !== undefined && previous.metadata?.generation !== deployment.metadata?.generation) return true;
    const namespace = deployment.metadata?.namespace;
    const appName = owningAppName(deployment);
    const app = namespace === undefined || appName === undefined ? undefined : apps.get(namespace, appName);
    const shown = app?.status ?? {};
    const actual = deployment.status ?? {};
    return app === undefined || (actual.replicas ?? 0) !== (shown.replicas ?? 0) || (actual.readyReplicas ?? 0) !== (shown.readyReplicas ?? 0);
  }

  function enqueue(namespace: string | undefined, name: string | undefined): void {
    if (namespace !== undefined && name !== undefined) queue.add(objectKey(namespace, name));
  }

  function enqueueUsersOf(configMap: KubeObject): void {
    for (const app of apps.list()) {
      if (app.metadata.namespace === configMap.metadata?.namespace && app.spec?.runtime?.python?.code?.configMap?.name === configMap.metadata?.name) {
        enqueue(app.metadata.namespace, app.metadata.name);
      }
    }
  }

  function enqueueAll(): void {
    for (const app of apps.list()) enqueue(app.metadata.namespace, app.metadata.name);
  }

  let resyncTimer: NodeJS.Timeout | undefined;
  let queueStopped: Promise<void> = Promise.resolve();
  let upkeepStopped: Promise<unknown> = Promise.resolve();
  /** Counts leaderships, so that a start of the RunLog upkeep waiting for the caches knows it is still wanted. */
  let term = 0;
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
      rbac.forget();
      queue.start();
      // Whatever happened while another replica led (or nobody did): every App once.
      void apps.whenSynced().then(() => {
        if (elector.isLeader) enqueueAll();
      });
      resyncTimer = setInterval(() => {
        rbac.forget();
        enqueueAll();
      }, config.resyncSeconds * 1000);
      resyncTimer.unref();
      // The janitor judges pods gone by their absence from the cache: only a filled cache can say so.
      const thisTerm = ++term;
      void Promise.all([...watches.map((watch) => watch.whenSynced()), runLogs.ready()]).then(() => {
        if (!elector.isLeader || thisTerm !== term) return;
        janitor.start();
        counters.start();
      });
    },
    onStoppedLeading: () => {
      term += 1;
      metrics.leader.set(0);
      clearInterval(resyncTimer);
      queueStopped = queue.stop();
      upkeepStopped = Promise.all([janitor.stop(), counters.stop()]);
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
  return {
    server,
    metrics,
    apps: {
      hasApp: (projectId, appName) => apps.get(projectId, appName) !== undefined,
      get: (namespace, name) => apps.get(namespace, name),
      list: () => apps.list(),
    },
    get isLeader() {
      return elector.isLeader;
    },
    get ready() {
      return cachesSynced();
    },
    start() {
      if (started) return;
      started = true;
      for (const watch of watches) watch.start();
      runLogs.start();
      elector.start();
      logger.info({ identity: config.leaderElection.identity }, 'operator started');
    },
    async listen() {
      return server.listen({ host: config.server.host, port: config.server.port });
    },
    async stop() {
      await elector.stop();
      await queueStopped;
      await upkeepStopped;
      await Promise.all([...watches.map((watch) => watch.stop()), runLogs.stop()]);
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

function splitKey(key: string): [string, string] {
  const slash = key.indexOf('/');
  return [key.slice(0, slash), key.slice(slash + 1)];
}
