// The pod sidecar's two plain node:http servers: the run port (its document built on first request, its
// not-a-route answers) and the admin port. Runs themselves are covered through this server by test/e2e.
import { once } from 'node:events';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCUMENT_FILES, noRuns } from '../docs/openapi-documents.ts';
import { createAdminInterface, createAdminServer } from './admin-interface.ts';
import { AppRegistry, AppTarget } from './apps.ts';
import { ADMIN_SIGNATURE_HEADER, ADMIN_SIGNATURE_MAX_AGE_MS, newAdminKey, readAdminKeys, signAdminRequest } from './admin-cancel.ts';
import { podTermination } from './pod-termination.ts';
import { KubeApi } from '../kube/client.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { LoadMeter } from './load/load-meter.ts';
import { Replica } from './replica.ts';
import { createRunInterface } from './run-interface.ts';
import { createRunServer } from './run-server.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const logger = pino({ level: 'silent' });
const apps = new AppRegistry();
const target = new AppTarget({ projectId: 'p', appName: 'a', runtime: 'python', replicaConcurrency: 1, responseGracePeriodSeconds: 5 });
apps.add(target);
const load = new LoadMeter(target.admission);
const replica = new Replica({ apps, store: noRuns, replicaName: 'test', logger });
const runServer = createRunServer(createRunInterface(replica), logger);
const ADMIN_KEY = newAdminKey();
const PREVIOUS_ADMIN_KEY = newAdminKey();
const OTHER_NAMESPACE_KEY = newAdminKey();
/** This replica's pod, in the in-memory API server: /drain drains once it is deleted. */
const POD_PATH = '/api/v1/namespaces/p/pods/test';
let apiServer: KubeApiServer;
let kube: KubeApi;
let adminKeyDir: string;
const adminServer = createAdminServer(
  createAdminInterface(replica, {
    drain: { pod: podTermination(async () => kube, 'p', 'test') },
    cancels: { projectId: 'p', appName: 'a', keys: () => readAdminKeys(adminKeyDir) },
    load,
  }),
);
let runOrigin: string;
let adminOrigin: string;

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  apiServer = await startKubeApiServer({ namespaces: ['p'] });
  kube = new KubeApi(await apiServer.credentials());
  await kube.create(kubePathOf('/api/v1/namespaces/p/pods'), { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'test', namespace: 'p' }, spec: { containers: [{ name: 'app', image: 'app:1' }] } });
  // The Secret's entries as the kubelet mounts them.
  adminKeyDir = await mkdtemp(join(tmpdir(), 'runlet-admin-key-'));
  await writeFile(join(adminKeyDir, 'current'), ADMIN_KEY);
  await writeFile(join(adminKeyDir, 'previous'), PREVIOUS_ADMIN_KEY);
  runOrigin = await listen(runServer);
  adminOrigin = await listen(adminServer);
});
afterAll(async () => {
  for (const server of [runServer, adminServer]) {
    server.closeAllConnections();
    server.close();
  }
  await replica.deliverer.close();
  await kube.close();
  await apiServer.close();
});

async function expectProblem(response: Response, status: number, code: string): Promise<void> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  expect(await response.json()).toMatchObject({ type: `https://runlet.dev/problems#${code}`, status });
}

