// The management API (list apps and runs, cancel a run: /v2) on the operator's HTTP server: the RunLog cache as
// its runs, the operator's App cache as its apps, cancels sent to the replica that runs the call (run-cancel.ts),
// and callers' service-account tokens judged by the API server (TokenReview, then SubjectAccessReview for `list`
// — a cancel: `cancel` — `runs.runlet.dev` in the project's namespace). Every replica serves it, leader or
// standby, from its own caches; /v2/openapi.json is served without a token.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { AppDirectory } from '../management/app-directory.ts';
import type { AppList } from '../management/app-list.ts';
import type { App } from '../crds/app-schema.ts';
import { READY } from './app-status.ts';
import { kubeAuthenticator } from '../management/kube-auth.ts';
import { managementApi } from '../management/routes.ts';
import type { RunCanceller } from '../management/run-canceller.ts';
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
}

/** A project's Apps from the operator's App cache: ready when their Ready condition is True; its message when False. */
export function appListFromCache(cache: { list(): App[] }): AppList {
  return (projectId) =>
    cache
      .list()
      .filter((app) => app.metadata.namespace === projectId)
      .map((app) => {
        const ready = app.status?.conditions?.find((condition) => condition.type === READY);
        return { name: app.metadata.name, ready: ready?.status === 'True', error: ready?.status === 'False' ? ready.message : null };
      });
}

/** Registers the API on `server`; it loads with the server (`listen()` or `ready()` report a failure). */
export function mountManagementApi(server: FastifyInstance, mount: ManagementMount): void {
  const { api, runs, apps, appList, canceller, logger } = mount;
  void server.register(managementApi, { runs, apps, appList, canceller, authenticate: kubeAuthenticator({ api, logger: logger.child({ component: 'management-auth' }) }) });
}
