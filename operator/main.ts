// The operator, composed: watches fill caches on every replica (app-watches.ts); the elected leader alone
// reconciles Apps and looks after RunLogs (leader-duties.ts); the HTTP server serves health, metrics and the
// management API on every replica.
//
//   App / Deployment / code ConfigMap events ─▶ work queue (dedup, backoff) ─▶ reconcile ─▶ apply + status
//   RunLog events ─▶ RunLog cache ─▶ management API (every replica)
//                                 ─▶ run counters ─▶ App.status.runs (leader, rate-limited)
//   Pod / RunLog events, sweeps   ─▶ RunLog janitor ─▶ runs of gone pods failed, RunLogs past retention deleted (leader)
//   With a results store (PostgreSQL) instead: no RunLog watch nor cache. The management API and cancels read the
//   store, the counters are read from it (results-run-counts.ts), and the janitor lists RunLogs left from
//   before a page at a time
//   Ready pods' sidecars (GET /load, leader) ─▶ App loads ─▶ scaler, metrics, `onAppLoad`
//   a cancel (management API)     ─▶ the run's pod (RunLog record, Pod cache) ─▶ its sidecar's admin port
//   With a holder (every replica): calls to Apps at zero, signed with the key of its Secret, which the leader
//   copies into app namespaces; the holder Service's Endpoints changed ─▶ reconcile the Apps at zero
import { isDeepStrictEqual } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { APP_LABEL } from '../crds/api-group.ts';
import type { App } from '../crds/app-schema.ts';
import { KubeApi } from '../kube/client.ts';
import { EventRecorder } from '../kube/event-recorder.ts';
import { kubeConfigCredentials } from '../kube/kubeconfig.ts';
import { LeaderElector } from '../kube/leader.ts';
import { LeaderOnlyApi } from '../kube/leader-only-api.ts';
import { objectKey } from '../kube/watch.ts';
import type { RunSource } from '../management/run-source.ts';
import { RunLogSource } from '../management/runlog-source.ts';
import { watchAppObjects } from './app-watches.ts';
import { ContainerRestarts } from './container-restarts.ts';
import { AppLoads, type AppLoad } from './autoscaling/app-load.ts';
import { scalesToZero, type HolderAddress } from './autoscaling/endpoints.ts';
import { createEndpointsSwitch, servingChanged } from './autoscaling/endpoints-switch.ts';
import { DEFAULT_HELD_CALL_TTL_MS, startHolder, type Holder, type HolderOptions } from '../activator/holder.ts';
import { HeldRecords } from '../activator/hold-records.ts';
import { cancelHeldCall, heldCallCancelled, settleCancelledHeldCall, type HeldRunWriter } from '../activator/hold-cancel.ts';
import { WebhookDeliverer } from '../sidecar/webhook/deliver.ts';
import { HeldRunsLog } from './held-runs-log.ts';
import { watchHolderEndpoints } from './autoscaling/holder-endpoints.ts';
import { ensureHolderKey, namespaceHolderKeys, retireRootHolderKey } from './autoscaling/holder-key.ts';
import { holderAddressesOf } from './autoscaling/endpoints-switch.ts';
import { HeldCalls, withHeldRuns, type HeldCallsOptions } from './held-calls.ts';
import { AUTOSCALER_FIELD_MANAGER, OPERATOR_FIELD_MANAGER as FIELD_MANAGER } from './autoscaling/replicas-owner.ts';
import { createLoadScraper } from './autoscaling/load-scraper.ts';
import { ActivatorLoads } from './autoscaling/activator-loads.ts';
import type { ReplicaAddress } from './replica-address.ts';
import { Scaler } from './autoscaling/scaler.ts';
import { kubeServiceAccountCheck } from '../run-request/auth/service-account-check.ts';
import { namespaceQuotaLimits, type OperatorConfig } from './config.ts';
import { LeaderDuties } from './leader-duties.ts';
import { appListFromCache, mountManagementApi } from './management.ts';
import { OperatorMetrics } from './metrics.ts';
import type { PodObject } from './runlog-verdict.ts';
import { createReconcileQueue } from './reconcile-queue.ts';
import { createReconciler } from './reconcile.ts';
import { RunCounters } from './run-counters.ts';
import { ResultsRunCounts } from './results-run-counts.ts';
import { RunLogRunCounts } from './runlog-run-counts.ts';
import { RunLogJanitor, cachedRunLogs, pagedRunLogs } from './runlog-janitor.ts';
import { clusterRunCanceller, type ClusterCancellerOptions } from './run-cancel.ts';
import { AdminKeys } from './admin-keys.ts';
import { ResultsUpkeep } from './results-upkeep.ts';
import { ReplicaPresence } from './replica-presence.ts';
import { MAX_BATCH_BYTES } from '../results/batch-limits.ts';
import { ByteBudget } from '../results/byte-budget.ts';
import { resultsCollector } from '../results/collector.ts';
import type { ResultsState } from '../results/open.ts';
import type { PgResults } from '../results/pg-results.ts';
import { NamespaceQuotas } from '../results/namespace-quotas.ts';
import type { NamespaceUsageReader } from '../results/namespace-usage.ts';
import { ResultsCallers } from './results-callers.ts';
import { ServiceAccountTokenCheck } from './service-account-token-check.ts';
import { RESULTS_TOKEN_AUDIENCE } from '../results/results-token.ts';
import { ResultsUsageReader } from './results-usage.ts';
import { childName } from './render/names.ts';
import { buildHealthServer, refuseUnroutedBodies } from './health-server.ts';
import { SidecarRbacApplier } from './sidecar-rbac.ts';
import { SidecarMigration } from './sidecar-migration.ts';
import { SidecarMode } from './sidecar-mode.ts';

