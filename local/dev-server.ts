// `runlet dev`: the same sidecar run interface, the Python runtime and the management API, on one loopback
// port, with runs recorded in SQLite. Composition only: every behaviour lives in sidecar/, management/, local/.
import { hostname } from 'node:os';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { PROBLEM_CONTENT_TYPE, ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { Logger } from 'pino';
import { loadAppDir, type LoadedApp } from '../crds/service-toml.ts';
import type { AppSummary } from '../management/app-list.ts';
import { managementApi } from '../management/routes.ts';
import { dashboard } from '../dashboard/routes.ts';
import { LocalApiKeys } from './dev-api-keys.ts';
import { createAdminInterface, type AdminInterface } from '../sidecar/admin-interface.ts';
import { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import type { RunAuthConfig } from '../run-request/auth/config.ts';
import { AppRegistry, AppTarget } from '../sidecar/apps.ts';
import { Replica } from '../sidecar/replica.ts';
import type { RequestTimeouts } from '../run-request/request-timeouts.ts';
import { DEFAULT_BODY_LIMIT_BYTES } from '../run-request/request-body.ts';
import { createRunInterface } from '../sidecar/run-interface.ts';
import { runInterfaceRoutes } from '../sidecar/run-interface-routes.ts';
import { createFrontedServer } from '../sidecar/run-server.ts';
import { LOOPBACK_CIDRS } from '../sidecar/webhook/guard.ts';
import type { DelivererOptions } from '../sidecar/webhook/deliver.ts';
import { SqliteRunStore } from '../sidecar/runs/sqlite-run-store.ts';
import { DevRetention } from './dev-retention.ts';
import { prepareDataDir } from './dev-data-dir.ts';
import { DevRequestGuard, guardedRunInterface } from './dev-request-guard.ts';
import { pythonInterpreter, RuntimeSupervisor, type RuntimeLaunch } from './runtime-supervisor.ts';
import { AppEnvironment } from './app-environment.ts';
import { REQUIREMENTS_FILE } from './app-requirements.ts';
import { probeInterpreter, PythonEnvironments, type Interpreter } from './python-environment.ts';

export interface DevServerOptions {
  appDirs: string[];
  port: number;
  projectId: string;
  dataDir: string;
  logger: Logger;
  bodyLimitBytes?: number;
  /** The largest result a Python function may return; default DEFAULT_RESULT_LIMIT_BYTES (32 MiB). */
  resultLimitBytes?: number;
  /** CIDRs webhooks may target despite the SSRF guard; default loopback (local receivers are the point here). */
  webhookAllowCidrs?: readonly string[];
  /** Overrides of the webhook deliverer (tests shorten retry delays). */
  webhooks?: DelivererOptions;
  /** Require bearer tokens on the run interface, as in a cluster (`runlet dev --auth-key-file`). */
  auth?: RunAuthConfig;
  /** How long a request may take to arrive (run-request/request-timeouts.ts has the defaults). */
  timeouts?: Partial<RequestTimeouts>;
  /** What all connections may hold of requests still arriving (run-request/request-budget.ts has the default). */
  requestBufferBytes?: number;
  /** How long a caller may read nothing of an answer written as it comes (sidecar/active-runs.ts has the default). */
  clientStallTimeoutMs?: number;
  /** Host names served besides the loopback ones (`--allow-host`; dev-request-guard.ts). */
  allowedHosts?: readonly string[];
  /** The interpreter Python apps run on, and their environments are made with (`--python`); default pythonInterpreter(). */
  python?: string;
}

export interface DevApp {
  loaded: LoadedApp;
  target: AppTarget;
  supervisor: RuntimeSupervisor;
  /** A Python app's: the virtual environment it runs in, if it has dependencies. Null for a custom app. */
  environment: AppEnvironment | null;
}

export interface DevServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  apps: DevApp[];
  store: SqliteRunStore;
  /** The deletion of runs past their retention: at start, then hourly. */
  retention: DevRetention;
  replica: Replica;
  /** What the interpreter Python apps run on says of itself (asked once); rejects if it cannot be run. */
  interpreter(): Promise<Interpreter>;
  /** Resolves once every app's runtime has been ready once (or the bound passes; then false). */
  ready(timeoutMs: number): Promise<boolean>;
  /** Stops taking runs, lets those in flight finish (bounded by the apps' grace periods), then exits cleanly. */
  close(): Promise<void>;
}

/** Local mode binds to loopback only: nothing here authenticates callers by default. */
const HOST = '127.0.0.1';

export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const { logger, projectId } = options;
  const loaded = await Promise.all(options.appDirs.map((dir) => loadAppDir(dir)));
  assertUniqueNames(loaded);
  for (const app of loaded) for (const warning of app.warnings) logger.warn({ app: app.name }, warning);

  prepareDataDir(options.dataDir, logger);
  // Runs a killed runlet dev left unfinished are failed, and their webhooks sent, as the replica starts.
  const store = new SqliteRunStore({ dataDir: options.dataDir, logger, processName: 'runlet dev' });
  const retention = new DevRetention({
    store,
    apps: loaded.flatMap((app) => (app.spec.runs.retentionDays === undefined ? [] : [{ projectId, appName: app.name, days: app.spec.runs.retentionDays }])),
    logger,
  });
  const registry = new AppRegistry();
  const python = options.python ?? pythonInterpreter();
  // Asked only when an app has dependencies (their environment is keyed by it) or the banner says it: an app
  // without any starts on `python` at once.
  let probed: Promise<Interpreter> | null = null;
  const interpreter = (): Promise<Interpreter> => (probed ??= probeInterpreter(python));
  const environments = new PythonEnvironments({ dataDir: options.dataDir, logger });
  const apps: DevApp[] = loaded.map((app) => {
    const target = new AppTarget({
      projectId,
      appName: app.name,
      runtime: app.spec.runtime.custom ? 'custom' : 'python',
      replicaConcurrency: app.spec.scaling.replicaConcurrency,
      responseGracePeriodSeconds: app.spec.scaling.responseGracePeriod,
      resultLimitBytes: options.resultLimitBytes,
      resultKeeping: app.spec.runs.keepResults ? { maxBytes: app.spec.runs.resultKeepBytes, ttlSeconds: app.spec.runs.resultTtl } : null,
    });
    registry.add(target);
    // The run store is written as runs come: its folder may be inside an app's, and is no change of the app.
    const environment = app.spec.runtime.custom ? null : new AppEnvironment({ app, command: python, interpreter, environments, logger });
    const supervisor = new RuntimeSupervisor(target, launchOf(app, options.port, python), logger, {
      watchIgnoring: [options.dataDir],
      prepare: environment ? () => environment.prepare() : undefined,
      dependencyFiles: ['service.toml', REQUIREMENTS_FILE],
    });
    return { loaded: app, target, supervisor, environment };
  });

  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  // API keys are tokens signed with the auth key; without one, runlet dev checks no token and makes no key.
  const signingKeys = options.auth?.hs256Keys;
  let runAuth: RunAuthenticator | undefined;
  const keys =
    signingKeys === undefined ? undefined : new LocalApiKeys({ dataDir: options.dataDir, signingKeys, onRevoke: () => runAuth?.forgetVerified() });
  runAuth = options.auth ? new RunAuthenticator({ ...options.auth, revokedTokenIds: keys?.revokedTokenIds }, { logger }) : undefined;
  const replica = new Replica({
    apps: registry,
    store,
    replicaName: hostname(),
    logger,
    bodyLimitBytes,
    bodyTimeoutMs: options.timeouts?.bodyMs,
    requestDeadlineMs: options.timeouts?.deadlineMs,
    requestBufferBytes: options.requestBufferBytes,
    clientStallTimeoutMs: options.clientStallTimeoutMs,
    webhooks: { allowCidrs: options.webhookAllowCidrs ?? LOOPBACK_CIDRS, ...options.webhooks },
    auth: runAuth,
  });
  const runInterface = createRunInterface(replica);
  // The body's pauses are bounded where it is read (run-request/request-body.ts), the head's by node:http.
  const serverOptions = { bodyLimitBytes, timeouts: options.timeouts };
  // Judges every request on the route it matched (fastify's hook) or, for a call the front reads, as a run's.
  const guard = new DevRequestGuard(options.allowedHosts);
  const server: FastifyInstance = Fastify({
    logger: false,
    serverFactory: (handler) => createFrontedServer(guardedRunInterface(runInterface, guard), handler, serverOptions),
  });
  server.addHook('onRequest', guard.onRequest);
  await server.register(runInterfaceRoutes(runInterface));
  adminRoutes(server, createAdminInterface(replica, { drain: 'open' }));
  const appList = (project: string): AppSummary[] =>
    apps.filter((app) => app.target.projectId === project).map(({ loaded, target, supervisor }) => ({
      name: target.appName,
      ready: target.ready,
      error: supervisor.importError?.summary ?? supervisor.prepareError,
      // runlet dev runs one replica of each app, whatever [scaling] says (it says so at start).
      replicas: { ready: target.ready ? 1 : 0, desired: 1 },
      scaling: {
        minReplicas: loaded.spec.scaling.minReplicas,
        maxReplicas: loaded.spec.scaling.maxReplicas,
        replicaConcurrency: loaded.spec.scaling.replicaConcurrency,
      },
    }));
  await server.register(managementApi, {
    runs: store,
    apps: { hasApp: (projectId, appName) => registry.has(projectId, appName) },
    appList,
    canceller: replica.activeRuns,
    keys,
  });
  await server.register(dashboard, {
    projectId,
    tokenRequired: false,
    keysUnavailable:
      keys === undefined
        ? 'runlet dev is running without authentication: every call is accepted without a token, so there are no keys to make. Start it with --auth-key-file FILE to require tokens and make keys here.'
        : null,
  });
  await server.listen({ host: HOST, port: options.port });
  const address = server.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const url = `http://${HOST}:${port}`;

  const firstReady = Promise.all(apps.map((app) => app.supervisor.start()));
  let closing: Promise<void> | null = null;

  return {
    url,
    apps,
    store,
    retention,
    replica,
    interpreter,
    async ready(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
      const result = await Promise.race([firstReady.then(() => true as const), timedOut]);
      clearTimeout(timer);
      return result;
    },
    close() {
      closing ??= (async () => {
        await replica.drain();
        await server.close();
        const graceMs = Math.max(...apps.map((app) => app.target.runTimeLimitMs), 1000);
        // The supervisors first: stopping, they take an install cut short for no failure of the app.
        await Promise.all([...apps.map((app) => app.supervisor.stop(graceMs)), environments.close()]);
        await retention.stop();
        await store.close();
      })();
      return closing;
    },
  };
}