describe('the run port', () => {
  it('serves the OpenAPI document, identical to the committed copy, to GET and HEAD', async () => {
    const committed = JSON.parse(await readFile(resolve(import.meta.dirname, '..', DOCUMENT_FILES.run), 'utf8')) as unknown;
    const [first, second] = await Promise.all([fetch(`${runOrigin}/v4/openapi.json`), fetch(`${runOrigin}/v4/openapi.json?format=json`)]);
    for (const response of [first, second]) {
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await response.json()).toEqual(committed);
    }
    const head = await fetch(`${runOrigin}/v4/openapi.json`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('answers other methods on the document, and paths outside the interface, with a 404 problem', async () => {
    await expectProblem(await fetch(`${runOrigin}/v4/openapi.json`, { method: 'POST' }), 404, 'route-not-found');
    await expectProblem(await fetch(`${runOrigin}/v4/openapi.jsonx`), 404, 'route-not-found');
    await expectProblem(await fetch(`${runOrigin}/v4/p`), 404, 'route-not-found');
    await expectProblem(await fetch(`${runOrigin}/v4//a/f`, { method: 'POST' }), 404, 'route-not-found');
    await expectProblem(await fetch(`${runOrigin}/`), 404, 'route-not-found');
  });

  it('decodes path segments, and refuses a malformed percent-encoding', async () => {
    await expectProblem(await fetch(`${runOrigin}/v4/p/a%ZZ/f`, { method: 'POST' }), 404, 'route-not-found');
    // `%61` is `a`: the app is found, and its runtime is not attached in this test.
    await expectProblem(await fetch(`${runOrigin}/v4/p/%61/f`, { method: 'POST', body: '{}' }), 503, 'app-unavailable');
    await expectProblem(await fetch(`${runOrigin}/v4/p/b/f`, { method: 'POST', body: '{}' }), 404, 'app-not-found');
  });
});

describe('the admin port', () => {
  it('serves the replica’s load at /load for the autoscaler’s scrape, as the meter last measured it', async () => {
    const idle = await fetch(`${adminOrigin}/load`);
    expect(idle.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect([idle.status, await idle.json()]).toEqual([200, { ...load.current() }]);
    expect(target.admission.tryAcquire()).toBe(true);
    target.admission.reserve();
    try {
      load.sample();
      const busy = await fetch(`${adminOrigin}/load`);
      expect(await busy.json()).toMatchObject({ inFlight: 1, queued: 1, peakConcurrency: 2, concurrency: 1 });
    } finally {
      target.admission.release();
      target.admission.unreserve();
    }
  });

  it('answers health, readiness (not ready until the runtime is attached) and metrics', async () => {
    const health = await fetch(`${adminOrigin}/healthz`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
    const ready = await fetch(`${adminOrigin}/ready?probe=1`);
    expect([ready.status, await ready.json()]).toEqual([503, { status: 'starting' }]);
    const metrics = await fetch(`${adminOrigin}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await metrics.text()).toMatch(/^runlet_runs_in_flight 0$/m);
  });

  it('answers an unknown route or method with a 404 that lists the routes', async () => {
    for (const [method, path] of [['GET', '/nowhere'], ['DELETE', '/healthz']] as const) {
      const response = await fetch(`${adminOrigin}${path}`, { method });
      expect(response.status).toBe(404);
      expect(((await response.json()) as { error: string }).error).toMatch(/GET \/healthz, \/ready, \/app-healthz, \/metrics, \/load; GET or POST \/drain/);
    }
  });

  it('drains for no one while the pod is not being deleted: GET or POST /drain (also //drain, as kubelets before 1.26 ask) gets 409, and the replica serves on', async () => {
    for (const path of ['/drain', '//drain']) {
      for (const method of ['GET', 'POST']) {
        const refused = method === 'GET' && path === '//drain' ? await rawGet(adminOrigin, path) : await fetch(`${adminOrigin}${path}`, { method });
        const status = typeof refused === 'string' ? Number(/^HTTP\/1\.1 (\d{3}) /.exec(refused)?.[1]) : refused.status;
        expect([path, method, status]).toEqual([path, method, 409]);
      }
    }
    for (const path of ['/drain/', '/drain/a-guessed-token-that-is-long-enough-0123456789']) {
      expect([path, (await fetch(`${adminOrigin}${path}`)).status]).toEqual([path, 404]);
    }
    expect(replica.draining).toBe(false);
    const ready = await fetch(`${adminOrigin}/ready`);
    expect(await ready.json()).toEqual({ status: 'starting' });
  });

  it('drains for no one when it cannot know its pod: SIGTERM is the way then', async () => {
    const closed = createAdminServer(createAdminInterface(replica, { drain: { pod: null } }));
    const origin = await listen(closed);
    try {
      const refused = await fetch(`${origin}/drain`);
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { error: string }).error).toMatch(/does not know its pod.*SIGTERM/);
      expect(replica.draining).toBe(false);
    } finally {
      closed.closeAllConnections();
      closed.close();
    }
  });

  it('cancels only when signed with this namespace’s admin key, fresh, for this very path; another namespace’s key is refused', async () => {
    const runId = '01a1fd40-0000-7000-8000-000000000000';
    const path = `/cancel/${runId}`;
    const refusals: [string, Record<string, string>][] = [
      ['unsigned', {}],
      ['another namespace’s key', { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(OTHER_NAMESPACE_KEY, 'POST', path) }],
      ['signed for another run', { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(ADMIN_KEY, 'POST', `/cancel/01a1fd40-0000-7000-8000-000000000001`) }],
      ['too old', { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(ADMIN_KEY, 'POST', path, Date.now() - ADMIN_SIGNATURE_MAX_AGE_MS - 1000) }],
      ['garbled', { [ADMIN_SIGNATURE_HEADER]: `${Date.now()}.zz` }],
    ];
    for (const [why, headers] of refusals) {
      const refused = await fetch(`${adminOrigin}${path}`, { method: 'POST', headers });
      expect([why, refused.status]).toEqual([why, 403]);
      expect(((await refused.json()) as { error: string }).error).toMatch(/admin key/);
    }
    for (const id of [runId, '%E0%A4%A', '..%2F..%2Fdrain']) {
      const signedPath = `/cancel/${id}`;
      const unknown = await fetch(`${adminOrigin}${signedPath}`, { method: 'POST', headers: { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(ADMIN_KEY, 'POST', signedPath) } });
      expect([id, unknown.status]).toEqual([id, 404]);
      expect(((await unknown.json()) as { error: string }).error).toMatch(/not in flight on this replica/);
    }
    // The key before a rotation is still taken (the kubelet refreshes the mounted files a while after it).
    const previous = await fetch(`${adminOrigin}${path}`, { method: 'POST', headers: { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(PREVIOUS_ADMIN_KEY, 'POST', path) } });
    expect(previous.status).toBe(404);
    const read = await fetch(`${adminOrigin}${path}`);
    expect(read.status, 'a cancel is a POST').toBe(405);
    expect(replica.draining).toBe(false);
  });

  // Last: the replica stays drained.
  it('drains on GET or POST /drain once the pod is deleted (as its preStop hook asks), also as a kubelet before 1.26 asks it (//drain), then reports draining and refuses runs', async () => {
    await kube.delete(kubePathOf(POD_PATH));
    const drained = await fetch(`${adminOrigin}/drain`, { method: 'POST' });
    expect([drained.status, await drained.json()]).toEqual([200, { status: 'drained' }]);
    const again = await rawGet(adminOrigin, '//drain');
    expect(again).toMatch(/^HTTP\/1\.1 200 /);
    expect(again).toContain('{"status":"drained"}');
    const ready = await fetch(`${adminOrigin}/ready`);
    expect([ready.status, await ready.json()]).toEqual([503, { status: 'draining' }]);
    await expectProblem(await fetch(`${runOrigin}/v4/p/a/f`, { method: 'POST', body: '{}' }), 503, 'draining');
  });

  it('keeps passing liveness once drained until drainedLivenessMs, then fails it, so a replica not stopped is restarted', async () => {
    const stale = createAdminServer(createAdminInterface(replica, { drain: { pod: null }, drainedLivenessMs: 0 }));
    const origin = await listen(stale);
    try {
      // The same drained replica, behind the default bound (a minute) and behind none.
      const fresh = await fetch(`${adminOrigin}/healthz`);
      expect([fresh.status, await fresh.json()]).toEqual([200, { status: 'ok' }]);
      const expired = await fetch(`${origin}/healthz`);
      expect(expired.status).toBe(503);
      expect(await expired.json()).toMatchObject({ status: 'drained', error: expect.stringMatching(/not stopped: restart/) });
    } finally {
      stale.closeAllConnections();
      stale.close();
    }
  });
});

/** A GET of `path` as written (fetch would normalise `//drain` away), the whole answer as text. */
async function rawGet(origin: string, path: string): Promise<string> {
  const { port } = new URL(origin);
  const socket = connect(Number(port), '127.0.0.1');
  // Not half-closed, as a kubelet's hook does not: the answer may take a moment (the pod is read first).
  socket.write(`GET ${path} HTTP/1.1\r\nhost: pod\r\nconnection: close\r\n\r\n`);
  let answer = '';
  for await (const chunk of socket) answer += String(chunk);
  return answer;
}