/** Who reports the Events on Apps (`kubectl describe app` shows it under "From"). */
const EVENT_SOURCE = 'runlet-operator';
/** RunLogs per page when the janitor lists them without a cache (with a results store): one may be about 90 KB. */
const RUNLOG_PAGE_SIZE = 20;

/** How soon the holder key is tried again when it could not be made (the activators wait for it). */
const KEY_RETRY_MS = 5000;

/** How long a stopping operator waits for the webhooks of cancelled held calls still being delivered. */
const HELD_WEBHOOK_DRAIN_MS = 10_000;

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
  /** An App's load changed (`appKey` is `namespace/name`): for the scaler. */
  onAppLoad?(appKey: string, load: AppLoad): void;
  /**
   * Where the leader scrapes a replica's load (its sidecar's admin port). Default: the pod's IP, port 8001;
   * the test kubelet maps its pods' addresses to loopback ports.
   */
  loadAddress?(pod: PodObject): ReplicaAddress;
  /**
   * Where the leader asks an activator for the calls waiting there (`holder: 'external'`). Default: its address
   * in the holder Service's Endpoints, port `config.holder.activatorAdminPort`; the tests' activator listens elsewhere.
   */
  activatorLoadAddress?(activator: HolderAddress): ReplicaAddress;
  /**
   * Holds calls to Apps at zero replicas, on `config.holder` (activator/holder.ts), signing hand-overs with the
   * key of the Secret `config.holder.keySecretName` (made when missing); absent: no holder, and Apps with
   * `minReplicas: 0` are kept at one replica. `runlet operator` passes it unless `config.holder.enabled` is false.
   * `'external'`: `runlet activator` pods hold those calls (activator/main.ts), listed by the same Service; this
   * operator points the Apps at zero at them and copies the key into app namespaces, but holds no call itself.
   */
  holder?: OperatorHolderOptions | 'external';
  /** Where a pod's sidecar admin port is reached, for cancels. Default: its pod IP, port 8001 (the test kubelet remaps). */
  replicaAdminAddress?: ClusterCancellerOptions['adminAddress'];
  /** Where a holder's address (its Service's Endpoints) is dialled, to list and cancel held calls. Default: as listed (the test kubelet remaps). */
  holderControlAddress?: HeldCallsOptions['address'];
  /**
   * The results store (results/open.ts, on RUNLET_RESULTS_DSN): the management API answers from it, the collector
   * (/v1/results/..., on its own port: config.results.collectorPort) takes the App pods' batches into it, and the leader closes lost runs and applies retention
   * there (results-upkeep.ts); App.status.runs comes from its counters. No RunLog is watched nor cached: those
   * left from before are looked after by pages of a list. Absent: runs are kept in RunLogs, as before the
   * results store. `state`: whether it has opened yet (results/open.ts's openResultsWhenReachable); until it
   * first has, the operator is not ready and /ready says why (a later outage leaves it ready: its reads answer
   * 503 and the pods keep their runs meanwhile). `usage`: what each namespace keeps there, for the collector's
   * per-namespace quotas (config.results.max…PerNamespace) and /metrics; absent, neither.
   */
  results?: { store: PgResults; state?: () => ResultsState; usage?: NamespaceUsageReader };
}

