// The real Kubernetes control plane of control-plane.sh, for a test suite: `up` in a fresh directory, with
// this process as its owner (the components stop by themselves if it dies without calling stop()), `down`
// when done. Whether it can run here at all is decided before, by controlPlaneSkipReason().
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const SCRIPT = join(import.meta.dirname, 'control-plane.sh');
/** Keep in step with control-plane.sh (the binaries are cached by the Debian source version). */
const KUBE_SOURCE_VERSION = '1.20.5+really1.20.2-1.1+deb12u1';
const BINARIES = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubectl'];
/** Start-up on a loaded 2-core machine: certificates, etcd, the API server's bootstrap, then the controllers. */
const UP_TIMEOUT_MS = 240_000;

const run = promisify(execFile);

export interface ControlPlane {
  /** Its state directory: certificates, kubeconfigs, logs/. */
  readonly dir: string;
  /** An admin kubeconfig (system:masters). */
  readonly kubeconfigPath: string;
  /** `https://127.0.0.1:<port>` */
  readonly server: string;
  readonly port: number;
  /** The cluster CA, which signed the API server's certificate. */
  readonly caFile: string;
  /** kubectl of the server's version (the machine's own may be far outside the version-skew policy). */
  readonly kubectl: string;
  /** With `audit: true`: the API server's audit log (every write by a service account, RequestResponse). */
  readonly auditLogPath: string | undefined;
  /** Stops the API server alone (an outage); resolves once its process is gone. */
  stopApiServer(): Promise<void>;
  /** Starts the API server stopped by stopApiServer() again; resolves once it answers /readyz. */
  startApiServer(): Promise<void>;
  /** The last lines of every component's log, for a failing test to print. */
  diagnostics(): string;
  stop(): Promise<void>;
}

function binDir(env: NodeJS.ProcessEnv): string {
  const cache = env.RUNLET_CONTROL_PLANE_CACHE ?? join(env.HOME ?? homedir(), '.cache/runlet/control-plane');
  return join(cache, KUBE_SOURCE_VERSION, 'bin');
}

/** The tier's kubectl (1.20), present once the control plane is built. */
export function tierKubectlPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(binDir(env), 'kubectl');
}

/**
 * Why the control-plane tier cannot run here, or undefined when it can: its binaries are built (`make
 * test-cluster` builds them), and etcd, openssl, curl and python3 are installed.
 */
export function controlPlaneSkipReason(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const bin = binDir(env);
  const missing = BINARIES.filter((name) => !existsSync(join(bin, name)));
  if (missing.length > 0) return `the control plane is not built (${missing.join(', ')} missing in ${bin}): run \`make test-cluster\``;
  const tools = ['etcd', 'openssl', 'curl', 'python3', 'setsid'];
  const path = (env.PATH ?? '').split(':');
  const absent = tools.filter((tool) => !path.some((dir) => existsSync(join(dir, tool))));
  if (absent.length > 0) return `${absent.join(', ')} not installed (control-plane.sh build installs etcd)`;
  return undefined;
}

/** `control-plane.sh COMMAND DIR`, its stderr in the error when it fails. */
async function runScript(command: string, dir: string): Promise<void> {
  try {
    await run(SCRIPT, [command, dir], { timeout: UP_TIMEOUT_MS, killSignal: 'SIGKILL' });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`control-plane.sh ${command} ${dir} failed: ${stderr.trim() || (error as Error).message}`, { cause: error });
  }
}

function readEnvFile(path: string): Record<string, string> {
  const entries = readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.includes('='))
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)] as const);
  return Object.fromEntries(entries);
}

function tail(path: string, lines: number): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return `(no ${path})`;
  }
}

/**
 * `advertiseAddress`: the `kubernetes` Service's endpoint (default 127.0.0.1); a real Node (node.ts) needs its own.
 * `clusterEgress`: the API server reaches kubelets, pods and Services through the proxy a real Node serves
 * (node.sh), as `kubectl logs` and `exec` need.
 * `audit`: the API server writes an audit log of every write by a service account (`auditLogPath`).
 */
export async function startControlPlane(options: { advertiseAddress?: string; clusterEgress?: boolean; audit?: boolean } = {}): Promise<ControlPlane> {
  const dir = await mkdtemp(join(tmpdir(), 'runlet-control-plane-'));
  const env = {
    ...process.env,
    RUNLET_CONTROL_PLANE_OWNER_PID: String(process.pid),
    ...(options.advertiseAddress === undefined ? {} : { RUNLET_CONTROL_PLANE_ADVERTISE_ADDRESS: options.advertiseAddress }),
    ...(options.clusterEgress === true ? { RUNLET_CONTROL_PLANE_CLUSTER_EGRESS: '1' } : {}),
    RUNLET_CONTROL_PLANE_AUDIT: options.audit === true ? '1' : '0',
  };
  try {
    await run(SCRIPT, ['up', dir], { env, timeout: UP_TIMEOUT_MS, killSignal: 'SIGKILL' });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    await run(SCRIPT, ['down', dir]).catch(() => undefined);
    throw new Error(`control-plane.sh up failed: ${stderr.trim() || (error as Error).message}`, { cause: error });
  }
  const values = readEnvFile(join(dir, 'env'));
  const server = values.RUNLET_CONTROL_PLANE_SERVER!;
  const logs = ['supervisor', 'etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'];
  return {
    dir,
    kubeconfigPath: values.KUBECONFIG!,
    server,
    port: Number(new URL(server).port),
    caFile: values.RUNLET_CONTROL_PLANE_CA!,
    kubectl: values.RUNLET_KUBECTL!,
    auditLogPath: options.audit === true ? join(dir, 'logs/audit.log') : undefined,
    async stopApiServer() {
      await runScript('stop-apiserver', dir);
    },
    async startApiServer() {
      await runScript('start-apiserver', dir);
    },
    diagnostics: () => logs.map((name) => `== ${dir}/logs/${name}.log (last lines)\n${tail(join(dir, 'logs', `${name}.log`), 40)}`).join('\n'),
    async stop() {
      await run(SCRIPT, ['down', dir], { timeout: 60_000 });
    },
  };
}
