// `runlet sidecar --run-store runlog` as a process against the in-memory API server: reaching it as in a pod
// (service-account CA and token, KUBERNETES_SERVICE_HOST/_PORT), it records runs in its pod's RunLog without
// loading @kubernetes/client-node (~46 MB of RSS); with a kubeconfig, client-node reads it and runs its plugins. An async run it answered from its journal while the
// API server refused every write survives the sidecar being killed: the next sidecar on the same data dir
// records it. A data dir it cannot write fails its start.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { APP_NAME, NAMESPACE, POD_NAME, startCluster, type Cluster } from '../support/runlog-store-kit.ts';
import { freePort } from '../support/custom-app.ts';
import { FIXTURE_APPS } from '../support/dev-server.ts';
import { expectDrainRefusedToAll } from '../support/admin-drain.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { WEBHOOK_SIGNATURE_HEADER } from '../../sidecar/webhook/sign.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubePathOf } from '../support/kube-path.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');
const RECORD_MODULES = resolve(import.meta.dirname, '../support/record-modules.ts');
const CLIENT_NODE = /\/node_modules\/@kubernetes\/client-node\//;
/** What a sidecar without webhooks, auth or custom apps never needs (each is megabytes of RSS): loaded on use. */
const LOADED_ON_USE = /\/node_modules\/(undici|jose|fastify|@fastify\/swagger|pino-pretty|yaml)\//;

let dir: string | undefined;
let cluster: Cluster | undefined;
/** Processes a test started: sidecars and the app they front. */
const children: ChildProcess[] = [];

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolveExit) => child.once('exit', resolveExit));
  child.kill('SIGKILL');
  await exited;
}

