// `runlet activator`: the holder of calls to Apps at zero as a process of its own, in a "pod" of the in-memory
// API server. It watches Apps itself, waits for the holder key's Secret (the operator's to make), authenticates callers as the sidecars do
// (RUNLET_AUTH_JWKS_URL: a stand-in for the cluster's service-account issuer), wakes an App it holds a call
// for, and serves its own health, readiness and metrics; on SIGTERM it stops being ready before it closes.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import { ensureHolderKey } from '../../operator/autoscaling/holder-key.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { installCrds } from '../operator/e2e-cluster.ts';
import { startServiceAccountIssuer, type ServiceAccountIssuer } from '../operator/service-account-issuer.ts';
import { startRunletProcess, type OperatorProcess } from '../support/operator-process.ts';
import { pythonSpec } from '../support/operator-apps.ts';
import { waitFor } from '../support/wait.ts';
import { kubePathOf } from '../support/kube-path.ts';

/** A process starting on a loaded 2-core machine. */
const START_TIMEOUT_MS = 90_000;
const DEPLOYMENTS = '/apis/apps/v1/namespaces/team-a/deployments';
const APPS = '/apis/runlet.dev/v1alpha1/namespaces/team-a/apps';
/** The holder key's Secret, in the activator's namespace (POD_NAMESPACE, else default), as the operator makes it. */
const KEY_SECRET = { namespace: 'default', name: 'runlet-holder-control' };

let dir: string | undefined;
let server: KubeApiServer | undefined;
let api: KubeApi | undefined;
let issuer: ServiceAccountIssuer | undefined;
let activator: OperatorProcess | undefined;

afterEach(async () => {
  await activator?.kill();
  await api?.close();
  await server?.close();
  await issuer?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  activator = api = server = issuer = dir = undefined;
});

/**
 * An activator in a "pod" of the in-memory API server: its service account in RUNLET_SERVICE_ACCOUNT_DIR; the
 * holder key made first, as the operator makes it, unless `withKey` is false.
 */
async function startInPod(args: string[] = [], withKey = true): Promise<OperatorProcess> {
  dir = await mkdtemp(join(tmpdir(), 'runlet-activator-'));
  // With the namespace of its held calls (`--held-namespace`'s default, the key namespace's name + -held).
  server = await startKubeApiServer({ namespaces: ['default', 'default-held', 'team-a'] });
  // The holder answers once the App cache is filled: the CRDs are there, as in a cluster.
  await installCrds(server.kubeConfig());
  api = new KubeApi(await server.credentials());
  if (withKey) await ensureHolderKey(api, KEY_SECRET);
  issuer = await startServiceAccountIssuer();
  const serviceAccountDir = join(dir, 'serviceaccount');
  await server.writeServiceAccount(serviceAccountDir);
  await writeFile(join(serviceAccountDir, 'token'), 'activator-token');
  activator = startRunletProcess('activator', {
    home: dir,
    env: { ...server.inClusterEnv, RUNLET_SERVICE_ACCOUNT_DIR: serviceAccountDir, RUNLET_IDENTITY: 'activator-test', RUNLET_AUTH_JWKS_URL: issuer.jwksUrl },
    args: ['--host', '127.0.0.1', '--port', '0', '--admin-host', '127.0.0.1', '--admin-port', '0', ...args],
  });
  return activator;
}

