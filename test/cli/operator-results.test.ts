// `runlet operator` with a results store that does not answer yet, as on a first `helm install`: the chart's
// embedded PostgreSQL starts beside the operator and answers only once its volume is bound and initdb has run.
// The operator must not exit (a crash loop whose back-off outlasts PostgreSQL's start): it starts, is not
// ready and says why, refuses run lists 503 run-store-unavailable meanwhile, and serves once PostgreSQL answers.
// With the embedded PostgreSQL it makes the Secret itself and reads its `dsn` without a restart.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { V1Secret } from '@kubernetes/client-node';
import { KubeApi } from '../../kube/client.ts';
import { RUNS_ACCESS } from '../../management/kube-auth.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { installCrds } from '../operator/e2e-cluster.ts';
import { startOperatorProcess, type OperatorProcess } from '../support/operator-process.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { startTcpRelay } from '../support/tcp-relay.ts';
import { waitFor } from '../support/wait.ts';
import { kubePathOf } from '../support/kube-path.ts';

/** A process starting on a loaded 2-core machine. */
const START_TIMEOUT_MS = 90_000;
const NAMESPACE = 'team-a';
const TOKEN = 'reader.x.y';
const SECRET = 'runlet-postgres';

let dir: string | undefined;
let server: KubeApiServer | undefined;
let operator: OperatorProcess | undefined;
let postgres: PostgresServer | undefined;
let gate: Gate | undefined;

afterEach(async () => {
  await operator?.kill();
  await server?.close();
  await gate?.close();
  await postgres?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  operator = server = gate = postgres = dir = undefined;
});

/** PostgreSQL's address before it is up: every connection is cut (a Service with no ready pod), until `open`. */
interface Gate {
  port: number;
  open(): void;
  close(): Promise<void>;
}

async function startGate(target: number): Promise<Gate> {
  let open = false;
  const relay = await startTcpRelay(() => (open ? target : undefined));
  return { port: relay.port, open: () => void (open = true), close: () => relay.close() };
}

/** The operator on the in-memory API server, from a kubeconfig (outside a pod), holding no calls itself. */
async function startOperator(env: Record<string, string>): Promise<{ operator: OperatorProcess; api: KubeApi }> {
  dir = await mkdtemp(join(tmpdir(), 'runlet-operator-results-'));
  server = await startKubeApiServer({ namespaces: ['default', NAMESPACE] });
  await installCrds(server.kubeConfig());
  const api = new KubeApi(await server.credentials());
  await api.create(kubePathOf(`/apis/runlet.dev/v1alpha1/namespaces/${NAMESPACE}/apps`), {
    apiVersion: 'runlet.dev/v1alpha1',
    kind: 'App',
    metadata: { name: 'hello', namespace: NAMESPACE },
    spec: { runtime: { python: { code: { configMap: { name: 'hello-code' } } } } },
  });
  server.tokens.set(TOKEN, { username: 'reader' });
  server.allow({ user: 'reader', namespace: NAMESPACE, ...RUNS_ACCESS });
  const kubeconfig = join(dir, 'kubeconfig');
  await server.writeKubeconfig(kubeconfig);
  operator = startOperatorProcess({
    home: dir,
    env: { KUBECONFIG: kubeconfig, KUBERNETES_SERVICE_HOST: '', RUNLET_RESULTS_COLLECTOR_URL: 'http://runlet-operator.default.svc:80', ...env },
    args: ['--holder', 'external'],
  });
  return { operator, api };
}

/** `waiting`, unless the operator exits first: then its exit code and output (an exit is what this file guards against). */
function unlessExited<T>(process: OperatorProcess, waiting: Promise<T>): Promise<T> {
  const exited = process.exited.then((code): never => {
    throw new Error(`the operator exited (${code}):\n${process.output()}`);
  });
  // Killed at the end of the test, after the wait: that rejection has no one to tell.
  exited.catch(() => {});
  return Promise.race([waiting, exited]);
}

async function listeningAddress(process: OperatorProcess): Promise<string> {
  const line = await unlessExited(
    process,
    waitFor(() => process.output().split('\n').find((text) => text.includes('"operator listening"')), {
      what: 'the operator listening',
      timeoutMs: START_TIMEOUT_MS,
      intervalMs: 100,
    }),
  );
  return (JSON.parse(line) as { address: string }).address;
}

