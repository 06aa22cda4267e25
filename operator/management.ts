// The management API (list apps and runs, cancel a run: /v2) on the operator's HTTP server: the RunLog cache as
// its runs, the operator's App cache as its apps, cancels sent to the replica that runs the call (run-cancel.ts),
// API keys as ServiceAccounts (api-keys.ts), and callers' service-account tokens judged by the API server
// (TokenReview, then SubjectAccessReview for `list` — a cancel: `cancel` — `runs.runlet.dev`, or a verb on
// `apikeys.runlet.dev`, in the project's namespace). Every replica serves it, leader or standby, from its own
// caches; /v2/openapi.json and the dashboard (at /) are served without a token.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { AppDirectory } from '../management/app-directory.ts';
import type { AppList } from '../management/app-list.ts';
import type { App } from '../crds/app-schema.ts';
import { READY } from './app-status.ts';
import { kubeAuthenticator } from '../management/kube-auth.ts';
import { managementApi } from '../management/routes.ts';
import type { RunCanceller } from '../management/run-canceller.ts';
import { dashboard } from '../dashboard/routes.ts';
import { DEFAULT_AUDIENCE } from '../run-request/auth/config.ts';
import { KubeApiKeys } from './api-keys.ts';
import type { RunSource } from '../management/run-source.ts';
import type { KubeApi } from '../kube/client.ts';

export interface ManagementMount {
  /** The operator's client: it reviews tokens with the operator's credentials. */
  api: KubeApi;
  runs: RunSource;
  apps: AppDirectory;
  appList: AppList;
  /** Where cancels go: the replicas' admin ports (run-cancel.ts). */
  canceller: RunCanceller;
  logger: Logger;
  /** The longest lifetime of an API key (`apiKeys.maxExpiryDays`); default a year. */
  maxKeyLifetimeMs?: number;
}

/** A project's Apps from the operator's App cache: ready when their Ready condition is True; its message when False. */
export function appListFromCache(cache: { list(): App[] }): AppList {
  return (projectId) =>
    cache
      .list()
      .filter((app) => app.metadata.namespace === projectId)
      .map((app) => {
        const ready = app.status?.conditions?.find((condition) => condition.type === READY);
        const { minReplicas, maxReplicas, replicaConcurrency } = app.spec.scaling;
        return {
          name: app.metadata.name,
          ready: ready?.status === 'True',
          error: ready?.status === 'False' ? ready.message : null,
          replicas: { ready: app.status?.readyReplicas ?? 0, desired: app.status?.desiredReplicas ?? app.status?.replicas ?? minReplicas },
          scaling: { minReplicas, maxReplicas, replicaConcurrency },
        };
      });
}

/** Registers the API on `server`; it loads with the server (`listen()` or `ready()` report a failure). */
export function mountManagementApi(server: FastifyInstance, mount: ManagementMount): void {
  const { api, runs, apps, appList, canceller, logger, maxKeyLifetimeMs } = mount;
  // The keys are the sidecars' callers: their tokens carry the audience the sidecars accept (rendered as the
  // default), and only it; this API reviews them for it.
  const keyAudiences = [DEFAULT_AUDIENCE];
  const keys = new KubeApiKeys({ api, runAudiences: keyAudiences });
  const authenticate = kubeAuthenticator({ api, keyAudiences, logger: logger.child({ component: 'management-auth' }) });
  void server.register(managementApi, { runs, apps, appList, canceller, keys, authenticate, maxKeyLifetimeMs });
  // The dashboard asks for a project and a token, and calls the API above with it; it keeps nothing server-side.
  void server.register(dashboard, { projectId: null, tokenRequired: true, keysUnavailable: null });
}
