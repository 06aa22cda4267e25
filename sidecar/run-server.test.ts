// The pod sidecar's two plain node:http servers: the run port (its document built on first request, its
// not-a-route answers) and the admin port. Runs themselves are covered through this server by test/e2e.
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCUMENT_FILES, noRuns } from '../docs/openapi-documents.ts';
import { createAdminInterface, createAdminServer } from './admin-interface.ts';
import { AppRegistry, AppTarget } from './apps.ts';
import { newDrainToken } from './drain-token.ts';
import { LoadMeter } from './load/load-meter.ts';
import { Replica } from './replica.ts';
import { createRunInterface } from './run-interface.ts';
import { createRunServer } from './run-server.ts';

const logger = pino({ level: 'silent' });
const apps = new AppRegistry();
const target = new AppTarget({ projectId: 'p', appName: 'a', runtime: 'python', replicaConcurrency: 1, responseGracePeriodSeconds: 5 });
apps.add(target);
const load = new LoadMeter(target.admission);
const replica = new Replica({ apps, store: noRuns, replicaName: 'test', logger });
const runServer = createRunServer(createRunInterface(replica), logger);
const DRAIN_TOKEN = newDrainToken();
const adminServer = createAdminServer(createAdminInterface(replica, { drain: { token: DRAIN_TOKEN }, cancels: { projectId: 'p', appName: 'a' }, load }));
let runOrigin: string;
let adminOrigin: string;

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  runOrigin = await listen(runServer);
  adminOrigin = await listen(adminServer);
});
afterAll(async () => {
  for (const server of [runServer, adminServer]) {
    server.closeAllConnections();
    server.close();
  }
  await replica.deliverer.close();
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

  it('drains for no one without the drain token: a bare, wrong or truncated token gets 403, and the replica serves on', async () => {
    const otherToken = newDrainToken();
    for (const path of ['/drain', '/drain/', `/drain/${otherToken}`, `/drain/${DRAIN_TOKEN.slice(0, -1)}`, `/drain/${DRAIN_TOKEN}x`, `//drain`]) {
      for (const method of ['GET', 'POST']) {
        const refused = await fetch(`${adminOrigin}${path}`, { method });
        expect([path, method, refused.status]).toEqual([path, method, 403]);
        expect(((await refused.json()) as { error: string }).error).toMatch(/drain token/);
      }
    }
    expect(replica.draining).toBe(false);
    const ready = await fetch(`${adminOrigin}/ready`);
    expect(await ready.json()).toEqual({ status: 'starting' });
  });

  it('drains for no one when no drain token is configured: SIGTERM is the way then', async () => {
    const closed = createAdminServer(createAdminInterface(replica, { drain: { token: null } }));
    const origin = await listen(closed);
    try {
      for (const path of ['/drain', `/drain/${DRAIN_TOKEN}`]) {
        const refused = await fetch(`${origin}${path}`);
        expect(refused.status).toBe(403);
        expect(((await refused.json()) as { error: string }).error).toMatch(/no drain token \(RUNLET_DRAIN_TOKEN\).*SIGTERM/);
      }
      expect(replica.draining).toBe(false);
    } finally {
      closed.closeAllConnections();
      closed.close();
    }
  });

  it('cancels for no one without the drain token, and answers 404 for a run not in flight here, whatever its id', async () => {
    const runId = '01a1fd40-0000-7000-8000-000000000000';
    for (const path of [`/cancel/${runId}`, `/cancel/${newDrainToken()}/${runId}`, `/cancel/${DRAIN_TOKEN.slice(0, -1)}/${runId}`, `/cancel//${runId}`]) {
      const refused = await fetch(`${adminOrigin}${path}`, { method: 'POST' });
      expect([path, refused.status]).toEqual([path, 403]);
      expect(((await refused.json()) as { error: string }).error).toMatch(/drain token/);
    }
    for (const id of [runId, '%E0%A4%A', '..%2F..%2Fdrain']) {
      const unknown = await fetch(`${adminOrigin}/cancel/${DRAIN_TOKEN}/${id}`, { method: 'POST' });
      expect([id, unknown.status]).toEqual([id, 404]);
      expect(((await unknown.json()) as { error: string }).error).toMatch(/not in flight on this replica/);
    }
    const read = await fetch(`${adminOrigin}/cancel/${DRAIN_TOKEN}/${runId}`);
    expect(read.status, 'a cancel is a POST').toBe(405);
    expect(await read.text(), 'the token is never echoed').not.toContain(DRAIN_TOKEN);
    expect(replica.draining).toBe(false);
  });

  // Last: the replica stays drained.
  it('drains on POST or GET /drain/<token> (also as a kubelet before 1.26 asks it, //drain/<token>), then reports draining and refuses runs', async () => {
    const drained = await fetch(`${adminOrigin}/drain/${DRAIN_TOKEN}`, { method: 'POST' });
    expect([drained.status, await drained.json()]).toEqual([200, { status: 'drained' }]);
    const again = await rawGet(adminOrigin, `//drain/${DRAIN_TOKEN}`);
    expect(again).toMatch(/^HTTP\/1\.1 200 /);
    expect(again).toContain('{"status":"drained"}');
    const ready = await fetch(`${adminOrigin}/ready`);
    expect([ready.status, await ready.json()]).toEqual([503, { status: 'draining' }]);
    await expectProblem(await fetch(`${runOrigin}/v4/p/a/f`, { method: 'POST', body: '{}' }), 503, 'draining');
  });

  it('keeps passing liveness once drained until drainedLivenessMs, then fails it, so a replica not stopped is restarted', async () => {
    const stale = createAdminServer(createAdminInterface(replica, { drain: { token: DRAIN_TOKEN }, drainedLivenessMs: 0 }));
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
  socket.end(`GET ${path} HTTP/1.1\r\nhost: pod\r\nconnection: close\r\n\r\n`);
  let answer = '';
  for await (const chunk of socket) answer += String(chunk);
  return answer;
}