/** What the holder needs beyond the operator's own: how callers are authenticated (as the sidecars do), how replicas are reached. */
export type OperatorHolderOptions = Pick<HolderOptions, 'auth' | 'replicaAddress' | 'coldStartTimeoutMs' | 'retryDelayMs'>;

/** The Apps the operator knows, as the management API asks: without I/O (it is the watch cache). */
export interface AppCache {
  hasApp(projectId: string, appName: string): boolean;
  get(namespace: string, name: string): App | undefined;
  list(): App[];
}

export interface Operator {
  /** Health, readiness and the management API (/v2); register more routes before `listen()`. */
  readonly server: FastifyInstance;
  readonly metrics: OperatorMetrics;
  readonly apps: AppCache;
  /** The Apps' load, scraped from their ready replicas' sidecars by the leader. */
  readonly loads: AppLoads;
  readonly isLeader: boolean;
  /**
   * Every watch has filled its cache (the RunLog cache of the management API too, without a results store), and
   * the results store has opened once.
   */
  readonly ready: boolean;
  /** The holder, once `listen()` started it (when the options ask for one). */
  readonly holder: Holder | undefined;
  /** Starts the watches and the campaign for leadership; returns at once. */
  start(): void;
  /**
   * Listens on `config.server` (its metrics on `config.server.metricsPort`, the holder on `config.holder`, the
   * collector on `config.results.collectorPort` with a results store); resolves with the server's address.
   */
  listen(): Promise<string>;
  /** The results collector's address (`http://host:port`), once `listen()` started it; undefined without a results store. */
  readonly collectorUrl: string | undefined;
  /** The address of /metrics (`http://host:port`, config.server.metricsPort), once `listen()` started it. */
  readonly metricsUrl: string | undefined;
  /** Releases leadership (work in hand can write no more), waits for the reconciles in hand, stops watching and closes the server. */
  stop(): Promise<void>;
}

