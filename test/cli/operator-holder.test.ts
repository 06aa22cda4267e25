// `runlet operator` starts the scale-to-zero holder by default, as in the chart's pods: it makes the holder key's
// Secret in its namespace, and authenticates callers as the sidecars do, from the sidecars' own variables (here
// RUNLET_AUTH_JWKS_URL, a stand-in for the cluster's service-account issuer). `--holder off` runs without it.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { installCrds } from '../operator/e2e-cluster.ts';
import { startServiceAccountIssuer, type ServiceAccountIssuer } from '../operator/service-account-issuer.ts';
import { startOperatorProcess, type OperatorProcess } from '../support/operator-process.ts';
import { waitFor } from '../support/wait.ts';

/** A process starting on a loaded 2-core machine. */
const START_TIMEOUT_MS = 90_000;

let dir: string | undefined;
let server: KubeApiServer | undefined;
let issuer: ServiceAccountIssuer | undefined;
let operator: OperatorProcess | undefined;

afterEach(async () => {
  await operator?.kill();
  await server?.close();
  await issuer?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  operator = server = issuer = dir = undefined;
});

/** An operator in a "pod" of the in-memory API server: its service account in RUNLET_SERVICE_ACCOUNT_DIR. */
async function startInPod(args: string[], prepare: (server: KubeApiServer) => void = () => {}): Promise<OperatorProcess> {
  dir = await mkdtemp(join(tmpdir(), 'runlet-operator-holder-'));
  server = await startKubeApiServer();
  // The holder answers once the App cache is filled: the CRDs are there, as in a cluster.
  await installCrds(server.kubeConfig());
  issuer = await startServiceAccountIssuer();
  const serviceAccountDir = join(dir, 'serviceaccount');
  await server.writeServiceAccount(serviceAccountDir);
  // As the kubelet writes it, without a newline (see operator-credentials.test.ts).
  await writeFile(join(serviceAccountDir, 'token'), 'operator-token');
  prepare(server);
  operator = startOperatorProcess({
    home: dir,
    env: { ...server.inClusterEnv, RUNLET_SERVICE_ACCOUNT_DIR: serviceAccountDir, RUNLET_IDENTITY: 'holder-test', RUNLET_AUTH_JWKS_URL: issuer.jwksUrl },
    args,
  });
  return operator;
}

/** The fields of the log line that says the operator listens (pino JSON, one object a line). */
async function listening(process: OperatorProcess): Promise<{ address: string; holder?: string }> {
  return waitFor(
    () => {
      const line = process.output().split('\n').find((text) => text.includes('"operator listening"'));
      return line === undefined ? undefined : (JSON.parse(line) as { address: string; holder?: string });
    },
    { what: 'the operator listening', timeoutMs: START_TIMEOUT_MS, intervalMs: 100 },
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; operator output:\n${process.output()}`, { cause: error });
  });
}

describe('runlet operator’s holder', () => {
  it('runs by default: its port answers calls with problems, authenticated as the sidecars authenticate them, and its control key’s Secret is made', async () => {
    const started = await startInPod(['--holder-host', '127.0.0.1', '--holder-port', '0']);
    const { holder } = await listening(started);
    expect(holder).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const call = (token?: string) =>
      fetch(`${holder}/v4/team-a/no-such-app/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
        body: '{}',
      });
    const anonymous = await call();
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('content-type')).toBe('application/problem+json');
    // A token of the issuer the sidecars trust passes; the App does not exist.
    const known = await call(await issuer!.token('team-a'));
    expect(known.status).toBe(404);
    expect(await known.json()).toMatchObject({ type: 'https://runlet.dev/problems#app-not-found', status: 404 });

    const secret = (await (await server!.fetch('/api/v1/namespaces/default/secrets/runlet-holder-control')).json()) as { data?: { key?: string } };
    expect(Buffer.from(secret.data?.key ?? '', 'base64').toString('utf8')).toMatch(/^[0-9a-f]{64}$/);
  }, START_TIMEOUT_MS + 30_000);

  it('--holder off: no holder, and the log says min_replicas = 0 stays at one replica', async () => {
    const started = await startInPod(['--holder', 'off']);
    const fields = await listening(started);
    expect(fields.holder).toBeUndefined();
    expect(started.output()).toContain('the holder is off');
  }, START_TIMEOUT_MS + 30_000);

  it('--holder external: no holder of its own and no token issuer needed; the log names the Service listing the activators', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-operator-holder-'));
    server = await startKubeApiServer();
    await installCrds(server.kubeConfig());
    const kubeconfig = join(dir, 'kubeconfig');
    await server.writeKubeconfig(kubeconfig);
    // Outside a pod: no issuer to trust, which the operator needs only when it holds calls itself.
    operator = startOperatorProcess({ home: dir, env: { KUBECONFIG: kubeconfig, KUBERNETES_SERVICE_HOST: '' }, args: ['--holder', 'external'] });
    const fields = await listening(operator);
    expect(fields.holder).toBeUndefined();
    expect(operator.output()).toContain('held by runlet activator pods');
    expect(operator.output()).toContain('"service":"default/runlet-holder"');
  }, START_TIMEOUT_MS + 30_000);

  it('exits, naming the Secret, when it cannot read its key (a missing permission), rather than run without doing its work', async () => {
    const started = await startInPod(['--holder-host', '127.0.0.1', '--holder-port', '0'], (kube) =>
      kube.failNext({ method: 'GET', pathPattern: '/secrets/runlet-holder-control', status: 403, message: 'secrets "runlet-holder-control" is forbidden' }),
    );
    expect(await started.exited).toBe(1);
    expect(started.output()).toContain('could not start');
    expect(started.output()).toContain('/api/v1/namespaces/default/secrets/runlet-holder-control: 403');
  }, START_TIMEOUT_MS);

  it('refuses to start the holder without a token issuer to trust, naming the options', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-operator-holder-'));
    server = await startKubeApiServer();
    const kubeconfig = join(dir, 'kubeconfig');
    await server.writeKubeconfig(kubeconfig);
    // Outside a pod (a kubeconfig, no KUBERNETES_SERVICE_HOST) nothing says which issuer the sidecars trust.
    operator = startOperatorProcess({ home: dir, env: { KUBECONFIG: kubeconfig, KUBERNETES_SERVICE_HOST: '' } });
    expect(await operator.exited).toBe(2);
    expect(operator.output()).toContain('--auth-jwks-url');
    expect(operator.output()).toContain('--holder off');
  }, START_TIMEOUT_MS);
});
