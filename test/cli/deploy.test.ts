// `runlet deploy` against the in-memory API server: the whole way to Ready with the operator and the test
// kubelet, and every error that names its fix.
import { cp, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
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

  it('applies the App and its code, shows progress, and exits 0 once Ready', async () => {
    const result = await runCli(['deploy', HELLO, '--namespace', 'demo', '--timeout', '120'], { env: { KUBECONFIG: kubeconfig } });
    if (result.code !== 0) console.error(result.stderr, cluster.diagnostics());
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^applied app demo\/hello and its code \(ConfigMap hello-code\)$/m);
    expect(result.stdout).toMatch(/^Ready: True \(Serving/m);
    expect(result.stdout).toMatch(/^Available: True \(MinimumReplicasAvailable/m);
    expect(result.stdout).toMatch(/^Replicas: 1 ready of 1/m);
    expect(result.stdout).toMatch(/^hello is ready at http:\/\/hello\.demo\.svc\.cluster\.local\/v4\/demo\/hello$/m);
  }, 180_000);

  it('is idempotent: deploying the same folder again is Ready at once', async () => {
    const result = await runCli(['deploy', HELLO, '--namespace', 'demo', '--timeout', '120'], { env: { KUBECONFIG: kubeconfig } });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/hello is ready/);
  }, 180_000);

  it('deploying a change exits once it has rolled out, not while the old replica still serves', async () => {
    const changed = await mkdtemp(join(tmpdir(), 'runlet-deploy-hello-'));
    await cp(HELLO, changed, { recursive: true });
    const toml = join(changed, 'service.toml');
    await writeFile(toml, (await readFile(toml, 'utf8')).replace('replica_concurrency = 4', 'replica_concurrency = 3'));
    const result = await runCli(['deploy', changed, '--namespace', 'demo', '--timeout', '150'], { env: { KUBECONFIG: kubeconfig } });
    if (result.code !== 0) console.error(result.stderr, cluster.diagnostics());
    expect(result.code).toBe(0);
    const deployment = await cluster.kubeConfig.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: 'demo', name: 'hello' });
    expect(deployment.status).toMatchObject({ observedGeneration: deployment.metadata?.generation, replicas: 1, updatedReplicas: 1, availableReplicas: 1 });
  }, 240_000);
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
    expect(result.stderr).toMatch(/not ready after 2 s:\n {2}\(no status yet: is the Runlet operator running\?\)/);
  });
});