interface ReadyAnswer {
  status: number;
  body: { status: string; resultsStore?: { open: boolean; waitingFor?: string; schemaVersion?: number } };
}

async function ready(address: string): Promise<ReadyAnswer> {
  const response = await fetch(`${address}/ready`);
  return { status: response.status, body: (await response.json()) as ReadyAnswer['body'] };
}

/** /ready once the watches' caches are filled, so only the results store can hold it back. */
async function readyBeyondCaches(address: string, process: OperatorProcess, until: (answer: ReadyAnswer) => boolean): Promise<ReadyAnswer> {
  return unlessExited(
    process,
    waitFor(
      async () => {
        const answer = await ready(address);
        return until(answer) ? answer : undefined;
      },
      { what: '/ready', timeoutMs: START_TIMEOUT_MS, intervalMs: 100 },
    ),
  );
}

function listRuns(address: string): Promise<Response> {
  return fetch(`${address}/v2/projects/${NAMESPACE}/apps/hello/runs`, { headers: { authorization: `Bearer ${TOKEN}` } });
}

describe('runlet operator with a results store that does not answer yet', () => {
  it('starts, is not ready and says why, refuses run lists 503, and serves once PostgreSQL answers', async () => {
    postgres = await startPostgres();
    const database = await postgres.createDatabase('waiting');
    gate = await startGate(postgres.port);
    const { operator: started } = await startOperator({ RUNLET_RESULTS_DSN: `postgresql://runlet:s3cret@127.0.0.1:${gate.port}/${database}` });
    const address = await listeningAddress(started);

    // Tried and failed at least once (the state names the cause), the caches filled: not ready for that alone.
    const waiting = await readyBeyondCaches(address, started, (answer) => answer.body.resultsStore?.waitingFor?.includes('cannot be opened yet') === true);
    expect(waiting.status).toBe(503);
    expect(waiting.body.resultsStore!.waitingFor).toContain(`127.0.0.1:${gate.port}/${database}`);
    expect(waiting.body.resultsStore!.waitingFor).not.toContain('s3cret');
    expect(started.output()).toContain('the results store cannot be opened yet; trying again');
    const refused = await listRuns(address);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await refused.json()).toMatchObject({ type: 'https://runlet.dev/problems#run-store-unavailable', status: 503 });
    expect(started.child.exitCode).toBeNull();

    gate.open();
    const opened = await readyBeyondCaches(address, started, (answer) => answer.status === 200);
    expect(opened.body.resultsStore).toMatchObject({ open: true, schemaVersion: expect.any(Number) });
    const listed = await listRuns(address);
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual({ items: [], nextToken: null });
    expect(started.output()).toContain('"results store opened"');
  }, START_TIMEOUT_MS * 2);

  it('with the embedded PostgreSQL, makes its Secret and waits for its Service, with no restart', async () => {
    // The address the `dsn` is made with: a loopback one where nothing listens on PostgreSQL's port.
    const { operator: started, api } = await startOperator({ POD_NAMESPACE: 'default', RUNLET_RESULTS_POSTGRES_SECRET: SECRET, RUNLET_RESULTS_POSTGRES_HOST: '127.0.0.9' });
    const address = await listeningAddress(started);
    const waiting = await readyBeyondCaches(address, started, (answer) => answer.body.resultsStore?.waitingFor?.includes('cannot be opened yet') === true);
    expect(waiting.status).toBe(503);
    expect(waiting.body.resultsStore!.waitingFor).toContain('postgres://runlet@127.0.0.9:5432/runlet');
    const secret = await api.get<V1Secret & { metadata: { name: string } }>(kubePathOf(`/api/v1/namespaces/default/secrets/${SECRET}`));
    const password = Buffer.from(secret.data!.password!, 'base64').toString('utf8');
    expect(password).toMatch(/^[0-9a-f]{64}$/);
    expect(Buffer.from(secret.data!.dsn!, 'base64').toString('utf8')).toBe(`postgres://runlet:${password}@127.0.0.9:5432/runlet`);
    expect(started.output()).not.toContain(password);
    expect(started.child.exitCode).toBeNull();
    await api.close();
  }, START_TIMEOUT_MS * 2);
});
