// Who `runlet dev` serves (local/dev-request-guard.ts). It has no authentication by default and listens on
// loopback, where every page the user's browser has open can reach it: a page of another site by its own name
// rebound to 127.0.0.1 (DNS rebinding), or by a cross-site request. Such pages may call functions with a JSON
// body (a browser preflights that; the run interface is for local front ends), but not read runlet dev's state
// through a rebound name, nor drain it, cancel its runs or touch its keys, whatever the path's spelling. Its
// own dashboard, curl and `runlet` may. Hostile requests are written on raw sockets, paths exactly as sent.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawConnection, type RawAnswer } from '../support/raw-http.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { waitFor } from '../support/wait.ts';

const EVIL = 'http://attacker.example';
let dev: TestDevServer;
let port: string;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [join(FIXTURE_APPS, 'e2e')] });
  port = new URL(dev.url).port;
});

afterAll(async () => {
  await dev?.dispose();
});

/** One request written as given on a new connection; `head` holds the request line and headers, without the blank line. */
async function raw(head: string, body = ''): Promise<RawAnswer> {
  const connection = await RawConnection.open(dev.url);
  try {
    connection.write(`${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    return await connection.next();
  } finally {
    connection.close();
  }
}

async function runStatus(runId: string): Promise<string> {
  return ((await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${runId}`)).json()) as { item: { status: string } }).item.status;
}

async function startLongRun(): Promise<string> {
  const accepted = await postJson(`${dev.url}/v4/dev/e2e/slow_items?async=true`, { n: 600, pause: 0.1 });
  expect(accepted.status).toBe(202);
  const runId = ((await accepted.json()) as { run_id: string }).run_id;
  await waitFor(async () => (await runStatus(runId)) === 'running', { what: 'the run running' });
  return runId;
}

function problemOf(answer: RawAnswer): { type: string; detail: string } {
  expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
  return JSON.parse(answer.body) as { type: string; detail: string };
}

describe('runlet dev and the Host header (DNS rebinding)', () => {
  it('serves loopback names, on any port, in any case', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `app.localhost:${port}`, `LocalHost:${port}`, '127.0.0.1', 'localhost:1']) {
      const answer = await raw(`GET /v2/projects/dev/apps/e2e/runs HTTP/1.1\r\nHost: ${host}`);
      expect([host, answer.status]).toEqual([host, 200]);
    }
  });

  it('answers any other name 421 with the way to allow it: reads, key making and run calls alike, through node:http and the front', async () => {
    const runId = await startLongRun();
    const hosts = [`attacker.example:${port}`, `localhost.attacker.example:${port}`, `127.0.0.1.nip.io:${port}`, `127.0.0.2:${port}`, `localhost.:${port}`, `localhost@attacker.example:${port}`, `[::2]:${port}`, '0.0.0.0'];
    for (const host of hosts) {
      // What a rebinding page sends: its own origin, same-origin as far as its browser knows.
      const browser = `Host: ${host}\r\nOrigin: http://${host}\r\nSec-Fetch-Site: same-origin`;
      const reads = [`/v2/projects/dev/apps/e2e/runs`, `/v2/projects/dev/apps/e2e/runs/${runId}`, '/v2/projects/dev/keys', '/', '/admin/metrics'];
      for (const path of reads) {
        const answer = await raw(`GET ${path} HTTP/1.1\r\n${browser}`);
        expect([host, path, answer.status]).toEqual([host, path, 421]);
        expect(problemOf(answer)).toMatchObject({ type: 'https://runlet.dev/problems#request-rejected', detail: expect.stringContaining('--allow-host') });
      }
      const key = await raw(`POST /v2/projects/dev/keys HTTP/1.1\r\n${browser}\r\nContent-Type: application/json`, '{"name":"stolen","expiresAt":"2099-01-01T00:00:00Z"}');
      expect(key.status).toBe(421);
      // A call the front reads whole, and one whose body it has not yet (screened on its head).
      expect((await raw(`POST /v4/dev/e2e/greet HTTP/1.1\r\n${browser}\r\nContent-Type: application/json`, '{"name":"x"}')).status).toBe(421);
      const connection = await RawConnection.open(dev.url);
      connection.write(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":`);
      expect((await connection.next()).status).toBe(421);
      connection.close();
    }
    const noHost = await raw('GET /v2/projects/dev/apps/e2e/runs HTTP/1.0');
    expect(noHost.status).toBe(421);
    expect(problemOf(noHost).detail).toContain('without a Host header');
    expect(await runStatus(runId)).toBe('running');
    expect(dev.replica.draining).toBe(false);
    await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${runId}/cancel`, { method: 'POST', headers: { 'x-runlet-client': 'test' } });
  });

  it('serves the names --allow-host adds, and no others', async () => {
    const other = await startTestDevServer({ appDirs: [], allowedHosts: ['devbox.internal', '10.0.0.5'] });
    try {
      const otherPort = new URL(other.url).port;
      for (const [host, status] of [['devbox.internal', 200], [`DEVBOX.internal:${otherPort}`, 200], ['10.0.0.5:80', 200], ['localhost', 200], ['box.internal', 421]] as const) {
        const connection = await RawConnection.open(other.url);
        connection.write(`GET /v2/projects/dev/apps HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
        expect([host, (await connection.next()).status]).toEqual([host, status]);
        connection.close();
      }
    } finally {
      await other.dispose();
    }
  });
});

