// `runlet sidecar` processes in front of examples/hello's Python runtime, with the RunLog store (the in-memory
// API server) and with the results store (the operator's collector, here in the test process, into a real
// PostgreSQL): a connection kept alive serves a stream's answer and then the next calls, written byte by byte
// on one socket (the front lends the socket to node:http for the stream, and takes it back after); and the
// calls the real-kubelet tier makes (sync, stream, async with a webhook) go through a relay that opens one
// upstream connection per caller connection, as the tier's socat does, with undici's pool reusing connections.
// The tier once saw an async call cut ("other side closed") on a kept-alive connection right after a stream:
// these pin down that the sidecar keeps such connections.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { resultsCollector } from '../../results/collector.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { freePort } from '../support/custom-app.ts';
import { startPythonRuntime } from '../support/python-runtime.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { jsonPost, RawConnection } from '../support/raw-http.ts';
import { APP_NAME, NAMESPACE, POD_NAME, startCluster, type Cluster } from '../support/runlog-store-kit.ts';
import { waitFor } from '../support/wait.ts';
import { identifyTestToken, writeResultsToken } from '../support/results-tokens.ts';
import { REPO } from '../operator/e2e-cluster.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');
/** The tier's calls, this many times over one pool: its failure came once in a few runs of one round. */
const ROUNDS = 10;

let dir: string;
let cluster: Cluster | undefined;
let postgres: PostgresServer | undefined;
let results: OpenResults | undefined;
const children: ChildProcess[] = [];
const closers: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
  await cluster?.server.close();
  cluster = undefined;
  rmSync(dir, { recursive: true, force: true });
});

afterAll(async () => {
  await results?.close();
  await postgres?.stop();
});

/** examples/hello's runtime on a free port, as the app container runs it; resolves once it listens. */
async function startRuntime(): Promise<number> {
  const port = await freePort();
  await startPythonRuntime({ appDir: join(REPO, 'examples/hello'), port, portFile: join(dir, 'runtime-port'), concurrency: 4 }, (child) => children.push(child));
  return port;
}

/** The store's flags and environment: the pod's RunLog in the in-memory API server, or the collector's batches. */
async function runStore(store: 'runlog' | 'results'): Promise<{ args: string[]; env: Record<string, string> }> {
  if (store === 'runlog') {
    cluster = await startCluster();
    const serviceAccountDir = join(dir, 'serviceaccount');
    await cluster.server.writeServiceAccount(serviceAccountDir);
    return { args: ['--run-store', 'runlog'], env: { ...cluster.server.inClusterEnv, RUNLET_SERVICE_ACCOUNT_DIR: serviceAccountDir, KUBECONFIG: '', HOME: dir } };
  }
  postgres ??= await startPostgres();
  results ??= await openResults({ dsn: postgres.dsn(await postgres.createDatabase('keepalive')), logger: testLogger() });
  const collector: FastifyInstance = Fastify();
  await collector.register(resultsCollector, { store: results.store, identify: identifyTestToken });
  await collector.listen({ host: '127.0.0.1', port: 0 });
  closers.push(() => collector.close());
  const { port } = collector.server.address() as AddressInfo;
  return { args: ['--run-store', 'results'], env: { KUBERNETES_SERVICE_HOST: '', RUNLET_RESULTS_URL: `http://127.0.0.1:${port}`, RUNLET_RESULTS_TOKEN_FILE: writeResultsToken(dir, APP_NAME, POD_NAME, NAMESPACE) } };
}

/** A ready sidecar with `store` in front of the runtime; its run port's origin. */
async function startSidecar(store: 'runlog' | 'results'): Promise<string> {
  dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-keep-alive-'));
  const { args, env } = await runStore(store);
  const [appPort, port, adminPort] = [await startRuntime(), await freePort(), await freePort()];
  const sidecar = spawn(
    process.execPath,
    [CLI, 'sidecar', '--project', NAMESPACE, '--app', APP_NAME, '--replica', POD_NAME, '--auth', 'off', '--runtime', 'python', '--app-port', String(appPort),
      '--port', String(port), '--admin-port', String(adminPort), '--data-dir', join(dir, 'data'), '--webhook-allow-cidrs', '127.0.0.0/8', ...args],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(sidecar);
  let output = '';
  sidecar.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  sidecar.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  await waitFor(async () => sidecar.exitCode === null && (await fetch(`http://127.0.0.1:${adminPort}/ready`).then((answer) => answer.ok, () => false)), {
    what: 'the sidecar to be ready',
  }).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; the sidecar's output:\n${output}`, { cause: error });
  });
  return `http://127.0.0.1:${port}`;
}

