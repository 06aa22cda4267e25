// The holder under a burst at zero (issue #21), against the in-memory API server (the App's Deployment, its
// replicas Service, and pods made ready by the test, which its endpoints controller lists) and real HTTP servers standing for the pods' sidecars, each answering as scripted:
// calls past a bound are refused at once; the wake asks for the replicas the waiting calls need; calls go to
// pods as each becomes ready, at most replica_concurrency at once on each; a refusal before the run is retried.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { APP_LABEL } from '../crds/api-group.ts';
import type { App } from '../crds/app-schema.ts';
import { problemTypeUri } from '../crds/problem.ts';
import { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { testLogger } from '../test/support/logger.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';
import { waitFor } from '../test/support/wait.ts';
import { renderReplicasService } from '../operator/render/service.ts';
import { startHolder, type Holder, type HolderOptions } from './holder.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const NAMESPACE = 'team-a';
const DEPLOYMENTS = `/apis/apps/v1/namespaces/${NAMESPACE}/deployments`;
const PODS = `/api/v1/namespaces/${NAMESPACE}/pods`;

/** A pod's sidecar: answers each call as `answer` says, or holds it until `releaseAll`. */
class FakeSidecar {
  readonly server: Server;
  /** The bodies of the calls received, in order. */
  readonly bodies: string[] = [];
  inFlight = 0;
  mostInFlight = 0;
  readonly #held: ServerResponse[] = [];

  private constructor(answer: (index: number, response: ServerResponse) => 'hold' | void) {
    this.server = createServer((request: IncomingMessage, response: ServerResponse) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        this.bodies.push(Buffer.concat(chunks).toString('utf8'));
        this.inFlight += 1;
        this.mostInFlight = Math.max(this.mostInFlight, this.inFlight);
        response.once('close', () => (this.inFlight -= 1));
        if (answer(this.bodies.length - 1, response) === 'hold') this.#held.push(response);
      });
    });
  }

  static async start(answer: (index: number, response: ServerResponse) => 'hold' | void): Promise<FakeSidecar> {
    const sidecar = new FakeSidecar(answer);
    sidecar.server.listen(0, '127.0.0.1');
    await once(sidecar.server, 'listening');
    return sidecar;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Answers one held call 200. */
  releaseOne(): void {
    ok(this.#held.shift()!);
  }

  async close(): Promise<void> {
    for (const response of this.#held.splice(0)) ok(response);
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function ok(response: ServerResponse): void {
  response.writeHead(200, { 'content-type': 'application/json' });
  response.end('{"result":"ok"}');
}

function problem(response: ServerResponse, code: string): void {
  response.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1' });
  response.end(JSON.stringify({ type: problemTypeUri(code), title: code, status: 503, detail: 'scripted' }));
}

/** One key for every namespace: held async records are signed with it and read back. */
const HOLDER_KEY_BYTES = randomBytes(32);

describe('the holder under a burst at zero', () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  let holder: Holder | undefined;
  const sidecars: FakeSidecar[] = [];
  afterEach(async () => {
    await holder?.close();
    for (const sidecar of sidecars.splice(0)) await sidecar.close();
    await api?.close();
    await server?.close();
    holder = undefined;
  });

  /** The in-memory API server with these Apps' Deployments at zero, and a holder for them. */
  async function start(apps: App[], options: Partial<HolderOptions> = {}): Promise<Holder> {
    server = await startKubeApiServer({ namespaces: [NAMESPACE] });
    api = new KubeApi(await server.credentials());
    for (const app of apps) {
      const labels = { [APP_LABEL]: app.metadata.name };
      await api.create(kubePathOf(DEPLOYMENTS), {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: app.metadata.name },
        spec: { replicas: 0, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
      } as KubeObject);
      await api.create(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/services`), renderReplicasService(app) as KubeObject);
    }
    holder = await startHolder({
      api,
      apps: { get: (namespace, name) => apps.find((app) => app.metadata.namespace === namespace && app.metadata.name === name) },
      appsSynced: async () => {},
      auth: null,
      holderKeys: async () => HOLDER_KEY_BYTES,
      logger: testLogger(),
      identity: 'holder-test',
      recordsNamespace: NAMESPACE,
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      // Each pod's name is the port of its sidecar.
      replicaAddress: (replica) => ({ host: '127.0.0.1', port: Number(replica.name.split('-').at(-1)) }),
      ...options,
    });
    return holder;
  }

  let podAddresses = 0;
  /** A ready pod of the App whose sidecar is `sidecar`. */
  async function readyPod(app: string, sidecar: FakeSidecar): Promise<void> {
    const name = `${app}-${sidecar.port}`;
    const pod = await api!.create(kubePathOf(PODS), { apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: { [APP_LABEL]: app } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } as KubeObject);
    // An address of the documentation range, one per pod: Endpoints take no loopback address.
    podAddresses += 1;
    await api!.replace(kubePathOf(`${PODS}/${name}/status`), { ...pod, status: { podIP: `192.0.2.${podAddresses}`, conditions: [{ type: 'Ready', status: 'True' }] } } as KubeObject);
  }

  async function sidecar(answer: (index: number, response: ServerResponse) => 'hold' | void): Promise<FakeSidecar> {
    const started = await FakeSidecar.start(answer);
    sidecars.push(started);
    return started;
  }

  const call = (app: string, body = '{"n":1}') => fetch(`${holder!.url}/v4/${NAMESPACE}/${app}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const replicas = async (name: string) => (await api!.get<KubeObject & { spec: { replicas: number } }>(kubePathOf(`${DEPLOYMENTS}/${name}`))).spec.replicas;

  it('refuses a call past the bound per App, and past the bound of the holder, at once with 503 and Retry-After, while the calls within wait', async () => {
    const apps = [storedApp(pythonSpec(), { name: 'a' }), storedApp(pythonSpec(), { name: 'b' })];
    const refusals: string[] = [];
    const metrics = { handedOver() {}, timedOut() {}, accepted() {}, dropped() {}, cancelled() {}, refused: (namespace: string, app: string, mode: string) => refusals.push(`${namespace}/${app} ${mode}`) };
    // One namespace may take all the calls here (fair-share.test.ts tests the share per namespace).
    await start(apps, { limits: { callsPerApp: 3, callsPerNamespace: 4, calls: 4 }, metrics });
    let settled = 0;
    const within = [call('a'), call('a'), call('a'), call('b')].map((answer) => answer.finally(() => (settled += 1)));
    await waitFor(() => holder!.held(NAMESPACE, 'a') === 3 && holder!.held(NAMESPACE, 'b') === 1, { what: 'four calls held' });

    for (const [app, limit] of [['a', 'its limit per app'], ['b', 'its limit']] as const) {
      const refused = await call(app);
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      const body = (await refused.json()) as { type: string; detail: string };
      expect(body.type).toBe(problemTypeUri('over-capacity'));
      expect(body.detail).toContain(limit);
    }
    // Refused while the held calls still wait for a replica: not after waiting out the cold start.
    expect(settled).toBe(0);
    expect(holder!.stats.refused).toBe(2);
    expect(refusals).toEqual([`${NAMESPACE}/a sync`, `${NAMESPACE}/b sync`]);
    expect(holder!.calls).toBe(4);
    await holder!.close();
    await Promise.allSettled(within);
  });

  it('refuses a body past the bytes it may hold at once, and holds one within them', async () => {
    // 2,048 bytes in all: 1,024 for the one namespace.
    await start([storedApp(pythonSpec(), { name: 'a' })], { limits: { bodyBytes: 2048 } });
    const held = call('a', JSON.stringify({ text: 'x'.repeat(400) }));
    await waitFor(() => holder!.held(NAMESPACE, 'a') === 1, { what: 'the small call held' });
    const refused = await call('a', JSON.stringify({ text: 'x'.repeat(2048) }));
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { type: string }).type).toBe(problemTypeUri('request-buffer-full'));
    expect(holder!.held(NAMESPACE, 'a')).toBe(1);
    await holder!.close();
    await held.catch(() => undefined);
  });

  it('wakes the app with the replicas its waiting calls need, ceil(waiting ÷ target) within maxReplicas', async () => {
    // replica_concurrency 4 at the default 70 %: 2.8 calls per replica.
    const apps = [storedApp(pythonSpec({ scaling: { minReplicas: 0, maxReplicas: 5, replicaConcurrency: 4 } }), { name: 'a' })];
    await start(apps);
    const calls = Array.from({ length: 10 }, () => call('a').catch(() => undefined));
    await waitFor(() => holder!.held(NAMESPACE, 'a') === 10, { what: 'ten calls held' });
    await waitFor(async () => (await replicas('a')) === 4, { what: 'the Deployment asked for ceil(10 ÷ 2.8) = 4 replicas' });
    const more = Array.from({ length: 40 }, () => call('a').catch(() => undefined));
    await waitFor(() => holder!.held(NAMESPACE, 'a') === 50, { what: 'fifty calls held' });
    await waitFor(async () => (await replicas('a')) === 5, { what: 'the Deployment asked for maxReplicas, 5' });
    // One write for the first call and one for all that came meanwhile, not a read per call.
    expect(server!.countRequests({ method: 'GET', pathPattern: '/deployments/a/scale' })).toBeLessThan(10);
    await holder!.close();
    await Promise.all([...calls, ...more]);
  });

  it('hands the held calls to pods as each becomes ready, at most replica_concurrency at once on each', async () => {
    const apps = [storedApp(pythonSpec({ scaling: { minReplicas: 0, maxReplicas: 2, replicaConcurrency: 1 } }), { name: 'a' })];
    await start(apps);
    const answers = [1, 2, 3].map((n) => call('a', `{"n":${n}}`));
    await waitFor(() => holder!.held(NAMESPACE, 'a') === 3, { what: 'three calls held' });

    const first = await sidecar(() => 'hold');
    await readyPod('a', first);
    await waitFor(() => first.bodies.length === 1 && holder!.held(NAMESPACE, 'a') === 2, { what: 'one call on the first pod, two still held' });
    const second = await sidecar(() => 'hold');
    await readyPod('a', second);
    await waitFor(() => second.bodies.length === 1 && holder!.held(NAMESPACE, 'a') === 1, { what: 'the second pod taking the next call as soon as it is ready' });
    expect(first.bodies).toHaveLength(1);

    first.releaseOne();
    await waitFor(() => first.bodies.length === 2, { what: 'the third call on the first pod once its slot is free' });
    first.releaseOne();
    second.releaseOne();
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect([first.mostInFlight, second.mostInFlight]).toEqual([1, 1]);
    expect(holder!.stats.relayed).toBe(3);
  });

  it("passes on a custom app's 503 over-capacity as it came: its own server may answer so after its run started", async () => {
    await start([storedApp({ runtime: { custom: { image: 'registry.example/api:1', port: 8000 } }, scaling: { minReplicas: 0 } }, { name: 'a' })]);
    const pod = await sidecar((_index, response) => problem(response, 'over-capacity'));
    await readyPod('a', pod);
    const answer = await call('a');
    expect(answer.status).toBe(503);
    expect(((await answer.json()) as { type: string }).type).toBe(problemTypeUri('over-capacity'));
    expect(pod.bodies).toHaveLength(1);
    expect(holder!.stats.retried).toBe(0);
  });

  it('tries a stream call again that a pod refused before running it, then streams its events as they come', async () => {
    await start([storedApp(pythonSpec({ scaling: { minReplicas: 0 } }), { name: 'a' })]);
    const pod = await sidecar((index, response) => {
      if (index === 0) return problem(response, 'over-capacity');
      response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      response.write('data: 1\n\n');
      response.end('data: 2\n\n');
    });
    await readyPod('a', pod);
    const answer = await fetch(`${holder!.url}/v4/${NAMESPACE}/a/count`, { method: 'POST', headers: { accept: 'text/event-stream', 'content-type': 'application/json' }, body: '{"n":2}' });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await answer.text()).toBe('data: 1\n\ndata: 2\n\n');
    expect(pod.bodies).toEqual(['{"n":2}', '{"n":2}']);
    expect(holder!.stats.retried).toBe(1);
  });

  it('answers a call whose wake fails with a problem once its body has arrived (the failure caught meanwhile), its place given back', async () => {
    await start([storedApp(pythonSpec(), { name: 'a' })]);
    // The wake's read of the scale is refused (the holder's RBAC, say).
    server!.failNext({ method: 'GET', pathPattern: '/deployments/a/scale', status: 403 });
    // The body's last bytes only once the wake has failed: its failure waits for them, caught meanwhile.
    const wakeFailed = () => server!.requests.some((request) => request.path === `${DEPLOYMENTS}/a/scale` && request.status === 403);
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(new TextEncoder().encode('{"n":'));
        await waitFor(wakeFailed, { what: 'the wake’s read answered 403' });
        controller.enqueue(new TextEncoder().encode('1}'));
        controller.close();
      },
    });
    const failed = await fetch(`${holder!.url}/v4/${NAMESPACE}/a/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, duplex: 'half' } as RequestInit);
    expect(failed.status).toBe(500);
    expect(((await failed.json()) as { type: string }).type).toBe(problemTypeUri('internal-error'));
    expect(holder!.calls).toBe(0);
  });

  it('lets go at once of a call whose caller hung up while its app was being woken, its place given back', async () => {
    await start([storedApp(pythonSpec(), { name: 'a' })]);
    // The wake's read of the scale is never answered (an API server in trouble): the wake lasts the client's 30 s.
    server!.hangNext({ method: 'GET', pathPattern: '/deployments/a/scale' });
    const body = '{"n":1}';
    const caller = connect(Number(new URL(holder!.url).port), '127.0.0.1');
    caller.on('error', () => {});
    caller.write(`POST /v4/${NAMESPACE}/a/run HTTP/1.1\r\nhost: holder\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    const waking = () => server!.requests.some((request) => request.method === 'GET' && request.path === `${DEPLOYMENTS}/a/scale`);
    await waitFor(() => holder!.held(NAMESPACE, 'a') === 1 && waking(), { what: 'the call held, its app being woken' });
    caller.destroy();
    // Well within the wake's 30 s: the hang-up is seen, not the wake's end.
    await waitFor(() => holder!.calls === 0, { timeoutMs: 10_000, what: 'the call gone with its caller' });
    expect(holder!.held(NAMESPACE, 'a')).toBe(0);
    expect(server!.requests.filter((request) => request.path === `${DEPLOYMENTS}/a/scale` && request.status !== undefined), 'the wake still unanswered').toEqual([]);
  });

  it('answers 503 cold-start-timeout, saying so, to a call the ready pods had no room for within its limit', async () => {
    await start([storedApp(pythonSpec({ scaling: { minReplicas: 0, replicaConcurrency: 1 } }), { name: 'a' })], { coldStartTimeoutMs: () => 500 });
    const pod = await sidecar(() => 'hold');
    await readyPod('a', pod);
    const first = call('a');
    await waitFor(() => pod.bodies.length === 1, { what: 'the first call on the pod' });
    const second = await call('a');
    expect(second.status).toBe(503);
    expect(second.headers.get('retry-after')).toBe('5');
    const body = (await second.json()) as { type: string; detail: string };
    expect(body.type).toBe(problemTypeUri('cold-start-timeout'));
    expect(body.detail).toContain('had no room for the call');
    expect(pod.bodies).toHaveLength(1);
    pod.releaseOne();
    expect((await first).status).toBe(200);
  });

  it("tries a call again that a pod refused before running it (503 over-capacity), and passes on any other pod's answer", async () => {
    await start([storedApp(pythonSpec({ scaling: { minReplicas: 0, replicaConcurrency: 2 } }), { name: 'a' })]);
    // The first call is refused twice for a full queue, then run; the second gets a 503 of a run that started.
    const pod = await sidecar((index, response) => {
      if (index < 2) return problem(response, 'over-capacity');
      if (index === 3) return problem(response, 'run-store-unavailable');
      ok(response);
    });
    await readyPod('a', pod);
    const answer = await call('a', '{"n":"first"}');
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ result: 'ok' });
    expect(pod.bodies).toEqual(['{"n":"first"}', '{"n":"first"}', '{"n":"first"}']);
    expect(holder!.stats.retried).toBe(2);

    const passedOn = await call('a', '{"n":"second"}');
    expect(passedOn.status).toBe(503);
    expect(((await passedOn.json()) as { type: string }).type).toBe(problemTypeUri('run-store-unavailable'));
    expect(pod.bodies.slice(3)).toEqual(['{"n":"second"}']);
  });
});