describe('runlet dev and pages of other origins', () => {
  const crossSite = [`Origin: ${EVIL}`, 'Origin: null', 'Sec-Fetch-Site: cross-site', 'Sec-Fetch-Site: same-site', `Origin: http://localhost:${Number(port) + 1}`];

  it('judges the path as routed: no spelling of a cancel or a drain gets past it', async () => {
    const runId = await startLongRun();
    const cancels = [
      `/v2/projects/dev/apps/e2e/runs/${runId}/cancel`,
      `/%762/projects/dev/apps/e2e/runs/${runId}/cancel`,
      `/v2/projects/%64ev/apps/%65%32%65/runs/${runId}/%63ancel`,
      `//v2/projects/dev/apps/e2e/runs/${runId}/cancel`,
      `/v2//projects/dev/apps/e2e/runs/${runId}/cancel`,
      `/v4/../v2/projects/dev/apps/e2e/runs/${runId}/cancel`,
      `/v2/projects/dev/apps/e2e/runs/${runId}/./cancel`,
      `/V2/projects/dev/apps/e2e/runs/${runId}/cancel`,
      `/v2/projects/dev/apps/e2e/runs/${runId}/CANCEL`,
    ];
    const drains = ['/admin/drain', '/admin/%64rain', '/%61dmin/drain', '/admin/drain/', '//admin/drain', '/admin//drain', '/admin/./drain', '/v4/../admin/drain', '/Admin/drain', '/ADMIN/DRAIN', '/admin/drain?x=1'];
    for (const path of [...cancels, ...drains]) {
      for (const header of crossSite) {
        const answer = await raw(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${header}`);
        expect([path, header, answer.status >= 400]).toEqual([path, header, true]);
      }
      // A GET, as an image tag of any page sends it, neither.
      const get = await raw(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nSec-Fetch-Site: cross-site`);
      expect([path, get.status >= 400]).toEqual([path, true]);
      // And a form-like POST without a browser's headers (an older browser, a plain client): no JSON, no header.
      const bare = await raw(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/x-www-form-urlencoded`, 'a=b');
      expect([path, bare.status >= 400]).toEqual([path, true]);
    }
    expect(await runStatus(runId)).toBe('running');
    expect(dev.replica.draining).toBe(false);
    expect((await fetch(`${dev.url}/admin/ready`)).status).toBe(200);

    // The decoded spelling is the route: refused for what it is (403), then let through with the header.
    const encoded = await raw(`POST /%762/projects/dev/apps/e2e/runs/${runId}/cancel HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: ${EVIL}`);
    expect([encoded.status, problemOf(encoded).detail]).toEqual([403, expect.stringContaining('may not POST')]);
    const allowed = await raw(`POST /%762/projects/dev/apps/e2e/runs/${runId}/cancel HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Runlet-Client: test`);
    expect(allowed.status).toBe(202);
  });

  it('drains on POST only: a GET of /admin/drain, however spelled, is 405', async () => {
    for (const path of ['/admin/drain', '/admin/%64rain']) {
      const answer = await raw(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}`);
      expect([path, answer.status, answer.headers.allow]).toEqual([path, 405, 'POST']);
    }
    expect(dev.replica.draining).toBe(false);
  });

  it('takes a state change outside the run interface with JSON, the X-Runlet-Client header or from its own page only', async () => {
    const runId = await startLongRun();
    const cancel = `/v2/projects/dev/apps/e2e/runs/${runId}/cancel`;
    for (const headers of ['', 'Content-Type: text/plain', 'Content-Type: application/x-www-form-urlencoded', 'Content-Type: multipart/form-data; boundary=x', 'Content-Type: text/plain; a=application/json', 'Sec-Fetch-Site: none']) {
      const answer = await raw(`POST ${cancel} HTTP/1.1\r\nHost: 127.0.0.1:${port}${headers ? `\r\n${headers}` : ''}`);
      expect([headers, answer.status]).toEqual([headers, 403]);
      expect(problemOf(answer).detail).toContain('x-runlet-client');
    }
    // Keys too, before their route reads anything (runlet dev without an auth key makes none anyway).
    const key = await raw(`POST /v2/projects/dev/keys HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: text/plain`, '{"name":"k","expiresAt":"2099-01-01T00:00:00Z"}');
    expect([key.status, problemOf(key).type]).toEqual([403, 'https://runlet.dev/problems#forbidden']);
    expect(await runStatus(runId)).toBe('running');

    // Its own page, under either loopback name (the dashboard sends no body with a cancel).
    const own = await raw(`POST ${cancel} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: http://localhost:${port}\r\nSec-Fetch-Site: same-origin`);
    expect(own.status).toBe(202);
    const other = await startLongRun();
    expect((await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${other}/cancel`, { method: 'POST', headers: { 'x-runlet-client': 'curl' } })).status).toBe(202);
    // A method a page cannot send without a preflight needs nothing more (404: no such key here).
    expect((await fetch(`${dev.url}/v2/projects/dev/keys/k`, { method: 'DELETE' })).status).not.toBe(403);
  });

  it('lets any page read, and call a function with a JSON body; a body a form could send only from its own pages and other clients', async () => {
    expect((await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs`, { headers: { origin: EVIL } })).status).toBe(200);
    const json = { method: 'POST', headers: { origin: EVIL, 'sec-fetch-site': 'cross-site', 'content-type': 'application/json' }, body: '{"name":"x"}' };
    expect((await fetch(`${dev.url}/v4/dev/e2e/greet`, json)).status).toBe(200);
    for (const header of crossSite) {
      // Written by hand: a cross-site form's POST, read whole by the front.
      const answer = await raw(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${header}\r\nContent-Type: text/plain`, '{"name":"x"}');
      expect([header, answer.status]).toEqual([header, 403]);
      expect(problemOf(answer).detail).toContain('without a JSON body');
      // Its body still to come: refused on its head.
      const connection = await RawConnection.open(dev.url);
      connection.write(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${header}\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n{`);
      expect((await connection.next()).status).toBe(403);
      connection.close();
      // Chunked: read by node:http, judged by fastify's hook on the route it matched.
      const chunked = await RawConnection.open(dev.url);
      chunked.write(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${header}\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\nc\r\n{"name":"x"}\r\n0\r\n\r\n`);
      expect((await chunked.next()).status).toBe(403);
      chunked.close();
    }
    // curl -d sends a form's content type, and no Origin: a function call as the README shows it.
    const curl = await raw(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: localhost:${port}\r\nContent-Type: application/x-www-form-urlencoded`, '{"name":"x"}');
    expect(curl.status).toBe(200);
    // No preflight is granted: a page of another origin cannot send a JSON call from a browser.
    const preflight = await fetch(`${dev.url}/v4/dev/e2e/greet`, { method: 'OPTIONS', headers: { origin: EVIL, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } });
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe("runlet dev's request framing", () => {
  it('refuses HTTP/1.0 with Transfer-Encoding (400) and closes the connection', async () => {
    const connection = await RawConnection.open(dev.url);
    connection.write(`POST /v4/dev/e2e/greet HTTP/1.0\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nc\r\n{"name":"x"}\r\n0\r\n\r\n`);
    const answer = await connection.next();
    expect(answer.status).toBe(400);
    expect(problemOf(answer).type).toBe('https://runlet.dev/problems#malformed-request');
    await connection.closedByServer();
    connection.close();
  });
});

describe("runlet dev's data dir", () => {
  it('is private to its user: the folder 0700, the run store and its journal 0600', async () => {
    expect((await postJson(`${dev.url}/v4/dev/e2e/greet?async=true`, { name: 'x' })).status).toBe(202);
    expect((await stat(dev.dataDir)).mode & 0o777).toBe(0o700);
    for (const name of ['runs.sqlite', 'runs.sqlite-wal', 'runs.sqlite-shm']) {
      expect([name, (await stat(join(dev.dataDir, name))).mode & 0o777]).toEqual([name, 0o600]);
    }
  });
});