export function createOperator(options: OperatorOptions): Operator {
  const { config } = options;
  const logger = options.logger ?? pino({ name: 'runlet-operator', level: config.logLevel }, pino.destination({ dest: 2, sync: false }));
  const credentials = kubeConfigCredentials(options.kubeConfig);
  const apiOptions = { fieldManager: FIELD_MANAGER, requestTimeoutMs: config.requestTimeoutSeconds * 1000 };
  const api = new KubeApi(credentials, apiOptions);
  // The leader's duties (reconciles, RunLog upkeep, scaling) write through these: once the lease is lost, work
  // still in hand cannot write.
  const leaderApi = new LeaderOnlyApi(credentials, apiOptions, () => elector.isLeader);
  // The autoscaler's writes carry a field manager of their own: it, not the operator, owns spec.replicas.
  const autoscalerApi = new LeaderOnlyApi(credentials, { ...apiOptions, fieldManager: AUTOSCALER_FIELD_MANAGER }, () => elector.isLeader);
  const metrics = new OperatorMetrics({ processMetrics: options.processMetrics });
  const events = new EventRecorder({ api, component: EVENT_SOURCE, instance: config.leaderElection.identity, logger });
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
      loads.appDeleted(key);
      const [namespace, name] = key.split('/') as [string, string];
      holder?.appDeleted(namespace, name).catch((error: unknown) => logger.warn({ err: error, app: key }, 'holder: dropping the held async calls of a deleted app failed; the next sweep does'));
    },
    podChanged: (pod, gone, previous) => {
      janitor.podChanged(pod, gone);
      loads.podChanged(pod);
      if (!gone) restarts.podChanged(pod, previous);
      // An image that cannot be pulled (or can again) shows in the App's status: its Deployment says nothing of it.
      const pullChanged = gone ? pod.imagePull !== undefined : !isDeepStrictEqual(pod.imagePull, previous?.imagePull);
      if (pullChanged) {
        reconcileSoon(pod.metadata?.namespace, pod.metadata?.labels?.[APP_LABEL]);
      }
      // The Endpoints of an App that scales to zero follow its pods as the endpoints controller's would: a
      // reconcile (serialised per App by the queue) writes them from the pods then.
      const namespace = pod.metadata?.namespace;
      const appName = pod.metadata?.labels?.[APP_LABEL];
      if (namespace === undefined || appName === undefined || !servingChanged(pod, gone, previous)) return;
      const app = apps.get(namespace, appName);
      if (app !== undefined && scalesToZero(app)) reconcileSoon(namespace, appName);
    },
    sidecarRbacChanged: (kind, object, gone) => {
      // Applied again through a reconcile of one of the namespace's Apps: on the leader, with its retries.
      const namespace = object.metadata?.namespace;
      if (namespace !== undefined && rbac.needsRepair(kind, object, gone)) reconcileSoon(namespace, liveAppsIn(namespace)[0]?.metadata.name);
    },
    // Its Apps waited for it (their status says so): reconciled now, not at the end of their backoff.
    namespaceEnrolled: (namespace) => {
      for (const app of liveAppsIn(namespace)) reconcileSoon(namespace, app.metadata.name);
    },
  });
  const { apps, pods } = watches;
  const restarts = new ContainerRestarts({ api: leaderApi, app: (namespace, name) => apps.get(namespace, name), isLeader: () => elector.isLeader, events, logger });
  const liveAppsIn = (namespace: string): App[] => apps.list().filter((app) => app.metadata.namespace === namespace && app.metadata.deletionTimestamp === undefined);
  const holderService = { namespace: config.holder.serviceNamespace, name: config.holder.serviceName };
  const controlKeySecret = { namespace: config.holder.serviceNamespace, name: config.holder.keySecretName };
  // Read (or made) once per process; a failure is retried by whoever asks next (the holder's start, a cancel).
  let controlKeyRead: Promise<Uint8Array> | undefined;
  const controlKey = (): Promise<Uint8Array> => {
    controlKeyRead ??= ensureHolderKey(api, controlKeySecret).catch((error: unknown) => {
      controlKeyRead = undefined;
      throw error;
    });
    return controlKeyRead;
  };
  // Each App namespace's own hand-over key, read from its Secret (the leader makes them: sidecar-rbac.ts).
  const namespaceKeys = namespaceHolderKeys(api);
  // The held async calls' records, for a cancel through the management API: read and deleted only (the holder,
  // here or in an activator, writes them), so neither the claim's identity nor the expiry is this replica's.
  // They are in a namespace of their own, apart from the key and the rest of this namespace's Secrets.
  const heldRecords = async (): Promise<HeldRecords> =>
    new HeldRecords({
      api,
      namespace: config.holder.heldCallsNamespace,
      identity: config.leaderElection.identity,
      staleClaimMs: Number.POSITIVE_INFINITY,
      ttlMs: DEFAULT_HELD_CALL_TTL_MS,
      keys: namespaceKeys,
    });
  const makeKeyForActivators = (): void => {
    controlKey().catch((error: unknown) => {
      if (stopping) return;
      logger.warn({ err: error, retryInMs: KEY_RETRY_MS }, 'the holder key could not be made: the activators wait for it');
      setTimeout(makeKeyForActivators, KEY_RETRY_MS).unref();
    });
  };
  const rbac = new SidecarRbacApplier({
    api: leaderApi,
    appsIn: liveAppsIn,
    logger,
    adminKeys: new AdminKeys({ api: leaderApi }),
    // The namespaces' keys sign hand-overs (the holder). The sidecars' batches of run records need none: a pod sends
    // them with its own projected token (results-callers.ts).
    holderKeys: options.holder !== undefined,
  });
  const appCache: AppCache = {
    hasApp: (namespace, name) => apps.get(namespace, name) !== undefined,
    get: (namespace, name) => apps.get(namespace, name),
    list: () => apps.list(),
  };

  // Without a results store, RunLogs hold the runs: one cache, for the management API, the counters and the
  // janitor alike (RunLogs are large). With one, none is watched: run history is PostgreSQL's.
  const runLogs =
    options.results === undefined
      ? new RunLogSource({
          api,
          logger,
          watchdogMs,
          apps: appCache,
          onRestart: (resource, reason) => metrics.watchRestarted(resource, reason),
          onRunLog: {
            onUpsert: (runLog) => {
              runLogCounts?.runLogChanged(runLog);
              janitor.runLogChanged(runLog);
            },
            onDelete: (runLog) => runLogCounts?.runLogDeleted(runLog),
          },
        })
      : undefined;
  // Where runs are listed, got and found for a cancel: one of the two is set.
  const runs: RunSource = runLogs ?? options.results!.store;
  const loads = new AppLoads({ pod: (namespace, name) => pods.get(namespace, name), onChange: options.onAppLoad });
  metrics.observeAppLoads(() => loads.list());
  // The leader's alone, as the scaler it feeds: the replicas are asked once per tick, not once per operator replica.
  const scraper = createLoadScraper({
    pods,
    loads,
    address: options.loadAddress,
    intervalMs: config.autoscaling.tickMilliseconds,
    logger,
    onScrape: (outcome) => metrics.loadScrapes.inc({ outcome }),
  });
  const changed = (appKey: string): void => counters.changed(appKey);
  const countsSource =
    options.results === undefined
      ? new RunLogRunCounts(changed)
      : new ResultsRunCounts({ store: options.results.store, intervalMs: config.runLogs.countersIntervalSeconds * 1000, logger, changed });
  const runLogCounts = countsSource instanceof RunLogRunCounts ? countsSource : undefined;
  // Calls waiting at the activators, for the scaler (the leader's, as the scraper's): `runlet activator` pods only.
  const activatorLoads =
    options.holder === 'external'
      ? new ActivatorLoads({
          address: options.activatorLoadAddress ?? ((activator) => ({ host: activator.ip, port: config.holder.activatorAdminPort })),
          intervalMs: config.autoscaling.tickMilliseconds,
          logger,
          onScrape: (outcome) => metrics.activatorScrapes.inc({ outcome }),
        })
      : undefined;
  const counters = new RunCounters({
    api: leaderApi,
    source: countsSource,
    apps: appCache,
    logger,
    minIntervalMs: config.runLogs.countersIntervalSeconds * 1000,
    onWrite: () => metrics.runCounterWrites.inc(),
  });
  const janitor = new RunLogJanitor({
    api: leaderApi,
    runLogs: runLogs === undefined ? pagedRunLogs(api, RUNLOG_PAGE_SIZE) : cachedRunLogs(runLogs),
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
  metrics.observeRunsCached(() => runLogs?.runs ?? 0);
  const cachesSynced = (): boolean => watches.all.every((watch) => watch.synced) && (runLogs?.synced ?? true);
  let resultsOpened = options.results?.state === undefined;
  const resultsState = (): ResultsState | undefined => options.results?.state?.();
  const isReady = (): boolean => {
    resultsOpened ||= resultsState()?.open === true;
    return cachesSynced() && resultsOpened;
  };

  // Without a holder of its own the operator reads no holder addresses (nor may it, under the chart's RBAC).
  const switchAppEndpoints = createEndpointsSwitch(leaderApi, options.holder === undefined ? null : holderService);
  // Apps at zero point at the holder's addresses: when those change, they follow at once (the leader's queue).
  const holderEndpoints =
    options.holder === undefined
      ? undefined
      : watchHolderEndpoints({
          api,
          service: holderService,
          logger,
          watchdogMs,
          onChange: (addresses) => {
            activatorLoads?.setActivators(addresses);
            logger.info({ addresses: addresses.map((address) => `${address.ip}:${address.port}`) }, 'the holder’s addresses changed: re-pointing the Apps at zero');
            for (const app of apps.list()) {
              const namespace = app.metadata.namespace;
              if (namespace === undefined || !scalesToZero(app)) continue;
              if ((watches.deployments.get(namespace, childName(app))?.status?.readyReplicas ?? 0) === 0) reconcileSoon(namespace, app.metadata.name);
            }
          },
        });
  // Rendering needs the sidecar mode, which start() decides from the server's and the nodes' versions
  // (sidecar-mode.ts); the campaign for leadership begins only once it is known, so no reconcile ever waits on
  // it. When it changes, every App is reconciled, and they move to the new mode one at a time
  // (sidecar-migration.ts).
  const sidecarMode = new SidecarMode({
    setting: config.nativeSidecars,
    api,
    logger,
    watchdogMs,
    onWatchRestart: (reason) => metrics.watchRestarted('nodes', reason),
    onChange: () => {
      if (elector.isLeader) for (const app of apps.list()) reconcileSoon(app.metadata.namespace, app.metadata.name);
    },
  });
  const sidecars = new SidecarMigration({ native: () => sidecarMode.native, reconcileSoon: (namespace, name) => reconcileSoon(namespace, name) });
  const reconciler = createReconciler({
    api: leaderApi,
    autoscalerApi,
    // Pods send their records to the collector only where there is a results store to take them.
    config: { ...config, resultsCollectorUrl: options.results === undefined ? null : config.results.collectorUrl },
    sidecars,
    apps: appCache,
    deployments: watches.deployments,
    rbac,
    events,
    logger,
    pods,
    switchEndpoints: switchAppEndpoints,
  });
  const queue = createReconcileQueue({ workers: config.workers, reconcile: reconciler, metrics, logger });
  function reconcileSoon(namespace: string | undefined, name: string | undefined): void {
    if (namespace !== undefined && name !== undefined) queue.add(objectKey(namespace, name));
  }

  const scaler = new Scaler({
    api: autoscalerApi,
    apps: appCache,
    deployments: watches.deployments,
    loads,
    // Calls waiting at this replica's holder, or at the activators (scraped); calls held by other operator
    // replicas' holders wake the app themselves (0 → 1).
    held: (namespace, app) => (holder?.held(namespace, app) ?? 0) + (activatorLoads?.held(namespace, app) ?? 0),
    scalesToZero: options.holder !== undefined,
    stableWindowMs: config.autoscaling.stableWindowSeconds * 1000,
    tickMs: config.autoscaling.tickMilliseconds,
    events,
    metrics: metrics.scaling,
    logger,
  });
  const resultsUpkeep =
    options.results === undefined
      ? undefined
      : new ResultsUpkeep({
          store: options.results.store,
          config: config.results,
          podExists: (namespace, name) => pods.get(namespace, name) !== undefined,
          apps: () => apps.list(),
          logger,
          now: options.clock,
          onRunsClosed: (lost, undelivered) => {
            metrics.runsLost.inc(lost);
            metrics.webhooksUndelivered.inc(undelivered);
          },
        });
  const duties = new LeaderDuties({
    queue,
    rbac,
    janitor,
    counters,
    scaler,
    results: resultsUpkeep,
    reconcileAll: () => {
      for (const app of apps.list()) reconcileSoon(app.metadata.namespace, app.metadata.name);
    },
    appsSynced: () => apps.whenSynced(),
    allSynced: () => Promise.all([...watches.all.map((watch) => watch.whenSynced()), runLogs?.ready()]),
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
      scraper.start();
      activatorLoads?.start();
      duties.begin();
    },
    onStoppedLeading: () => {
      metrics.leader.set(0);
      void scraper.stop();
      void activatorLoads?.stop();
      duties.end();
    },
  });

  // Ready to serve: the caches are filled (leaders and standbys alike, so a standby can take over at once).
  const readiness = {
    logger,
    ready: () => ({
      ready: isReady(),
      detail: { leader: elector.isLeader, apps: apps.size, reconcileQueue: queue.depth, resultsStore: resultsState() },
    }),
    notReadyStatus: 'starting',
  };
  const server = buildHealthServer(readiness);
  // Metrics name every namespace's Apps: on a port of their own, which the chart's NetworkPolicy closes to tenants.
  const metricsServer = buildHealthServer({ ...readiness, registry: metrics.registry });
  // The runs of calls cancelled while held at zero, which no replica saw: recorded where the management API reads
  // runs, at once and again once the webhook is settled, their webhooks delivered from here. In the results
  // store this replica is their `replica`: marked present there (replica-presence.ts) before each is written, so
  // the leader's sweep leaves their pending webhooks to it while it runs, and closes them once it is gone.
  const presence =
    options.results === undefined
      ? undefined
      : new ReplicaPresence({ store: options.results.store, identity: config.leaderElection.identity, intervalSeconds: config.results.presenceSeconds, logger });
  const heldRunWriter: HeldRunWriter =
    presence === undefined
      ? new HeldRunsLog({ api, apps: appCache, logger })
      : {
          write: async (run) => {
            await presence.markNow();
            await options.results!.store.writeBatch([run]);
          },
        };
  // The calls the holders hold, listed and cancelled through their holder port (activator/hold-control.ts).
  const heldCalls =
    holderEndpoints === undefined
      ? undefined
      : new HeldCalls({
          holders: () => holderAddressesOf(holderEndpoints.get(holderService.namespace, holderService.name)),
          controlKey,
          apps: appCache,
          address: options.holderControlAddress,
          logger,
        });
  const managedRuns = heldCalls === undefined ? runs : withHeldRuns(runs, heldCalls);
  const heldWebhooks = new WebhookDeliverer({ allowCidrs: config.webhookAllowCidrs });
  const heldDeliveries = new Set<Promise<void>>();
  const adminKeys = new AdminKeys({ api });
  const canceller = clusterRunCanceller({
    runs,
    pods,
    signingKey: (namespace) => adminKeys.signingKey(namespace),
    adminAddress: options.replicaAdminAddress,
    cancelHeld: heldCalls === undefined ? undefined : async (projectId, appName, runId) => {
      // An async call's record, else a sync or stream call waiting at a holder.
      const record = await cancelHeldCall(await heldRecords(), projectId, appName, runId);
      // Its holder lists it no longer (it would until its hand-over finds the record gone).
      if (record !== null) await heldCalls.forget(projectId, appName, runId);
      const held = record ?? (await heldCalls.cancel(projectId, appName, runId));
      if (held === null) return null;
      const cancelled = heldCallCancelled(held, 'mode' in held ? held.mode : 'async', projectId, appName, config.leaderElection.identity, new Date());
      const { delivered } = await settleCancelledHeldCall(cancelled, { writer: heldRunWriter, deliverer: heldWebhooks, logger });
      heldDeliveries.add(delivered);
      void delivered.finally(() => heldDeliveries.delete(delivered));
      logger.info({ app: `${projectId}/${appName}`, runId, webhook: cancelled.run.webhook?.endpoint ?? null }, 'holder: a held call was cancelled before any replica took it: recorded cancelled, its webhook sent');
      return { record: cancelled.run, stoppedFor: 'cancel_requested' };
    },
    logger,
  });
  mountManagementApi(server, { api, runs: managedRuns, apps: appCache, appList: appListFromCache(appCache), canceller, logger, maxKeyLifetimeMs: config.apiKeys.maxExpiryDays * 86_400_000 });
  // Each namespace's share of the results store: bounded at the collector, and shown in /metrics.
  const usage = options.results?.usage;
  const quotas =
    usage === undefined
      ? undefined
      : new NamespaceQuotas({ ...namespaceQuotaLimits(config.results), usage, logger, onRefused: (namespace, quota, count) => metrics.resultsQuotaRefusals.inc({ namespace, quota }, count) });
  const usageReader = usage === undefined ? undefined : new ResultsUsageReader({ usage, intervalMs: config.results.usageMetricsSeconds * 1000, logger });
  if (quotas !== undefined && usageReader !== undefined) metrics.observeResultsUsage(() => usageReader.last, (namespace) => quotas.limitsOf(namespace));
  // The collector, on a port of its own: App pods send bodies there and nowhere else of the operator's, each with
  // its own projected token, reviewed and checked against the pod cache before a byte of the body is read.
  const collector = options.results === undefined ? undefined : buildCollectorServer(options.results.store, config, logger, new ResultsCallers({
    api,
    pod: (namespace, name) => pods.get(namespace, name),
    logger,
    tokenCheck: new ServiceAccountTokenCheck({ api, audience: RESULTS_TOKEN_AUDIENCE, logger, onOutcome: (outcome) => metrics.resultsTokenChecks.inc({ outcome }) }),
  }), quotas, metrics);
  let collectorUrl: string | undefined;
  let metricsUrl: string | undefined;

  let started = false;
  let stopping = false;
  let holder: Holder | undefined;
  return {
    server,
    metrics,
    apps: appCache,
    loads,
    get isLeader() {
      return elector.isLeader;
    },
    get ready() {
      return isReady();
    },
    get holder() {
      return holder;
    },
    get collectorUrl() {
      return collectorUrl;
    },
    get metricsUrl() {
      return metricsUrl;
    },
    start() {
      if (started) return;
      started = true;
      for (const watch of watches.all) watch.start();
      holderEndpoints?.start();
      runLogs?.start();
      // The activators only read the key (their Role cannot create a Secret here): it is made now, not at the
      // first App that needs it, and tried again until it is.
      if (options.holder === 'external') makeKeyForActivators();
      if (options.holder !== undefined) {
        retireRootHolderKey(api, config.holder.serviceNamespace, controlKeySecret).then(
          (retired) => {
            if (retired) logger.info({ secret: `${config.holder.serviceNamespace}/runlet-holder-key` }, 'deleted the root holder key of an earlier version: each App namespace keeps its own key, which derives from nothing any more');
          },
          (error: unknown) => logger.warn({ err: error }, 'the root holder key of an earlier version could not be deleted; the next start tries again'),
        );
      }
      presence?.start();
      usageReader?.start();
      sidecarMode.start();
      void sidecarMode.whenDecided().then(() => {
        if (!stopping) elector.start();
      });
      logger.info({ identity: config.leaderElection.identity }, 'operator started');
    },
    async listen() {
      const url = await server.listen({ host: config.server.host, port: config.server.port });
      metricsUrl ??= await metricsServer.listen({ host: config.server.host, port: config.server.metricsPort });
      if (collector !== undefined && collectorUrl === undefined) collectorUrl = await collector.listen({ host: config.server.host, port: config.results.collectorPort });
      if (options.holder !== undefined && options.holder !== 'external' && holder === undefined) {
        // As the sidecars do: a revoked API key's call is not held (nor its app woken) past a minute.
        options.holder.auth?.checkApiKeysWith(kubeServiceAccountCheck(api));
        holder = await startHolder({
          ...options.holder,
          holderKeys: namespaceKeys,
          controlKey: await controlKey(),
          api,
          apps: appCache,
          appsSynced: () => apps.whenSynced(),
          logger,
          identity: config.leaderElection.identity,
          recordsNamespace: config.holder.heldCallsNamespace,
          watchdogMs,
          host: config.holder.host,
          port: config.holder.port,
          limits: { callsPerApp: config.holder.maxHeldCallsPerApp, calls: config.holder.maxHeldCalls, bodyBytes: config.holder.maxHeldBodyMiB * 1024 * 1024 },
          metrics: metrics.held.holder,
        });
        // Async calls a previous run of this replica (or a dead one) accepted and had not handed over yet. Not
        // awaited: the sweep waits for the App cache, which the holder's port must not wait for.
        holder.recover().then(
          (recovered) => {
            if (recovered > 0) logger.info({ recovered }, 'holder: handing over held async calls found at start');
          },
          (error: unknown) => logger.warn({ err: error }, 'holder: sweeping the held async calls at start failed; the next sweep tries again'),
        );
      }
      return url;
    },
    async stop() {
      stopping = true;
      await sidecarMode.stop();
      await holder?.close();
      // The webhooks of cancelled held calls finish (three attempts, well under a minute) or are recorded failed.
      await Promise.race([Promise.all(heldDeliveries), new Promise((resolve) => setTimeout(resolve, HELD_WEBHOOK_DRAIN_MS).unref())]);
      await heldWebhooks.close();
      await Promise.all(heldDeliveries);
      // Every delivery's outcome is recorded: nothing of this replica's is left pending to wait for.
      await presence?.stop();
      await usageReader?.stop();
      await elector.stop();
      await duties.ended();
      await scraper.stop();
      await activatorLoads?.stop();
      await events.flushed();
      await Promise.all([...watches.all.map((watch) => watch.stop()), holderEndpoints?.stop(), runLogs?.stop()]);
      await server.close();
      await metricsServer.close();
      await collector?.close();
      await Promise.all([api.close(), leaderApi.close(), autoscalerApi.close()]);
      logger.info('operator stopped');
    },
  };
}