/** A TCP relay to `origin` that opens one upstream connection per connection it takes, passing ends both ways. */
async function startRelay(origin: string): Promise<string> {
  const { hostname, port } = new URL(origin);
  const relay: Server = createServer({ allowHalfOpen: true }, (caller) => {
    const upstream = connect({ host: hostname, port: Number(port), allowHalfOpen: true });
    caller.pipe(upstream).on('error', () => caller.destroy());
    upstream.pipe(caller).on('error', () => upstream.destroy());
    caller.on('error', () => upstream.destroy());
    upstream.on('error', () => caller.destroy());
  });
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  closers.push(async () => {
    relay.close();
    await once(relay, 'close');
  });
  return `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
}

const FUNCTIONS = `/v4/${NAMESPACE}/${APP_NAME}`;
const EVENTS = [1, 2, 3].map((item) => `data: ${JSON.stringify({ item, of: 3 })}\n\n`).join('');

describe.each(['runlog', 'results'] as const)('runlet sidecar --run-store %s: a kept-alive connection after a stream', (store) => {
  it('answers a sync, an async and another stream call on the connection that carried a stream, in order', async () => {
    const origin = await startSidecar(store);
    const connection = await RawConnection.open(origin);
    closers.push(async () => connection.close());
    connection.write(jsonPost(`${FUNCTIONS}/count`, { n: 3, pause: 0.01 }, 'Accept: text/event-stream\r\n'));
    const stream = await connection.next();
    expect([stream.status, stream.headers['transfer-encoding'], stream.headers.connection, stream.body]).toEqual([200, 'chunked', 'keep-alive', EVENTS]);

    connection.write(jsonPost(`${FUNCTIONS}/run?async=true&webhookEndpoint=${encodeURIComponent('http://127.0.0.1:9/hooks')}`, { name: 'Bo' }));
    const accepted = await connection.next();
    expect(accepted.status, accepted.body).toBe(202);
    expect(accepted.headers.connection).toBe('keep-alive');

    // Written before the answer to the one before is read: pipelined behind a stream.
    connection.write(jsonPost(`${FUNCTIONS}/count`, { n: 3, pause: 0.01 }, 'Accept: text/event-stream\r\n') + jsonPost(`${FUNCTIONS}/run`, { name: 'Ada' }));
    expect((await connection.next()).body).toBe(EVENTS);
    const sync = await connection.next();
    expect([sync.status, JSON.parse(sync.body).result]).toEqual([200, { greeting: 'Hello, Ada!' }]);
    expect(connection.received()).toBe('');
  });

  it(`answers ${ROUNDS} rounds of the real-kubelet tier's calls through a relay, undici's pool reusing its connections`, async () => {
    const origin = await startRelay(await startSidecar(store));
    const agent = new Agent();
    closers.push(() => agent.close());
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      undiciFetch(`${origin}${FUNCTIONS}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), dispatcher: agent });
    for (let round = 0; round < ROUNDS; round++) {
      const sync = await post('/run', { name: 'Ada' });
      expect(((await sync.json()) as { result: unknown }).result).toEqual({ greeting: 'Hello, Ada!' });
      const stream = await post('/count', { n: 3, pause: 0.01 }, { accept: 'text/event-stream' });
      expect(await stream.text()).toBe(EVENTS);
      const accepted = await post(`/run?async=true&webhookEndpoint=${encodeURIComponent('http://127.0.0.1:9/hooks')}`, { name: 'Bo' });
      expect(accepted.status, `round ${round}`).toBe(202);
      await accepted.body?.cancel();
    }
  });
});
