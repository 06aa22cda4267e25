// Every server the scenarios measure, started once and kept for all rounds so each round runs every scenario
// against the same processes. All listen on loopback (the sidecar binds 0.0.0.0, as in a pod).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { COMPILED_CLI, IMAGE_ENV } from './build.ts';
import { freePort, waitForHttp, type BenchProcess, type ProcessGroup } from './processes.ts';
import { jemallocPath, PYTHON } from './tools.ts';
import { sidecarAllocatorEnv } from '../operator/render/sidecar-container.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const SERVERS = join(REPO, 'bench/servers');
const APP_DIR = join(SERVERS, 'trivial');

export const PROJECT = 'bench';
export const APP = 'trivial';
/**
 * Calls in flight, on the sidecar and in the runtime's thread pool alike: as many as the load generators'
 * connections, so nginx (which passes every call through) and the sidecar put the same load on the runtime.
 */
export const CONCURRENCY = 32;
export const WEBHOOK_SECRET = 'bench-secret';
const STARTUP_TIMEOUT_MS = 60_000;

export interface Server {
  process: BenchProcess;
  /** Origin, `http://127.0.0.1:PORT`. */
  url: string;
}

/** How the sidecars' Node starts: the pod's flags unless a run measures others (`--sidecar-node-options`). */
export interface StackOptions {
  sidecarNodeOptions: string;
}

export interface Stack {
  /** The Python runtime of the trivial app, called directly and fronted by nginx and the sidecars. */
  runtime: Server;
  /** Its RSS before any call, in MB. */
  runtimeIdleRssMb: number;
  /** The in-memory Kubernetes API server (bench/servers/kube-api-server.ts) the pod's sidecars write RunLogs to. */
  kubeApi: Server;
  /** How a pod's sidecar reaches it: for sidecars started beside the stack's (the warm-path A/B's). */
  runLogStore: RunLogStore;
  /** `runlet sidecar` as in a pod, runs recorded in its RunLog: for the sync and stream scenarios. */
  sidecar: Server & { adminUrl: string };
  /** Its RSS right after start, before any call, in MB. */
  sidecarIdleRssMb: number;
  /** The results collector with its PostgreSQL (bench/servers/results-collector.ts), as the operator serves it in a cluster with a results store. */
  collector: Server;
  /** `runlet sidecar` as in a pod of a cluster with a results store: runs sent in batches to the collector. */
  resultsSidecar: Server & { adminUrl: string };
  /** Its RSS right after start, before any call, in MB. */
  resultsSidecarIdleRssMb: number;
  /** `runlet sidecar` as outside a cluster, runs recorded in SQLite: measured beside the pod's in the sync, memory, async and webhook scenarios. */
  sqliteSidecar: Server & { adminUrl: string };
  /** `runlet sidecar` as in a pod for the async and webhook scenarios: a queue for bursts, loopback webhooks admitted. */
  asyncSidecar: Server & { adminUrl: string };
  nginx: Server;
  /** node:http + the sidecar's runtime client and nothing else (bench/servers/floor-proxy.ts). */
  floorProxy: Server;
  /** The same function in FastAPI under uvicorn. */
  uvicorn: Server;
  /** `runlet dev` of the trivial app (its own runtime). */
  dev: Server;
  receiver: Server;
}

