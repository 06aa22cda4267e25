// `runlet dev [APP_DIR ...]`: serve apps from folders on this machine until Ctrl-C.
import { resolve } from 'node:path';
import type { LoadedApp } from '../crds/service-toml.ts';
import { allowedHostName, CLIENT_HEADER } from '../local/dev-request-guard.ts';
import { PROJECT_ID, followsRule } from '../crds/route-names.ts';
import { startDevServer, type DevApp } from '../local/dev-server.ts';
import { readPythonFunctions, sampleArguments, signatureText, type PythonFunction } from '../local/python-functions.ts';
import { probeInterpreter, type Interpreter } from '../local/python-environment.ts';
import { DEFAULT_RESULT_LIMIT_BYTES } from '../sidecar/runtimes/runtime-connections.ts';
import { DEFAULT_CLIENT_STALL_TIMEOUT_MS } from '../sidecar/active-runs.ts';
import { localDevAuth } from '../run-request/auth/local-key.ts';
import { createLogger } from '../sidecar/logger.ts';
import { DEFAULT_REQUEST_BUFFER_BYTES } from '../run-request/request-budget.ts';
import { DEFAULT_REQUEST_BODY_TIMEOUT_MS, DEFAULT_REQUEST_DEADLINE_MS, DEFAULT_REQUEST_HEAD_TIMEOUT_MS, MAX_REQUEST_TIMEOUT_SECONDS } from '../run-request/request-timeouts.ts';
import { parseCommandArgs, parseSecondsFlag } from './arguments.ts';
import { CliError } from './cli-error.ts';

export const DEV_USAGE = `Usage: runlet dev [APP_DIR ...] [options]

Runs each app folder (main.py + service.toml) with the Python runtime behind the Runlet sidecar, and serves
the run interface and the runs API on one loopback port. Runs are kept in DATA_DIR across restarts. An app
is reloaded when a .py file in its folder changes (the runs in flight finish on the old code).

Options:
  --port N          port to listen on (default 8080; 0 picks a free one)
  --project NAME    project id in the URLs (default dev)
  --data-dir DIR    where runs and the apps' environments are kept (default .runlet; made private to your
                    user: 0700, files 0600)
  --python PATH     the Python interpreter apps run on and their environments are made with (default
                    \$RUNLET_PYTHON, else python3)
  --allow-host NAME serve requests addressed to NAME too (repeatable); by default only localhost,
                    127.0.0.1, [::1] and *.localhost are served, so that no web page can reach runlet dev
                    through DNS rebinding
  --log-level LVL   trace|debug|info|warn|error (default info)
  --result-limit-bytes N
                    the largest result a function may return (default 32 MiB); larger: 502 result-too-large
  --auth-key-file F require bearer tokens signed (HS256) with the key in F, as a cluster would
                    (make a key: openssl rand -hex 32 > dev.key)
  --request-head-timeout S
                    longest a request's head may take to arrive, then 408 (default 10)
  --request-body-timeout S
                    longest pause while a request's body arrives, then 408 (default 30)
  --request-deadline S
                    longest a request may take to arrive whole, then 408 (default 60)
  --request-buffer-bytes N
                    what all connections may hold of requests still arriving, then 503 (default 64 MiB)
  --client-stall-timeout S
                    longest a caller may read nothing of a stream (or of a custom app's or a large
                    result's answer) before the run is cut, cancelled client_stalled (default 60)
  -h, --help        this help

An app's [dependencies.pip] packages (or the requirements.txt beside its main.py) are installed by pip, with
its own configuration (PIP_INDEX_URL, pip.conf), into a virtual environment of the app's under
DATA_DIR/environments, reused while they and the interpreter are unchanged. A change of them is installed
and reloads the app; an app that cannot be installed answers 503 with pip's error until its files change.
[dependencies.apt] and other sections are not installed: the start says so.

Pages of other origins your browser has open may call functions with a JSON body, and change nothing else.
A POST outside /v4 (cancel, drain, keys) needs Content-Type: application/json or an ${CLIENT_HEADER} header
(any value), e.g. curl -X POST -H '${CLIENT_HEADER}: curl' .../runs/RUN_ID/cancel.`;

const READY_TIMEOUT_MS = 60_000;