/** How long a batch may take to arrive whole, at most; a body that stops arriving is cut sooner (results/body-intake.ts). */
const COLLECTOR_REQUEST_TIMEOUT_MS = 30_000;

/** The results collector's own server: only the collector's route, its bodies bounded across requests. */
function buildCollectorServer(store: PgResults, config: OperatorConfig, logger: Logger, callers: ResultsCallers, quotas: NamespaceQuotas | undefined, metrics: OperatorMetrics): FastifyInstance {
  const server = Fastify({
    loggerInstance: logger.child({ component: 'results-collector' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    requestTimeout: COLLECTOR_REQUEST_TIMEOUT_MS,
  });
  refuseUnroutedBodies(server);
  void server.register(resultsCollector, {
    store,
    identify: callers.identify,
    budget: new ByteBudget(config.results.collectorMaxInFlightMiB * 1024 * 1024, MAX_BATCH_BYTES),
    quotas,
    onRefused: ({ reason, namespace }) => metrics.resultsBatchRefusals.inc({ reason, namespace: namespace ?? '' }),
  });
  return server;
}

/** Creates and starts an operator (and its HTTP server, unless `listen: false`). */
export async function startOperator(options: OperatorOptions & { listen?: boolean }): Promise<Operator & { url: string | undefined }> {
  const operator = createOperator(options);
  operator.start();
  const url = options.listen === false ? undefined : await operator.listen();
  return Object.assign(operator, { url });
}
