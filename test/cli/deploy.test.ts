// `runlet deploy` against the in-memory API server: the whole way to Available with the operator and the test
// kubelet, and every error that names its fix.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { installCrds } from '../operator/e2e-cluster.ts';
import { startLocalCluster } from '../operator/local-cluster.ts';
import type { E2eCluster } from '../operator/e2e-cluster.ts';
import { runCli } from '../support/cli.ts';

const HELLO = resolve(import.meta.dirname, '../../examples/hello');

async function kubeconfigFile(contents: string): Promise<string> {
  const path = join(await mkdtemp(join(tmpdir(), 'runlet-deploy-')), 'kubeconfig');
  await writeFile(path, contents);
  return path;
}

describe('runlet deploy on a cluster with the operator', () => {
  let cluster: E2eCluster;
  let kubeconfig: string;
  beforeAll(async () => {
    cluster = await startLocalCluster();
    kubeconfig = await kubeconfigFile(cluster.kubeConfig.exportConfig());
    await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'demo' } } });
  }, 120_000);
  afterAll(async () => cluster?.close());

  it('applies the App and its code, shows progress, and exits 0 once Available', async () => {
    const result = await runCli(['deploy', HELLO, '--namespace', 'demo', '--timeout', '120'], { env: { KUBECONFIG: kubeconfig } });
    if (result.code !== 0) console.error(result.stderr, cluster.diagnostics());
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^applied app demo\/hello and its code \(ConfigMap hello-code\)$/m);
    expect(result.stdout).toMatch(/^Ready: True/m);
    expect(result.stdout).toMatch(/^Available: True \(MinimumReplicasAvailable/m);
    expect(result.stdout).toMatch(/^hello is available at http:\/\/hello\.demo\.svc\.cluster\.local\/v4\/demo\/hello$/m);
  }, 180_000);

  it('is idempotent: deploying the same folder again is Available at once', async () => {
    const result = await runCli(['deploy', HELLO, '--namespace', 'demo', '--timeout', '120'], { env: { KUBECONFIG: kubeconfig } });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/hello is available/);
  }, 180_000);
});

describe('runlet deploy errors name the fix', () => {
  let server: KubeApiServer;
  beforeAll(async () => {
    server = await startKubeApiServer();
  });
  afterAll(async () => server?.close());

  it('no kube context', async () => {
    const result = await runCli(['deploy', HELLO], { env: { KUBECONFIG: await kubeconfigFile('apiVersion: v1\nkind: Config\n') } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/no Kubernetes context: set KUBECONFIG, or choose one with kubectl config use-context/);
  });

  it('Runlet not installed (no App CRD)', async () => {
    const path = join(await mkdtemp(join(tmpdir(), 'runlet-deploy-')), 'kubeconfig');
    await server.writeKubeconfig(path);
    const result = await runCli(['deploy', HELLO], { env: { KUBECONFIG: path } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/does not know Apps.*helm install runlet charts\/runlet/);
  });

  it('no operator answering: times out listing the conditions it has', async () => {
    await installCrds(server.kubeConfig());
    const path = join(await mkdtemp(join(tmpdir(), 'runlet-deploy-')), 'kubeconfig');
    await server.writeKubeconfig(path);
    const result = await runCli(['deploy', HELLO, '--timeout', '2'], { env: { KUBECONFIG: path } });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/applied app default\/hello/);
    expect(result.stderr).toMatch(/not available after 2 s:\n {2}\(no status yet: is the Runlet operator running\?\)/);
  });
});