/** The fields of the log line that says the activator listens (pino JSON, one object a line). */
async function listening(process: OperatorProcess): Promise<{ url: string; adminUrl: string }> {
  return waitFor(
    () => {
      const line = process.output().split('\n').find((text) => text.includes('"activator listening"'));
      return line === undefined ? undefined : (JSON.parse(line) as { url: string; adminUrl: string });
    },
    { what: 'the activator listening', timeoutMs: START_TIMEOUT_MS, intervalMs: 100 },
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; activator output:\n${process.output()}`, { cause: error });
  });
}

const readiness = async (adminUrl: string): Promise<number> => (await fetch(`${adminUrl}/ready`)).status;

/** An App at zero whose pod never becomes ready: a held sync call ends at its one-second cold-start limit. */
async function appAtZero(name: string): Promise<void> {
  const labels = { app: name };
  await api!.create(kubePathOf(DEPLOYMENTS), {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas: 0, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
  } as KubeObject);
  await api!.create(kubePathOf(APPS), {
    apiVersion: 'runlet.dev/v1alpha1',
    kind: 'App',
    metadata: { name },
    spec: pythonSpec({ scaling: { minReplicas: 0, maxReplicas: 2, coldStartTimeout: 1 } }),
  } as KubeObject);
}

describe('runlet activator', () => {
  it('waits for the holder key the operator makes, making none itself; then holds a call to an App at zero in a process of its own: authenticated, the App woken, counted in its own metrics', async () => {
    const started = await startInPod([], false);
    await waitFor(() => started.output().includes('waiting for the operator to make the control key'), { what: 'the activator waiting for the key', timeoutMs: START_TIMEOUT_MS });
    expect(await api!.find(kubePathOf(`/api/v1/namespaces/${KEY_SECRET.namespace}/secrets/${KEY_SECRET.name}`)), 'no key made by the activator').toBeUndefined();
    const key = await ensureHolderKey(api!, KEY_SECRET);
    const { url, adminUrl } = await listening(started);
    await appAtZero('hello');
    await waitFor(async () => (await readiness(adminUrl)) === 200, { what: 'the activator ready', timeoutMs: START_TIMEOUT_MS });

    const call = (app: string, token?: string) =>
      fetch(`${url}/v4/team-a/${app}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
        body: '{}',
      });
    const anonymous = await call('hello');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('content-type')).toBe('application/problem+json');

    const held = await call('hello', await issuer!.token('team-a'));
    expect(held.status, 'held, then past its cold-start limit').toBe(503);
    expect(held.headers.get('retry-after')).toBe('5');
    expect(await held.json()).toMatchObject({ type: 'https://runlet.dev/problems#cold-start-timeout' });
    const deployment = await api!.get<KubeObject & { spec: { replicas: number } }>(kubePathOf(`${DEPLOYMENTS}/hello`));
    expect(deployment.spec.replicas, 'woken').toBe(1);

    const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
    expect(metrics).toContain('runlet_holder_calls_total{namespace="team-a",app="hello",mode="sync",outcome="timed_out"} 1');
    // The activator made no Secret: the key is the one made for it, and its only request on Secrets was a read.
    const secret = await api!.get<KubeObject & { data?: { key?: string } }>(kubePathOf(`/api/v1/namespaces/${KEY_SECRET.namespace}/secrets/${KEY_SECRET.name}`));
    expect(Buffer.from(secret.data?.key ?? '', 'base64').toString('utf8')).toBe(Buffer.from(key).toString('hex'));
    const activatorSecretWrites = server!.requests.filter((request) => request.token === 'activator-token' && request.method !== 'GET' && request.path.startsWith(`/api/v1/namespaces/${KEY_SECRET.namespace}/secrets`));
    expect(activatorSecretWrites).toEqual([]);
  }, START_TIMEOUT_MS + 30_000);

  it('on SIGTERM answers /ready with 503 for its drain, then closes and exits 0', async () => {
    const started = await startInPod(['--drain-seconds', '2']);
    const { adminUrl } = await listening(started);
    await waitFor(async () => (await readiness(adminUrl)) === 200, { what: 'the activator ready', timeoutMs: START_TIMEOUT_MS });

    started.child.kill('SIGTERM');
    await waitFor(async () => (await readiness(adminUrl)) === 503, { what: '/ready saying 503 while it drains', timeoutMs: 10_000 });
    expect(await started.exited).toBe(0);
    expect(started.output()).toContain('activator stopped');
  }, START_TIMEOUT_MS + 30_000);

  it('refuses to start without a token issuer to trust, naming the options', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-activator-'));
    server = await startKubeApiServer();
    const kubeconfig = join(dir, 'kubeconfig');
    await server.writeKubeconfig(kubeconfig);
    // Outside a pod (a kubeconfig, no KUBERNETES_SERVICE_HOST) nothing says which issuer the sidecars trust.
    activator = startRunletProcess('activator', { home: dir, env: { KUBECONFIG: kubeconfig, KUBERNETES_SERVICE_HOST: '' } });
    expect(await activator.exited).toBe(2);
    expect(activator.output()).toContain('--auth-jwks-url');
  }, START_TIMEOUT_MS);

  it('refuses a bound of held calls that is not a whole number above 0, naming the flag', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-activator-'));
    activator = startRunletProcess('activator', { home: dir, env: {}, args: ['--max-calls-per-app', '0'] });
    expect(await activator.exited).toBe(2);
    expect(activator.output()).toContain('--max-calls-per-app must be a whole number');
  }, START_TIMEOUT_MS);

  it('refuses a share per namespace larger than the bound of all held calls, naming both flags', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-activator-'));
    activator = startRunletProcess('activator', { home: dir, env: {}, args: ['--max-calls', '10', '--max-calls-per-namespace', '11'] });
    expect(await activator.exited).toBe(2);
    expect(activator.output()).toContain('--max-calls-per-namespace (11) must be at most --max-calls (10)');
  }, START_TIMEOUT_MS);

  it('refuses to keep held calls in the key’s namespace, whose other Secrets the right to list them would reach, naming the flag', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-activator-'));
    activator = startRunletProcess('activator', { home: dir, env: {}, args: ['--key-namespace', 'runlet-system', '--held-namespace', 'runlet-system'] });
    expect(await activator.exited).toBe(2);
    expect(activator.output()).toContain('--held-namespace must be a namespace of its own, not the key');
  }, START_TIMEOUT_MS);

  it('refuses a held calls’ namespace that is no namespace name, naming the flag', async () => {
    dir = await mkdtemp(join(tmpdir(), 'runlet-activator-'));
    activator = startRunletProcess('activator', { home: dir, env: {}, args: ['--held-namespace', 'Runlet_Held'] });
    expect(await activator.exited).toBe(2);
    expect(activator.output()).toContain('--held-namespace must be a namespace name');
  }, START_TIMEOUT_MS);
});