export async function startStack(group: ProcessGroup, workDir: string, options: StackOptions): Promise<Stack> {
  const [runtime, kubeApi, collector] = await Promise.all([startRuntime(group, workDir), startKubeApi(group, workDir), startCollector(group)]);
  const runtimeIdleRssMb = runtime.process.rssMb();
  const runLog: RunLogStore = { kind: 'runlog', serviceAccountDir: kubeApi.serviceAccountDir, serverUrl: kubeApi.server.url };
  const node = options.sidecarNodeOptions;
  // For bursts of async runs: a queue no burst fills, and webhooks to the loopback receiver admitted.
  const asyncArgs = ['--queue-depth', '100000', '--webhook-allow-cidrs', '127.0.0.0/8'];
  const results: ResultsStore = { kind: 'results', collectorUrl: collector.url };
  const [sidecar, resultsSidecar, sqliteSidecar, asyncSidecar, nginx, floorProxy, uvicorn, dev, receiver] = await Promise.all([
    startSidecar(group, { name: 'sidecar', runtime, workDir, store: runLog, nodeOptions: node }),
    startSidecar(group, { name: 'results-sidecar', runtime, workDir, store: results, nodeOptions: node }),
    // Takes sync loads (never queued at 32 connections, its concurrency) and async ones.
    startSidecar(group, { name: 'sqlite-sidecar', runtime, workDir, store: { kind: 'sqlite' }, nodeOptions: node, extraArgs: asyncArgs }),
    startSidecar(group, { name: 'async-sidecar', runtime, workDir, store: runLog, nodeOptions: node, extraArgs: asyncArgs }),
    startNginx(group, runtime, workDir),
    startFloorProxy(group, runtime, node),
    startUvicorn(group),
    startDev(group, workDir),
    startReceiver(group),
  ]);
  return {
    runtime,
    runtimeIdleRssMb,
    kubeApi: kubeApi.server,
    runLogStore: runLog,
    sidecar,
    sidecarIdleRssMb: sidecar.process.rssMb(),
    collector,
    resultsSidecar,
    resultsSidecarIdleRssMb: resultsSidecar.process.rssMb(),
    sqliteSidecar,
    asyncSidecar,
    nginx,
    floorProxy,
    uvicorn,
    dev,
    receiver,
  };
}