afterEach(async () => {
  for (const child of children.splice(0)) await kill(child);
  await cluster?.server.close();
  cluster = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** What a pod's sidecar finds: the service account mounted (here in `dir`), the API server's address, no kubeconfig. */
async function inPod(running: Cluster, folder: string): Promise<Record<string, string>> {
  const serviceAccountDir = join(folder, 'serviceaccount');
  await running.server.writeServiceAccount(serviceAccountDir);
  return { ...running.server.inClusterEnv, RUNLET_SERVICE_ACCOUNT_DIR: serviceAccountDir, KUBECONFIG: '', HOME: folder };
}

/** KUBECONFIG pointing at the API server, the kubeconfig changed by `edit`. */
async function withKubeconfig(running: Cluster, folder: string, edit: (kubeconfig: KubeconfigDocument) => void): Promise<Record<string, string>> {
  const kubeconfig = join(folder, 'kubeconfig');
  await running.server.writeKubeconfig(kubeconfig);
  const document = parse(readFileSync(kubeconfig, 'utf8')) as KubeconfigDocument;
  edit(document);
  writeFileSync(kubeconfig, JSON.stringify(document));
  return { KUBECONFIG: kubeconfig };
}

/**
 * Starts the sidecar reaching the API server as in a pod, or through a kubeconfig changed by `edit`, waits until
 * it has created its RunLog, stops it, and returns the URLs of the modules it loaded.
 */
async function modulesOfSidecar(edit?: (kubeconfig: KubeconfigDocument) => void): Promise<string[]> {
  dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-runlog-'));
  cluster = await startCluster();
  const access = edit === undefined ? await inPod(cluster, dir) : await withKubeconfig(cluster, dir, edit);
  const moduleLog = join(dir, 'modules.log');

  const { child, output: outputOf, exited } = startSidecar(
    [
      // No runtime is needed: the RunLog is written at startup, whether or not the app is ready.
      '--app-port', '9', '--port', '0', '--admin-port', '0', '--data-dir', join(dir, 'data'),
    ],
    { ...access, RUNLET_TEST_MODULE_LOG: moduleLog },
    ['--import', RECORD_MODULES],
  );

  const running = cluster;
  try {
    await waitFor(async () => child.exitCode === null && outputOf().includes('sidecar listening') && (await running.readRunLog()) !== undefined, {
      what: 'the sidecar to listen and create its RunLog',
    });
  } catch (error) {
    throw new Error(`${(error as Error).message}; the sidecar's output:\n${outputOf()}`, { cause: error });
  }
  child.kill('SIGTERM');
  // Bounded by the test's timeout; the store's close is bounded by its own.
  expect(await exited, outputOf()).toBe(0);
  return readFileSync(moduleLog, 'utf8').split('\n').filter(Boolean);
}

interface KubeconfigDocument {
  users: { name: string; user: Record<string, unknown> }[];
}

interface StartedSidecar {
  child: ChildProcess;
  /** What it printed so far, stdout and stderr. */
  output: () => string;
  exited: Promise<number | null>;
}

/** `runlet sidecar --run-store runlog` for the test pod of app `hello`, caller auth off, with `args`. */
function startSidecar(args: string[], env: Record<string, string>, nodeArgs: string[] = []): StartedSidecar {
  const child = spawn(
    process.execPath,
    [...nodeArgs, CLI, 'sidecar', '--project', NAMESPACE, '--app', APP_NAME, '--replica', POD_NAME, '--run-store', 'runlog', '--auth', 'off', ...args],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', resolveExit));
  return { child, output: () => output, exited };
}

/** The fixture custom-runtime app (it echoes what it is sent) on a free port. */
async function startApp(): Promise<number> {
  const port = await freePort();
  const app = spawn(process.execPath, [join(FIXTURE_APPS, 'custom/server.mjs')], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
  children.push(app);
  return port;
}

/** A sidecar in front of the app on `appPort`, its journal in `dataDir`, once it is ready to take runs. */
async function readySidecar(appPort: number, dataDir: string, access: Record<string, string>, args: string[] = []): Promise<{ sidecar: StartedSidecar; runUrl: string; adminUrl: string }> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const sidecar = startSidecar(
    ['--runtime', 'custom', '--app-port', String(appPort), '--ready-path', '/ready', '--port', String(port), '--admin-port', String(adminPort), '--data-dir', dataDir, ...args],
    access,
  );
  try {
    await waitFor(async () => sidecar.child.exitCode === null && (await fetch(`http://127.0.0.1:${adminPort}/ready`).then((response) => response.ok, () => false)), {
      what: 'the sidecar to be ready',
    });
  } catch (error) {
    throw new Error(`${(error as Error).message}; the sidecar's output:\n${sidecar.output()}`, { cause: error });
  }
  return { sidecar, runUrl: `http://127.0.0.1:${port}/v4/${NAMESPACE}/${APP_NAME}/run`, adminUrl: `http://127.0.0.1:${adminPort}` };
}

describe('runlet sidecar --run-store runlog', () => {
  it('writes its RunLog in a pod without loading @kubernetes/client-node, nor undici, jose, fastify, pino-pretty or the YAML parser', async () => {
    const modules = await modulesOfSidecar();
    // The list is of this run's modules: it holds the credentials path the RunLog was written with.
    expect(modules.some((url) => url.endsWith('/kube/in-cluster.ts'))).toBe(true);
    expect(modules.filter((url) => CLIENT_NODE.test(url))).toEqual([]);
    expect(modules.filter((url) => LOADED_ON_USE.test(url))).toEqual([]);
  });

  it('loads client-node for a kubeconfig user with an exec plugin, and still writes its RunLog', async () => {
    const credential = { apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential', status: { token: 'from-plugin' } };
    const modules = await modulesOfSidecar((kubeconfig) => {
      kubeconfig.users[0]!.user = {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1beta1',
          command: process.execPath,
          args: ['-e', `process.stdout.write(${JSON.stringify(JSON.stringify(credential))})`],
        },
      };
    });
    expect(modules.some((url) => CLIENT_NODE.test(url))).toBe(true);
  });

  it('answers an async run from its journal while writes fail; killed, its next sidecar records the run as replica_lost', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-runlog-'));
    cluster = await startCluster();
    const access = await inPod(cluster, dir);
    const dataDir = join(dir, 'data');
    const appPort = await startApp();
    const first = await readySidecar(appPort, dataDir, access);
    const running = cluster;
    // Its first load report written too: an idle sidecar writes nothing more, so the refused write below is the
    // async run's own (a pending write failing first would have async runs refused from the start).
    await waitFor(async () => (await running.readRunLog())?.status?.load !== undefined, { what: 'the sidecar to create its RunLog and report its load' });

    cluster.server.pause('refuse');
    const accepted = await fetch(`${first.runUrl}?async=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(accepted.status, first.sidecar.output()).toBe(202);
    const { run_id: runId } = (await accepted.json()) as { run_id: string };
    // Its RunLog write fails; later async runs are refused until one succeeds.
    await waitFor(
      async () => {
        const response = await fetch(`${first.runUrl}?async=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        await response.body?.cancel();
        return response.status === 503;
      },
      { what: 'async runs to be refused while the RunLog cannot be written' },
    );
    // Not only a metric: the log says why calls are refused.
    await waitFor(() => first.sidecar.output().includes('the run store could not record an async call'), { what: 'the refusal logged with its cause' });
    await kill(first.sidecar.child);
    cluster.server.resume();

    await readySidecar(appPort, dataDir, access);
    const run = await waitFor(async () => (await running.readRunLog())?.status?.runs?.find((candidate) => candidate.id === runId), {
      what: 'the journaled run in the RunLog',
    });
    expect(run).toMatchObject({ status: 'failure', reason: 'replica_lost', async: true });
  });

  it('with caller auth on, fetches the token issuer’s key set at start, before any call comes', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-runlog-'));
    cluster = await startCluster();
    const access = await inPod(cluster, dir);
    let keySetFetches = 0;
    const issuer = createServer((request, response) => {
      if (request.url === '/openid/v1/jwks') keySetFetches += 1;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}');
    });
    await new Promise<void>((listening) => issuer.listen(0, '127.0.0.1', listening));
    try {
      const jwksUrl = `http://127.0.0.1:${(issuer.address() as AddressInfo).port}/openid/v1/jwks`;
      // No runtime listens: the fetch is the sidecar's own doing, not a call's.
      const { output } = startSidecar(['--app-port', '9', '--port', '0', '--admin-port', '0', '--data-dir', join(dir, 'data'), '--auth', 'on'], {
        ...access,
        RUNLET_AUTH_JWKS_URL: jwksUrl,
      });
      await waitFor(() => keySetFetches > 0, { what: 'the key set fetched before any call' }).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}; the sidecar's output:\n${output()}`, { cause: error });
      });
    } finally {
      await new Promise((closed) => issuer.close(closed));
    }
  });

  it("killed with an async run in flight, its next sidecar delivers the run's failure to its webhook, unsigned", async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-runlog-'));
    cluster = await startCluster();
    const access = await inPod(cluster, dir);
    const dataDir = join(dir, 'data');
    const appPort = await startApp();
    const receiver = await WebhookReceiver.start();
    const webhookArgs = ['--webhook-allow-cidrs', '127.0.0.0/8'];
    try {
      const first = await readySidecar(appPort, dataDir, access, webhookArgs);
      const endpoint = encodeURIComponent(receiver.at('/hooks/in?token=s3cr3t').href);
      // `/endless` never ends: the run is still running when the sidecar is killed.
      const accepted = await fetch(`${first.runUrl.replace(/\/run$/, '/endless')}?async=true&webhookEndpoint=${endpoint}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-webhook-secret': 'the-secret' },
        body: '{}',
      });
      expect(accepted.status, first.sidecar.output()).toBe(202);
      const { run_id: runId } = (await accepted.json()) as { run_id: string };
      const running = cluster;
      // Replicated to the RunLog (so the journal let go of it), without the query string.
      const inFlight = await waitFor(async () => {
        const run = (await running.readRunLog())?.status?.runs?.find((candidate) => candidate.id === runId);
        return run?.status === 'running' ? run : undefined;
      }, { what: 'the run to be recorded running in the RunLog' });
      expect(inFlight.webhook).toMatchObject({ endpoint: receiver.at('/hooks/in').href, state: 'pending' });
      await kill(first.sidecar.child);
      expect(receiver.deliveries).toHaveLength(0);

      await readySidecar(appPort, dataDir, access, webhookArgs);
      await receiver.received(1);
      const delivery = receiver.deliveries[0]!;
      expect(delivery.path).toBe('/hooks/in?token=s3cr3t');
      expect(delivery.headers[WEBHOOK_SIGNATURE_HEADER]).toBeUndefined();
      expect(JSON.parse(delivery.body)).toMatchObject({ run_id: runId, status: 'failure', status_code: 500, error: { type: 'ReplicaLost' } });
      const run = await waitFor(async () => {
        const candidate = (await running.readRunLog())?.status?.runs?.find((r) => r.id === runId);
        return candidate?.webhook?.state === 'delivered' ? candidate : undefined;
      }, { what: 'the RunLog to show the webhook delivered' });
      expect(run).toMatchObject({ status: 'failure', reason: 'replica_lost', webhook: { endpoint: receiver.at('/hooks/in').href, lastStatusCode: 200 } });
      expect(run.webhook!.attempts).toBeGreaterThanOrEqual(1);
      expect(JSON.stringify((await running.readRunLog())?.status)).not.toContain('s3cr3t');
    } finally {
      await receiver.close();
    }
  });

  it('reports a burst of calls as its load in the RunLog within the write cadence, and writes nothing more once idle', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-runlog-'));
    cluster = await startCluster();
    const running = cluster;
    const { sidecar, runUrl } = await readySidecar(await startApp(), join(dir, 'data'), await inPod(cluster, dir), ['--concurrency', '6']);
    await waitFor(async () => (await running.readRunLog())?.status?.load, { what: 'the sidecar to write its first load' });

    // Three streams held open (`/endless` never ends) are three calls in flight until the test lets go.
    const callers = [1, 2, 3].map(() => new AbortController());
    const streams = await Promise.all(callers.map((caller) => fetch(runUrl.replace(/\/run$/, '/endless'), { method: 'POST', body: '{}', signal: caller.signal })));
    for (const stream of streams) expect(stream.status, sidecar.output()).toBe(200);
    // Protocol timing, loosely bounded: a sample within 100 ms, the write within a second of it.
    const burst = await waitFor(async () => {
      const load = (await running.readRunLog())?.status?.load;
      return load?.inFlight === 3 ? load : undefined;
    }, { what: 'the three calls in the RunLog load', timeoutMs: 5000 });
    expect(burst).toMatchObject({ queued: 0, concurrency: 6 });
    expect(burst.peakConcurrency).toBe(3);
    expect(burst.requestsPerSecond).toBeGreaterThan(0);

    for (const caller of callers) caller.abort();
    await waitFor(async () => {
      const load = (await running.readRunLog())?.status?.load;
      return load?.inFlight === 0 && load.averageConcurrency === 0 && load.peakConcurrency === 0 && load.requestsPerSecond === 0;
    }, { what: 'the load back to zero in the RunLog' });
    // Idle with nothing new to say: no status write within twice the write cadence.
    running.server.clearRequests();
    await expect(running.server.waitForRequest({ method: 'PATCH', pathPattern: '/status' }, 2000)).rejects.toThrow(/no request matching/);
  });

  it('drains through its admin port only once the API server says its pod is being deleted: before, anyone’s /drain is refused (409), the replica stays ready and serves', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-runlog-'));
    cluster = await startCluster();
    const kube = new KubeApi(await cluster.server.credentials());
    try {
      const pods = `/api/v1/namespaces/${NAMESPACE}/pods`;
      await kube.create(kubePathOf(pods), { apiVersion: 'v1', kind: 'Pod', metadata: { name: POD_NAME, namespace: NAMESPACE }, spec: { containers: [{ name: 'app', image: 'app:1' }] } });
      const { runUrl, adminUrl } = await readySidecar(await startApp(), join(dir, 'data'), await inPod(cluster, dir));
      await expectDrainRefusedToAll(adminUrl);
      expect((await fetch(runUrl, { method: 'POST', body: '{}' })).status).toBe(200);

      await kube.delete(kubePathOf(`${pods}/${POD_NAME}`));
      const drained = await fetch(`${adminUrl}/drain`);
      expect([drained.status, await drained.json()]).toEqual([200, { status: 'drained' }]);
      expect((await fetch(`${adminUrl}/ready`)).status).toBe(503);
    } finally {
      await kube.close();
    }
  });

  it('fails at start, naming the data dir, when it cannot write there', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-runlog-'));
    cluster = await startCluster();
    const access = await inPod(cluster, dir);
    const notADir = join(dir, 'a-file');
    writeFileSync(notADir, '');
    const { output, exited } = startSidecar(['--app-port', '9', '--port', '0', '--admin-port', '0', '--data-dir', join(notADir, 'data')], access);
    expect(await exited).toBe(1);
    expect(output()).toContain(`--data-dir: the run journal's folder ${join(notADir, 'data')} is not writable`);
    expect(output()).not.toContain('sidecar listening');
  });
});
