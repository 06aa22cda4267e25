// The pod sidecar's two plain node:http servers: the run port (its document built on first request, its
// not-a-route answers) and the admin port. Runs themselves are covered through this server by test/e2e.
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCUMENT_FILES, noRuns } from '../docs/openapi-documents.ts';
import { createAdminInterface, createAdminServer } from './admin-interface.ts';
import { AppRegistry, AppTarget } from './apps.ts';
import { Replica } from './replica.ts';
import { createRunInterface } from './run-interface.ts';
import { createRunServer } from './run-server.ts';

const logger = pino({ level: 'silent' });
const apps = new AppRegistry();
apps.add(new AppTarget({ projectId: 'p', appName: 'a', runtime: 'python', replicaConcurrency: 1, responseGracePeriodSeconds: 5 }));
const replica = new Replica({ apps, store: noRuns, replicaName: 'test', logger });
const runServer = createRunServer(createRunInterface(replica), logger);
const adminServer = createAdminServer(createAdminInterface(replica));
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
      expect(((await response.json()) as { error: string }).error).toMatch(/GET \/healthz, \/ready, \/metrics; GET or POST \/drain/);
    }
  });

  // Last: the replica stays drained.
  it('drains on POST or GET /drain, then reports draining and refuses runs', async () => {
    const drained = await fetch(`${adminOrigin}/drain`, { method: 'POST' });
    expect([drained.status, await drained.json()]).toEqual([200, { status: 'drained' }]);
    const again = await fetch(`${adminOrigin}/drain`);
    expect([again.status, await again.json()]).toEqual([200, { status: 'drained' }]);
    const ready = await fetch(`${adminOrigin}/ready`);
    expect([ready.status, await ready.json()]).toEqual([503, { status: 'draining' }]);
    await expectProblem(await fetch(`${runOrigin}/v4/p/a/f`, { method: 'POST', body: '{}' }), 503, 'draining');
  });
});
