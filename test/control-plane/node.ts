// A real Node for a control-plane.sh cluster (node.sh): kubelet, kube-proxy, containerd and runc in a network
// namespace of its own, pods on a bridge at 198.18.0.0/24, the images imported from the local engine. The test
// process stays in the machine's namespace: it reaches an address inside (a Service's cluster IP, a pod) through
// a Unix socket that socat, started inside, relays (a path crosses network namespaces), and lets pods reach one
// of its own servers (a webhook receiver listening on a Unix socket) at the node's address the same way.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, fetch as undiciFetch, type RequestInit, type Response } from 'undici';
import { RUNLET_VERSION } from '../../cli/images.ts';
import { waitFor } from '../support/wait.ts';
import { controlPlaneSkipReason, tierKubectlPath, type ControlPlane } from './control-plane.ts';

const SCRIPT = join(import.meta.dirname, 'node.sh');
/** Where pods reach the node (the bridge's address), and the API server's relay: control-plane.sh's advertise address. */
export const NODE_ADDRESS = '198.18.0.1';
export const NODE_NAME = 'runlet-node';
/**
 * How startControlPlane() must start the control plane a real Node joins: the `kubernetes` Service's endpoint at
 * the node's address, and the API server's traffic to kubelets and pods (`kubectl logs`, `exec`) through the
 * Node's egress proxy (node-services.ts).
 */
export const REAL_NODE_CONTROL_PLANE = { advertiseAddress: NODE_ADDRESS, clusterEgress: true } as const;
/** The images `make images` builds (and the chart's PostgreSQL, which it pulls or stands in for), as the kubelet reads their names. */
export const BUILT_IMAGES = { runlet: `runlet/runlet:${RUNLET_VERSION}`, pythonRuntime: `runlet/python-runtime:${RUNLET_VERSION}`, postgres: 'postgres:15-bookworm' } as const;
/** install, containerd's start, the images' export and import (hundreds of MB on a loaded disk), the Node's registration. */
const UP_TIMEOUT_MS = 480_000;
/** Ports inside the namespace for exposed servers: it is the tier's own, nothing else listens there. */
const FIRST_EXPOSED_PORT = 31000;

const run = promisify(execFile);

export interface RealNode {
  /** The network namespace's path (`nsenter --net=<it>`). */
  readonly netnsPath: string;
  /** undici's fetch to an address inside the namespace (`http://10.0.0.17/...`: a Service, a pod), through a relay. */
  fetchInside(url: string, init?: RequestInit): Promise<Response>;
  /** Makes a server of this process listening on `socketPath` reachable by pods at `http://198.18.0.1:<port>`. */
  exposeToPods(socketPath: string): Promise<number>;
  /** The host process ids of a container's processes (for a test that kills one, as a crash would). */
  containerPids(podUid: string, container: string): Promise<number[]>;
  diagnostics(): string;
  stop(): Promise<void>;
}

function onPath(tool: string, env: NodeJS.ProcessEnv): boolean {
  return (env.PATH ?? '').split(':').some((dir) => existsSync(join(dir, tool)));
}

/**
 * Why a real Node cannot run here, or undefined when it can: the control plane and kubelet are built, the
 * machine is Linux and this process is root (network namespaces, mounts), the images are built (`make images`),
 * and what node.sh installs is there (`make test-cluster` installs it).
 */
export function realNodeSkipReason(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const controlPlane = controlPlaneSkipReason(env);
  if (controlPlane !== undefined) return controlPlane;
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'a real kubelet needs Linux and root (network namespaces, mounts, containerd)';
  const unbuilt = ['kubelet', 'kube-proxy'].filter((name) => !existsSync(join(dirname(tierKubectlPath(env)), name)));
  if (unbuilt.length > 0) return `${unbuilt.join(', ')} not built: run \`make test-cluster\` (control-plane.sh build)`;
  const tools = ['containerd', 'ctr', 'runc', 'socat', 'nsenter', 'ip', 'iptables', 'podman'];
  const absent = tools.filter((tool) => !onPath(tool, env));
  if (absent.length > 0) return `${absent.join(', ')} not installed: run \`make test-cluster\` (node.sh install)`;
  if (!existsSync('/usr/lib/cni/bridge')) return 'the CNI plugins are not installed (containernetworking-plugins): run `make test-cluster`';
  const missing = Object.values(BUILT_IMAGES).filter((image) => !podmanHas(image));
  if (missing.length > 0) return `the images ${missing.join(', ')} are not built: run \`make images\``;
  return undefined;
}

