// `runlet operator` as a process finds the API server as the sidecar does (kube/load-credentials.ts): in a pod
// from the service account mounted in RUNLET_SERVICE_ACCOUNT_DIR (where the test kubelet puts it), and with no
// credentials at all it says so and exits, instead of calling http://localhost:8080 for ever.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { waitFor } from '../support/wait.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');
const ARGS = ['--sidecar-image', 'runlet/runlet:test', '--python-runtime-image', 'runlet/python-runtime:test', '--host', '127.0.0.1', '--port', '0', '--leader-election-namespace', 'default'];
/** A process starting on a loaded 2-core machine, then electing itself. */
const START_TIMEOUT_MS = 90_000;

let dir: string | undefined;
let server: KubeApiServer | undefined;
let operator: ChildProcess | undefined;

afterEach(async () => {
  if (operator !== undefined && operator.exitCode === null && operator.signalCode === null) {
    const exited = new Promise((resolveExit) => operator!.once('exit', resolveExit));
    operator.kill('SIGKILL');
    await exited;
  }
  operator = undefined;
  await server?.close();
  server = undefined;
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/** The operator with `env` and no kubeconfig to find (KUBECONFIG empty, HOME an empty folder). */
function startOperator(home: string, env: Record<string, string>) {
  operator = spawn(process.execPath, [CLI, 'operator', ...ARGS], {
    env: { ...process.env, KUBECONFIG: '', HOME: home, RUNLET_IDENTITY: 'credentials-test', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  operator.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  operator.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolveExit) => operator!.once('exit', resolveExit));
  return { output: () => output, exited };
}

describe('runlet operator credentials', () => {
  it('reaches the API server with the service account of RUNLET_SERVICE_ACCOUNT_DIR and takes the lease', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-operator-credentials-'));
    server = await startKubeApiServer();
    const serviceAccountDir = join(dir, 'serviceaccount');
    await server.writeServiceAccount(serviceAccountDir);
    // As the kubelet writes it, without a newline: client-node, which the operator's watches use, sends the
    // token file as it is.
    await writeFile(join(serviceAccountDir, 'token'), 'operator-token');
    const { output } = startOperator(dir, { ...server.inClusterEnv, RUNLET_SERVICE_ACCOUNT_DIR: serviceAccountDir });

    const lease = await waitFor(
      async () => {
        const response = await server!.fetch('/apis/coordination.k8s.io/v1/namespaces/default/leases/runlet-operator');
        return response.ok && ((await response.json()) as { spec?: { holderIdentity?: string } });
      },
      { what: 'the operator holding its Lease', timeoutMs: START_TIMEOUT_MS, intervalMs: 100 },
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; operator output:\n${output()}`, { cause: error });
    });
    expect(lease.spec?.holderIdentity).toBe('credentials-test');
  }, START_TIMEOUT_MS + 30_000);

  it('exits at start, naming where it looked, when no credentials are found', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-operator-credentials-'));
    const { output, exited } = startOperator(dir, { RUNLET_SERVICE_ACCOUNT_DIR: join(dir, 'serviceaccount') });
    expect(await exited).toBe(1);
    expect(output()).toContain('no Kubernetes API credentials');
    expect(output()).toContain(join(dir, 'serviceaccount', 'token'));
  }, START_TIMEOUT_MS);
});