/** `python3 -m runlet_runtime`, as the pod's app container runs it. */
async function startRuntime(group: ProcessGroup, workDir: string): Promise<Server> {
  const portFile = join(workDir, 'runtime.port');
  const started = group.start({
    name: 'runtime',
    command: PYTHON,
    args: ['-m', 'runlet_runtime', '--app-dir', APP_DIR, '--port', '0', '--port-file', portFile, '--concurrency', String(CONCURRENCY)],
    env: { ...process.env, PYTHONPATH: join(REPO, 'runtime/python'), PYTHONDONTWRITEBYTECODE: '1' },
  });
  const deadline = performance.now() + STARTUP_TIMEOUT_MS;
  while (!existsSync(portFile)) {
    if (!started.running) throw new Error(`the runtime exited before listening; its output:\n${started.output()}`);
    if (performance.now() > deadline) throw new Error(`the runtime wrote no port file in ${STARTUP_TIMEOUT_MS} ms; its output:\n${started.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { process: started, url: `http://127.0.0.1:${readFileSync(portFile, 'utf8').trim()}` };
}

/** The in-memory API server with the App the pod's sidecars belong to, and the service account that reaches it. */
async function startKubeApi(group: ProcessGroup, workDir: string): Promise<{ server: Server; serviceAccountDir: string }> {
  const serviceAccountDir = join(workDir, 'sidecar-serviceaccount');
  const started = group.start({
    name: 'kube API server',
    command: process.execPath,
    args: [join(SERVERS, 'kube-api-server.ts'), '--service-account', serviceAccountDir, '--namespace', PROJECT, '--app', APP],
  });
  const match = await started.waitForOutput(/listening on (https:\/\/127\.0\.0\.1:\d+)/, STARTUP_TIMEOUT_MS);
  return { server: { process: started, url: match[1]! }, serviceAccountDir };
}

/** The file a sidecar reads its token for the collector from, as the kubelet projects it: `bench.<app>.<pod>` here. */
function benchTokenFile(workDir: string, pod: string): string {
  const path = join(workDir, `${pod}-results-token`);
  writeFileSync(path, `bench.${APP}.${pod}`);
  return path;
}

/** The collector, in its own process as in the operator's pod, with a PostgreSQL of its own (durable commits). */
async function startCollector(group: ProcessGroup): Promise<Server> {
  const started = group.start({
    name: 'results collector',
    command: process.execPath,
    args: [join(SERVERS, 'results-collector.ts'), '--namespace', PROJECT],
  });
  const match = await started.waitForOutput(/listening on (http:\/\/127\.0\.0\.1:\d+)/, STARTUP_TIMEOUT_MS);
  return { process: started, url: match[1]! };
}

export interface RunLogStore {
  kind: 'runlog';
  serviceAccountDir: string;
  serverUrl: string;
}

/** A cluster's results store: the collector (bench/servers/results-collector.ts), which takes a pod's batches on its token. */
export interface ResultsStore {
  kind: 'results';
  collectorUrl: string;
}

/** Where a sidecar records its runs: the pod's RunLog through the API server, the results collector, or SQLite in its data dir. */
type RunStore = RunLogStore | ResultsStore | { kind: 'sqlite' };

interface SidecarSpec {
  /** Process name, also its POD_NAME (the RunLog is named after the pod). */
  name: string;
  /** The compiled CLI to start: this checkout's unless another build is measured beside it (the warm-path A/B's baseline). */
  cli?: string;
  runtime: Server;
  workDir: string;
  store: RunStore;
  nodeOptions: string;
  extraArgs?: string[];
}

/**
 * `runlet sidecar` from the compiled CLI, in front of the runtime, with the flags and environment the operator
 * renders for the pod's sidecar container (operator/render/sidecar-container.ts): NODE_OPTIONS, POD_NAME, and
 * for the RunLog the API server's address and the service account, as in a pod (mounted elsewhere here).
 */
export async function startSidecar(group: ProcessGroup, spec: SidecarSpec): Promise<Server & { adminUrl: string }> {
  const { name, runtime, workDir, store } = spec;
  const [port, adminPort] = [await freePort(), await freePort()];
  const started = group.start({
    name,
    command: process.execPath,
    args: [
      spec.cli ?? COMPILED_CLI, 'sidecar', '--project', PROJECT, '--app', APP, '--app-port', new URL(runtime.url).port,
      '--port', String(port), '--admin-port', String(adminPort), '--concurrency', String(CONCURRENCY),
      '--run-store', store.kind, '--data-dir', join(workDir, `${name}-data`), '--log-level', 'warn',
      // The load generators send no bearer token: the run path is measured without caller authentication.
      '--auth', 'off', ...(spec.extraArgs ?? []),
    ],
    env: {
      ...process.env,
      ...IMAGE_ENV,
      // Replaces any NODE_OPTIONS of the shell that started the benchmarks: the pod's flags are what is measured.
      NODE_OPTIONS: spec.nodeOptions,
      // The pod's allocator, from this machine's Debian package (the image has the same at another path).
      ...sidecarAllocatorEnv(jemallocPath()),
      POD_NAME: name,
      ...(store.kind === 'runlog' ? inPod(store) : {}),
      ...(store.kind === 'results' ? { RUNLET_RESULTS_URL: store.collectorUrl, RUNLET_RESULTS_TOKEN_FILE: benchTokenFile(workDir, name) } : {}),
    },
  });
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  // Ready once its watcher has seen the runtime answer its health check.
  await waitForHttp(`${adminUrl}/ready`, started, { timeoutMs: STARTUP_TIMEOUT_MS });
  return { process: started, url: `http://127.0.0.1:${port}`, adminUrl };
}

/**
 * A pod's way to the API server: KUBERNETES_SERVICE_HOST/_PORT and the service account; no kubeconfig, not even
 * one in the user's home (HOME is the service account's folder, which holds none).
 */
function inPod(store: { serviceAccountDir: string; serverUrl: string }): Record<string, string> {
  const { hostname, port } = new URL(store.serverUrl);
  const dir = store.serviceAccountDir;
  return { KUBERNETES_SERVICE_HOST: hostname, KUBERNETES_SERVICE_PORT: port, RUNLET_SERVICE_ACCOUNT_DIR: dir, KUBECONFIG: '', HOME: dir };
}

async function startNginx(group: ProcessGroup, runtime: Server, workDir: string): Promise<Server> {
  const dir = join(workDir, 'nginx');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const values: Record<string, string> = { WORK_DIR: dir, PORT: String(port), RUNTIME_PORT: new URL(runtime.url).port, PROJECT, APP };
  const config = readFileSync(join(SERVERS, 'nginx.conf.template'), 'utf8').replace(/\{\{(\w+)\}\}/g, (_match, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`nginx.conf.template: no value for {{${name}}}`);
    return value;
  });
  writeFileSync(join(dir, 'nginx.conf'), config);
  // -p and -e keep every path nginx opens, even before it reads the configuration, inside the work folder.
  const started = group.start({ name: 'nginx', command: 'nginx', args: ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'] });
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/v4/${PROJECT}/${APP}/run`, started, { method: 'POST', timeoutMs: STARTUP_TIMEOUT_MS });
  return { process: started, url };
}

/** With the sidecars' Node flags and allocator: the floor is what a Node proxy of the sidecar's design costs, under the same settings. */
async function startFloorProxy(group: ProcessGroup, runtime: Server, nodeOptions: string): Promise<Server> {
  const started = group.start({
    name: 'floor proxy',
    command: process.execPath,
    args: [join(SERVERS, 'floor-proxy.ts'), '--app-port', new URL(runtime.url).port],
    env: { ...process.env, NODE_OPTIONS: nodeOptions, ...sidecarAllocatorEnv(jemallocPath()) },
  });
  const match = await started.waitForOutput(/listening on (http:\/\/127\.0\.0\.1:\d+)/, STARTUP_TIMEOUT_MS);
  return { process: started, url: match[1]! };
}

/**
 * FastAPI under uvicorn, one worker process (one process against the runtime's one process), with uvicorn's
 * pure-Python defaults pinned: the asyncio loop and h11 (Debian's python3-uvicorn does not pull in uvloop or
 * httptools).
 */
async function startUvicorn(group: ProcessGroup): Promise<Server> {
  const port = await freePort();
  const started = group.start({
    name: 'uvicorn',
    command: PYTHON,
    args: ['-m', 'uvicorn', 'fastapi_app:app', '--host', '127.0.0.1', '--port', String(port), '--workers', '1', '--loop', 'asyncio', '--http', 'h11', '--no-access-log', '--log-level', 'warning'],
    cwd: SERVERS,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/openapi.json`, started, { timeoutMs: STARTUP_TIMEOUT_MS });
  return { process: started, url };
}

/** `runlet dev` of the trivial app, compiled as the npm package ships it; its runtime runs on the same interpreter as the others. */
async function startDev(group: ProcessGroup, workDir: string): Promise<Server> {
  const started = group.start({
    name: 'runlet dev',
    command: process.execPath,
    args: [COMPILED_CLI, 'dev', APP_DIR, '--port', '0', '--project', PROJECT, '--data-dir', join(workDir, 'dev-data'), '--log-level', 'warn'],
    env: { ...process.env, RUNLET_PYTHON: PYTHON, PYTHONDONTWRITEBYTECODE: '1' },
  });
  // The banner ends with its hints once every runtime is ready.
  const match = await started.waitForOutput(/listening on (http:\/\/127\.0\.0\.1:\d+)[\s\S]*Try:/, STARTUP_TIMEOUT_MS);
  return { process: started, url: match[1]! };
}

async function startReceiver(group: ProcessGroup): Promise<Server> {
  const started = group.start({
    name: 'webhook receiver',
    command: process.execPath,
    args: [join(SERVERS, 'webhook-receiver.ts'), '--secret', WEBHOOK_SECRET],
  });
  const match = await started.waitForOutput(/listening on (http:\/\/127\.0\.0\.1:\d+)/, STARTUP_TIMEOUT_MS);
  return { process: started, url: match[1]! };
}

/** The run-interface URL of a function on a sidecar or `runlet dev`. */
export function runUrl(server: Server, functionName: string, query = ''): string {
  return `${server.url}/v4/${PROJECT}/${APP}/${functionName}${query ? '?' + query : ''}`;
}
