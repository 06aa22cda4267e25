// The activator, composed: the holder of calls to Apps at zero replicas as a process of its own (`runlet
// activator`), so a burst at a cold App spends the activator's memory, not the operator's (leadership,
// reconciles and the management API). Every replica is alike; none needs the leader.
//
//   Apps (watch, every namespace) ─▶ the holder (holder.ts) on `config.port`: where the Endpoints of an App at
//                                    zero point (the operator writes them from the holder Service's addresses)
//   each App namespace's Secret runlet-holder-key (made there by the operator, read by that name) ─▶ that
//                                    namespace's own key, signing its hand-overs (operator/autoscaling/holder-key.ts)
//   the control key Secret (made by the operator, waited for) ─▶ checks the operator's requests to list and
//                                    cancel held calls (hold-control.ts); no namespace's key derives from it
//   held async calls ─▶ their records, Secrets in `config.heldNamespace` (hold-records.ts)
//   /healthz, /ready, /metrics and /load (the calls waiting here per App, for the leader's autoscaler) on
//   `config.adminPort`
//
// On stop it first answers /ready with 503 for `drainMs`, so its pod leaves the holder Service's addresses
// and the operator re-points the Apps at zero at the other replicas; then the holder closes: async calls in hand
// are handed over, or stay recorded for another replica to take over; sync and stream calls still waiting
// for a pod are cut, and their callers may call again.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { App } from '../crds/app-schema.ts';
import { APP_PLURAL, RUNLET_GROUP, RUNLET_VERSION } from '../crds/api-group.ts';
import { KubeApi } from '../kube/client.ts';
import { kubeConfigCredentials } from '../kube/kubeconfig.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import { ResourceWatch } from '../kube/watch.ts';
import type { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import { namespaceHolderKeys, readHolderKeyWhenMade, type SecretName } from '../operator/autoscaling/holder-key.ts';
import { HELD_LOAD_PATH } from '../operator/autoscaling/held-demand.ts';
import { buildHealthServer } from '../operator/health-server.ts';
import { kubeServiceAccountCheck } from '../run-request/auth/service-account-check.ts';
import type { HoldLimits } from './hold-bounds.ts';
import { startHolder, type Holder, type HolderOptions } from './holder.ts';
import { HeldCallMetrics } from './metrics.ts';

/** How often the activator looks for the control key while the operator has not made it yet. */
const KEY_RETRY_MS = 2000;

export interface ActivatorConfig {
  /** Where the holder listens: the port the holder Service names. */
  host: string;
  port: number;
  /** Where /healthz, /ready and /metrics are served. */
  adminHost: string;
  adminPort: number;
  /** This replica, in its claims on held async calls: its pod's name. */
  identity: string;
  /** The Secret holding the control key (the operator's requests to the holder); the operator makes it, this waits for it. */
  keySecret: SecretName;
  /**
   * Where the records of held async calls are kept: a namespace of their own, not the key's, since the right to
   * list them would reach every Secret of the namespace they are in.
   */
  heldNamespace: string;
  watchdogMs: number;
  /** How long /ready says 503 before the holder closes on stop. */
  drainMs: number;
  /** The holder's bounds (hold-bounds.ts); absent ones take their defaults. */
  limits?: Partial<HoldLimits>;
}

export interface ActivatorOptions extends Partial<Pick<HolderOptions, 'replicaAddress' | 'coldStartTimeoutMs' | 'retryDelayMs'>> {
  kubeConfig: KubeConfig;
  config: ActivatorConfig;
  /** As the sidecars authenticate callers; null: no authentication (tests). */
  auth: RunAuthenticator | null;
  logger: Logger;
  /** Node process metrics in /metrics (default true; several activators in one test process may skip them). */
  processMetrics?: boolean;
}

export interface Activator {
  /** The holder, once `listen()` started it. */
  readonly holder: Holder | undefined;
  /** The Apps it knows: its watch's cache. */
  readonly apps: { get(namespace: string, name: string): App | undefined };
  /** The App cache is filled, the holder listens, and no stop has begun. */
  readonly ready: boolean;
  readonly registry: Registry;
  /** Starts the App watch, the holder and the admin server; resolves with their addresses. */
  listen(): Promise<{ url: string; adminUrl: string }>;
  /** Not ready for `drainMs`, then closes the holder, the watch and the servers. */
  stop(): Promise<void>;
}

export function createActivator(options: ActivatorOptions): Activator {
  const { config, logger } = options;
  const api = new KubeApi(kubeConfigCredentials(options.kubeConfig));
  // As the sidecars do: a revoked API key's call is not held (nor its app woken) past a minute.
  options.auth?.checkApiKeysWith(kubeServiceAccountCheck(api));
  const registry = new Registry();
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const metrics = new HeldCallMetrics(registry);
  const apps = new ResourceWatch<App & KubeObject>({
    name: 'apps',
    api,
    logger,
    watchdogMs: config.watchdogMs,
    path: KubePath.of({ group: RUNLET_GROUP, version: RUNLET_VERSION, resource: APP_PLURAL }),
    handlers: {
      // Its held async calls go with it at once, rather than wait for a pod that will not come until the sweep.
      onDelete: (app) => {
        const { namespace, name } = app.metadata;
        if (namespace === undefined) return;
        holder?.appDeleted(namespace, name).catch((error: unknown) => logger.warn({ err: error, app: `${namespace}/${name}` }, 'activator: dropping the held async calls of a deleted app failed; the next sweep does'));
      },
    },
  });
  let holder: Holder | undefined;
  let stopping = false;
  // Ends the wait for the holder key when the activator stops before the operator made it.
  const stopped = new AbortController();
  const isReady = (): boolean => !stopping && holder !== undefined && apps.synced;
  const admin = buildHealthServer({
    registry,
    logger,
    ready: () => ({ ready: isReady(), detail: { apps: apps.size, holder: holder !== undefined } }),
    notReadyStatus: 'not ready',
  });
  // The calls waiting here per App, scraped by the operator's leader: its autoscaler counts them with the
  // replicas' load, so calls queued at an activator for a free slot ask for replicas as the sidecars' do.
  admin.get(HELD_LOAD_PATH, async () => holder?.heldReport() ?? { apps: [] });

  return {
    get holder() {
      return holder;
    },
    apps,
    get ready() {
      return isReady();
    },
    registry,
    async listen() {
      // Probes get answers while the cache fills and the key is read.
      const adminUrl = await admin.listen({ host: config.adminHost, port: config.adminPort });
      apps.start();
      // Made by the operator: this Role may only read it.
      const controlKey = await readHolderKeyWhenMade(api, config.keySecret, {
        retryMs: KEY_RETRY_MS,
        signal: stopped.signal,
        onWaiting: () => logger.info({ secret: `${config.keySecret.namespace}/${config.keySecret.name}` }, 'activator: waiting for the operator to make the control key'),
      });
      holder = await startHolder({
        api,
        apps,
        appsSynced: () => apps.whenSynced(),
        auth: options.auth,
        // Each namespace's own, read from its Secret as its calls come: the activator holds no root of them.
        holderKeys: namespaceHolderKeys(api),
        // The operator's requests to list and cancel the calls held here are signed with it (hold-control.ts).
        controlKey,
        logger,
        identity: config.identity,
        recordsNamespace: config.heldNamespace,
        watchdogMs: config.watchdogMs,
        host: config.host,
        port: config.port,
        replicaAddress: options.replicaAddress,
        coldStartTimeoutMs: options.coldStartTimeoutMs,
        retryDelayMs: options.retryDelayMs,
        limits: config.limits,
        metrics: metrics.holder,
      });
      // Async calls a previous run of this replica (or a dead one) accepted and had not handed over yet.
      const recovered = await holder.recover();
      if (recovered > 0) logger.info({ recovered }, 'activator: handing over held async calls found at start');
      return { url: holder.url, adminUrl };
    },
    async stop() {
      if (stopping) return;
      stopping = true;
      stopped.abort();
      if (holder !== undefined && config.drainMs > 0) {
        logger.info({ drainMs: config.drainMs }, 'activator: not ready, so the Apps at zero point elsewhere, before closing');
        await new Promise((resolve) => setTimeout(resolve, config.drainMs));
      }
      await holder?.close();
      await apps.stop();
      await admin.close();
      await api.close();
      logger.info('activator stopped');
    },
  };
}