/**
 * The sidecar's admin paths under `/admin`, each a route of its own: the guard judges the route that matched.
 * Open: the dev port listens on 127.0.0.1 only, and has no authentication anywhere (README, `runlet dev`); the
 * drain is POST-only there, so that no image tag or link of a page can send it.
 */
function adminRoutes(server: FastifyInstance, admin: AdminInterface): void {
  const handOver = (path: string) => (request: FastifyRequest, reply: FastifyReply) => {
    reply.hijack();
    admin.handle(request.raw, reply.raw, path);
  };
  for (const path of ['/healthz', '/ready', '/metrics']) server.get(`/admin${path}`, handOver(path));
  server.post('/admin/drain', handOver('/drain'));
  server.get('/admin/drain', async (_request, reply) => {
    const problem = new ProblemError(Problems.methodNotAllowed, 'runlet dev drains on POST /admin/drain only: a GET could come from any page (an image, a link)');
    await reply.code(problem.status).header('allow', 'POST').type(PROBLEM_CONTENT_TYPE).send(problem.toBody());
  });
}

function launchOf(app: LoadedApp, devPort: number, python: string): RuntimeLaunch {
  const env = Object.fromEntries((app.spec.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
  const custom = app.spec.runtime.custom;
  if (custom) {
    if (!custom.entrypoint?.length) {
      throw new Error(`app ${app.name}: [runtime.custom] entrypoint is required in local mode (the command that starts the app's server)`);
    }
    if (custom.port === devPort) {
      throw new Error(
        `app ${app.name}: [runtime.custom] port ${custom.port} is the port runlet dev listens on; ` +
          'give the app another port in its service.toml, or run runlet dev with another --port',
      );
    }
    return {
      kind: 'custom',
      appDir: app.dir,
      entrypoint: custom.entrypoint,
      port: custom.port,
      readyPath: custom.readycheckEndpoint ?? custom.healthcheckEndpoint ?? null,
      env,
    };
  }
  return {
    kind: 'python',
    appDir: app.dir,
    module: app.spec.runtime.python?.module ?? 'main',
    concurrency: app.spec.scaling.replicaConcurrency,
    env,
    python,
  };
}

function assertUniqueNames(apps: LoadedApp[]): void {
  const seen = new Map<string, string>();
  for (const app of apps) {
    const other = seen.get(app.name);
    if (other) throw new Error(`two app folders are both named "${app.name}": ${other} and ${app.dir}; set [deployment] name in one`);
    seen.set(app.name, app.dir);
  }
}