function podmanHas(image: string): boolean {
  try {
    execFileSync('podman', ['image', 'exists', image], { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
}

function tail(path: string, lines: number): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return `(no ${path})`;
  }
}

/** The kubelet's logs of this node's containers: /var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log. */
function containerLogs(podsDir: string): string[] {
  const uids = new Set(existsSync(podsDir) ? readdirSync(podsDir) : []);
  const root = '/var/log/pods';
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((pod) => uids.has(pod.slice(pod.lastIndexOf('_') + 1)))
    .flatMap((pod) => readdirSync(join(root, pod)).flatMap((container) => readdirSync(join(root, pod, container)).map((file) => join(root, pod, container, file))));
}

export async function startRealNode(controlPlane: ControlPlane, images: readonly string[] = Object.values(BUILT_IMAGES)): Promise<RealNode> {
  // RUNLET_NODE: the Node 24 running this, for node-services.ts.
  const env = { ...process.env, RUNLET_CONTROL_PLANE_OWNER_PID: String(process.pid), RUNLET_NODE: process.execPath };
  const nodeDir = join(controlPlane.dir, 'node');
  let netnsPath: string;
  try {
    const { stdout } = await run(SCRIPT, ['up', controlPlane.dir, ...images], { env, timeout: UP_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 });
    netnsPath = stdout.trim().split('\n').at(-1)!;
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    await run(SCRIPT, ['down', controlPlane.dir]).catch(() => undefined);
    throw new Error(`node.sh up failed: ${stderr.trim().split('\n').slice(-20).join('\n') || (error as Error).message}`, { cause: error });
  }

  const relays: ChildProcess[] = [];
  const relay = async (socketPath: string, args: string[]) => {
    const child = spawn('nsenter', [`--net=${netnsPath}`, 'socat', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
    relays.push(child);
    await waitFor(async () => existsSync(socketPath) || child.exitCode !== null, { what: `socat ${args.join(' ')}`, timeoutMs: 10_000, intervalMs: 20 });
    if (child.exitCode !== null) throw new Error(`socat ${args.join(' ')} exited ${child.exitCode}: ${stderr}`);
  };
  const agents = new Map<string, Agent>();
  let nextPort = FIRST_EXPOSED_PORT;

  return {
    netnsPath,
    async fetchInside(url, init) {
      const { hostname, port, protocol } = new URL(url);
      const target = `${hostname}:${port || (protocol === 'https:' ? 443 : 80)}`;
      let agent = agents.get(target);
      if (agent === undefined) {
        const socketPath = join(nodeDir, `to-${target.replaceAll(':', '-')}.sock`);
        await relay(socketPath, [`UNIX-LISTEN:${socketPath},fork,unlink-early`, `TCP:${target}`]);
        // One connection per call (pipelining 0: no keep-alive). Reusing them once got "other side closed" on an
        // async call, 2 of 5 runs, on a connection that had carried only the sync call before it (its 329 bytes
        // read are that answer) and sat idle while the pool sent a stream on a second one. The sidecar keeps
        // such connections, with either store, on the loopback and through a relay like this one
        // (test/cli/sidecar-keep-alive.test.ts), and 40 rounds reusing them through this relay and kube-proxy
        // passed: the cause is not found, so each call keeps a connection of its own, which keeps what this
        // tier proves (pods, probes, Services) apart from it.
        agent = new Agent({ connect: { socketPath }, pipelining: 0 });
        agents.set(target, agent);
      }
      return undiciFetch(url, { ...init, dispatcher: agent });
    },
    async exposeToPods(socketPath) {
      const port = nextPort++;
      const child = spawn('nsenter', [`--net=${netnsPath}`, 'socat', `TCP-LISTEN:${port},bind=${NODE_ADDRESS},fork,reuseaddr`, `UNIX-CONNECT:${socketPath}`], {
        stdio: 'ignore',
      });
      relays.push(child);
      // Listening once a connection inside the namespace is accepted.
      await waitFor(
        async () => {
          if (child.exitCode !== null) throw new Error(`socat exposing ${socketPath} at ${NODE_ADDRESS}:${port} exited ${child.exitCode}`);
          const probe = await run('nsenter', [`--net=${netnsPath}`, 'socat', '-u', 'OPEN:/dev/null', `TCP:${NODE_ADDRESS}:${port}`]).then(
            () => true,
            () => false,
          );
          return probe;
        },
        { what: `${socketPath} exposed at ${NODE_ADDRESS}:${port}`, timeoutMs: 10_000, intervalMs: 50 },
      );
      return port;
    },
    async containerPids(podUid, container) {
      const ctr = ['--address', join(nodeDir, 'containerd.sock'), '-n', 'k8s.io'];
      const { stdout } = await run('ctr', [...ctr, 'containers', 'ls', '--quiet', `labels."io.kubernetes.pod.uid"==${podUid},labels."io.kubernetes.container.name"==${container}`]);
      const pids: number[] = [];
      for (const id of stdout.split('\n').filter(Boolean)) {
        const tasks = await run('ctr', [...ctr, 'tasks', 'ps', id]).catch(() => ({ stdout: '' }));
        pids.push(...tasks.stdout.split('\n').slice(1).map((line) => Number(line.trim().split(/\s+/)[0])).filter((pid) => Number.isInteger(pid) && pid > 0));
      }
      return pids;
    },
    diagnostics: () =>
      [
        ...['supervisor', 'kubelet', 'containerd', 'kube-proxy', 'node-services', 'relay'].map((name) => join(nodeDir, 'logs', `${name}.log`)),
        ...containerLogs(join(nodeDir, 'kubelet/pods')),
      ]
        .map((path) => `== ${path} (last lines)\n${tail(path, 40)}`)
        .join('\n'),
    async stop() {
      for (const agent of agents.values()) await agent.close();
      for (const child of relays) if (child.exitCode === null) child.kill('SIGKILL');
      await run(SCRIPT, ['down', controlPlane.dir], { timeout: 120_000 });
    },
  };
}
