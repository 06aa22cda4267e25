// `runlet operator` as a process finds the API server as the sidecar does (kube/load-credentials.ts): in a pod
// from the service account mounted in RUNLET_SERVICE_ACCOUNT_DIR (where the test kubelet puts it), and with no
// credentials at all it says so and exits, instead of calling http://localhost:8080 for ever.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { startOperatorProcess, type OperatorProcess } from '../support/operator-process.ts';
import { waitFor } from '../support/wait.ts';

/** A process starting on a loaded 2-core machine, then electing itself. */
const START_TIMEOUT_MS = 90_000;

let dir: string | undefined;
let server: KubeApiServer | undefined;
let operator: OperatorProcess | undefined;

afterEach(async () => {
  await operator?.kill();
  operator = undefined;
  await server?.close();
  server = undefined;
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/** The operator with `env` and no kubeconfig to find; its holder on an ephemeral loopback port. */
function startOperator(home: string, env: Record<string, string>) {
  operator = startOperatorProcess({ home, env: { RUNLET_IDENTITY: 'credentials-test', ...env }, args: ['--holder-host', '127.0.0.1', '--holder-port', '0'] });
  return operator;
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