export async function runDevCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseDevArgs(args);
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new CliError(`--port must be a port number from 0 to 65535, got "${values.port}"`, 2);
  // The URLs name it, and every route refuses a project that could not be a namespace (crds/route-names.ts).
  if (!followsRule(PROJECT_ID, values.project)) throw new CliError(`--project must be ${PROJECT_ID.expected}, got ${JSON.stringify(values.project)}`, 2);
  const timeouts = {
    headMs: parseSecondsFlag('request-head-timeout', values['request-head-timeout'], MAX_REQUEST_TIMEOUT_SECONDS),
    bodyMs: parseSecondsFlag('request-body-timeout', values['request-body-timeout'], MAX_REQUEST_TIMEOUT_SECONDS),
    deadlineMs: parseSecondsFlag('request-deadline', values['request-deadline'], MAX_REQUEST_TIMEOUT_SECONDS),
  };
  const requestBufferBytes = Number(values['request-buffer-bytes']);
  if (!Number.isSafeInteger(requestBufferBytes) || requestBufferBytes < 1) {
    throw new CliError(`--request-buffer-bytes must be a positive integer, got "${values['request-buffer-bytes']}"`, 2);
  }
  const allowedHosts = (values['allow-host'] ?? []).map((value) => {
    const name = allowedHostName(value);
    if (name === null) throw new CliError(`--allow-host must be a host name or an IP address without a port, got "${value}"`, 2);
    return name;
  });
  const clientStallTimeoutMs = parseSecondsFlag('client-stall-timeout', values['client-stall-timeout'], MAX_REQUEST_TIMEOUT_SECONDS);
  const logger = createLogger({ name: 'runlet-dev', level: values['log-level'], readable: process.stderr.isTTY });
  const appDirs = (positionals.length > 0 ? positionals : ['.']).map((dir) => resolve(dir));
  // A --python that cannot be run stops the start here, rather than every app's runtime at each try.
  if (values.python !== undefined) {
    try {
      await probeInterpreter(values.python);
    } catch (err) {
      throw new CliError(`--python: ${(err as Error).message}`, 2);
    }
  }

  let server;
  try {
    const keyFile = values['auth-key-file'];
    const auth = keyFile === undefined ? undefined : localDevAuth(resolve(keyFile), values.project);
    const resultLimitBytes = Number(values['result-limit-bytes']);
    if (!Number.isSafeInteger(resultLimitBytes) || resultLimitBytes < 1) {
      throw new CliError(`--result-limit-bytes must be a positive integer, got "${values['result-limit-bytes']}"`, 2);
    }
    server = await startDevServer({
      appDirs, port, projectId: values.project, dataDir: resolve(values['data-dir']), logger, auth, resultLimitBytes, timeouts,
      requestBufferBytes, clientStallTimeoutMs, allowedHosts, python: values.python,
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new CliError(`port ${port} on 127.0.0.1 is already in use: stop what listens there, or pass --port (0 picks a free one)`);
    }
    throw new CliError((err as Error).message);
  }

  // Read while the runtimes start: the banner suggests a call of each app's own functions.
  const devServer = server; // narrowed: the closures below see it assigned
  const hasPython = server.apps.some((app) => app.environment !== null);
  const interpreter = hasPython ? devServer.interpreter().catch((err: Error) => err) : Promise.resolve(null);
  const hints = Promise.all(server.apps.map((app) => appHint(app.loaded, devServer.interpreter)));
  const ready = await server.ready(READY_TIMEOUT_MS);
  const appHints = (await hints).map((hint, i) => ({ ...hint, ...appState(server.apps[i]!) }));
  process.stdout.write(banner(server.url, values.project, appHints, ready, await interpreter));

  let signals = 0;
  const stopped = new Promise<void>((resolveStop) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      signals++;
      if (signals > 1) {
        process.stderr.write(`runlet dev: ${signal} again, exiting without waiting for runs in flight\n`);
        process.exit(130);
      }
      process.stdout.write('\nrunlet dev: stopping; finishing runs in flight (Ctrl-C again to force)\n');
      void server.close().then(resolveStop);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
  await stopped;
  return 0;
}

function parseDevArgs(args: string[]) {
  return parseCommandArgs(
    args,
    {
      port: { type: 'string', default: '8080' },
      project: { type: 'string', default: 'dev' },
      'data-dir': { type: 'string', default: '.runlet' },
      python: { type: 'string' },
      'allow-host': { type: 'string', multiple: true },
      'log-level': { type: 'string', default: 'info' },
      'auth-key-file': { type: 'string' },
      'result-limit-bytes': { type: 'string', default: String(DEFAULT_RESULT_LIMIT_BYTES) },
      'request-head-timeout': { type: 'string', default: String(DEFAULT_REQUEST_HEAD_TIMEOUT_MS / 1000) },
      'request-body-timeout': { type: 'string', default: String(DEFAULT_REQUEST_BODY_TIMEOUT_MS / 1000) },
      'request-deadline': { type: 'string', default: String(DEFAULT_REQUEST_DEADLINE_MS / 1000) },
      'request-buffer-bytes': { type: 'string', default: String(DEFAULT_REQUEST_BUFFER_BYTES) },
      'client-stall-timeout': { type: 'string', default: String(DEFAULT_CLIENT_STALL_TIMEOUT_MS / 1000) },
    },
    DEV_USAGE,
  );
}

/** What the banner says about an app: a custom app's server answers any path; a Python app's functions, if read. */
interface AppHint {
  name: string;
  custom: boolean;
  /** Null for a custom app, or when the module could not be parsed (the runtime's log says why). */
  functions: PythonFunction[] | null;
  /** Why the app could not be imported at start; null if it was (or is still being tried). */
  importError?: string | null;
  /** Why its dependencies could not be installed; null if they were, or it has none. */
  prepareError?: string | null;
  /** Its virtual environment and what it holds; null when it has none. */
  environment?: { dir: string; reused: boolean } | null;
}

async function appHint(app: LoadedApp, interpreter: () => Promise<Interpreter>): Promise<AppHint> {
  const custom = app.spec.runtime.custom !== undefined;
  // Read with the interpreter the app runs on; one that cannot be run reads nothing (the banner says why).
  const python = custom ? null : await interpreter().catch(() => null);
  const functions = python === null ? null : await readPythonFunctions(python.executable, app.dir, app.spec.runtime.python?.module ?? 'main');
  return { name: app.name, custom, functions };
}

function appState(app: DevApp): Pick<AppHint, 'importError' | 'prepareError' | 'environment'> {
  const environment = app.environment?.current;
  return {
    importError: app.supervisor.importError?.summary ?? null,
    prepareError: app.supervisor.prepareError,
    environment: environment ? { dir: environment.dir, reused: environment.reused } : null,
  };
}

/** [scaling] keys about replicas: `runlet dev` runs one replica per app, so only a cluster applies them. */
const CLUSTER_ONLY_SCALING_KEYS = ['min_replicas', 'max_replicas', 'cooldown', 'scaling_metric', 'scaling_target', 'cold_start_timeout'];

function banner(url: string, project: string, apps: AppHint[], ready: boolean, interpreter: Interpreter | Error | null): string {
  const lines = ['', `runlet dev: listening on ${url}`, `runlet dev runs one replica per app and ignores [scaling] ${CLUSTER_ONLY_SCALING_KEYS.join(', ')}`];
  if (interpreter instanceof Error) lines.push(`Python apps cannot start: ${interpreter.message} (choose one with --python PATH)`);
  else if (interpreter !== null) lines.push(`Python apps run on ${interpreter.command} (Python ${interpreter.version}, ${interpreter.executable}; --python PATH for another)`);
  lines.push('');
  for (const app of apps) {
    lines.push(`  app ${app.name}${app.custom ? ' (custom: its server answers every path under the app)' : ''}`);
    lines.push(app.custom ? `    run:  ANY  ${url}/v4/${project}/${app.name}/{path}` : `    run:  POST ${url}/v4/${project}/${app.name}/{function}`);
    if (app.functions && app.functions.length > 0) lines.push(`    functions: ${app.functions.map(signatureText).join(', ')}`);
    lines.push(`    runs: GET  ${url}/v2/projects/${project}/apps/${app.name}/runs`);
    if (app.environment) lines.push(`    environment: ${app.environment.dir} (${app.environment.reused ? 'reused: its dependencies are unchanged' : 'installed now'})`);
    if (app.importError) lines.push(`    cannot be imported: ${app.importError} (its calls answer 503 until its files change)`);
    if (app.prepareError) lines.push(`    cannot start: ${app.prepareError.split('\n').join('\n      ')}\n    (its calls answer 503 until its files change)`);
  }
  const first = apps[0];
  if (first) {
    lines.push('', 'Try:');
    lines.push(`  ${tryCall(`${url}/v4/${project}/${first.name}`, first)}`);
    lines.push(`  curl ${url}/v2/projects/${project}/apps/${first.name}/runs`);
  }
  if (!ready) lines.push('', 'warning: not every runtime is ready yet; calls answer 503 until it is (see the log above)');
  return lines.join('\n') + '\n\n';
}

/** A call of the app: its first function with its required parameters, or its server's root for a custom app. */
function tryCall(appUrl: string, app: AppHint): string {
  if (app.custom) return `curl ${appUrl}/`;
  const fn = app.functions?.[0];
  // Unread functions: the shape of a call, with the name left for the reader to fill in.
  const path = fn ? fn.name : '{function}';
  const body = fn ? sampleArguments(fn) : '{}';
  return `curl -X POST ${appUrl}/${path} -H 'content-type: application/json' -d '${body}'`;
}
