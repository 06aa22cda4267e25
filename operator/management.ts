// The management API (list runs, /v2) on the operator's HTTP server: the RunLog cache as its runs, the
// operator's App cache as its apps, and callers' service-account tokens judged by the API server (TokenReview,
// then SubjectAccessReview for `list runs.runlet.dev` in the project's namespace). Every replica serves it,
// leader or standby, from its own caches; /v2/openapi.json is served without a token.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { AppDirectory } from '../management/app-directory.ts';
import { kubeAuthenticator } from '../management/kube-auth.ts';
import { managementApi } from '../management/routes.ts';
import type { RunSource } from '../management/run-source.ts';
import type { KubeApi } from '../kube/client.ts';

export interface ManagementMount {
  /** The operator's client: it reviews tokens with the operator's credentials. */
  api: KubeApi;
  runs: RunSource;
  apps: AppDirectory;
  logger: Logger;
}

/** Registers the API on `server`; it loads with the server (`listen()` or `ready()` report a failure). */
export function mountManagementApi(server: FastifyInstance, mount: ManagementMount): void {
  const { api, runs, apps, logger } = mount;
  void server.register(managementApi, { runs, apps, authenticate: kubeAuthenticator({ api, logger: logger.child({ component: 'management-auth' }) }) });
}
