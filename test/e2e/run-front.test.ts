// The sidecar run port's front (sidecar/run-front/) at the byte level, to a real Python runtime and a real
// custom app: it answers the common call itself, passes everything else on to node:http on the same
// connection, and keeps HTTP/1.1's rules either way (answers in order, Connection: close, closing).
import { mkdtemp, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, fetch as undiciFetch, type RequestInit as UndiciRequestInit } from 'undici';
import { makeCustomApp } from '../support/custom-app.ts';
import { FIXTURE_APPS, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { jsonPost, RawConnection } from '../support/raw-http.ts';
import { startRunServer, type TestRunServer } from '../support/run-server.ts';
import { EventReader } from '../support/sse.ts';
import { UnreadingCaller } from '../support/unreading-caller.ts';
import { waitFor } from '../support/wait.ts';

let dev: TestDevServer;
let sidecar: TestRunServer;
let gates: string;
const connections: RawConnection[] = [];

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`, await makeCustomApp('web')], bodyLimitBytes: 1024 * 1024 });
  sidecar = await startRunServer(dev.replica);
  gates = await mkdtemp(join(tmpdir(), 'runlet-front-gates-'));
});
afterAll(async () => {
  for (const connection of connections) connection.close();
  await sidecar?.close();
  await dev?.dispose();
});

async function open(origin = sidecar.url): Promise<RawConnection> {
  const connection = await RawConnection.open(origin);
  connections.push(connection);
  return connection;
}

function greeting(body: string): unknown {
  return (JSON.parse(body) as { result: unknown }).result;
}

describe("the run port's front", () => {
  it('answers calls one after another on a kept-alive connection, with the headers node:http would send', async () => {
    const connection = await open();
    for (const name of ['Ada', 'Grace', 'Edsger']) {
      connection.write(jsonPost('/v4/dev/e2e/greet', { name }));
      const answer = await connection.next();
      expect(answer.status).toBe(200);
      expect(answer.headers).toMatchObject({
        'content-type': 'application/json; charset=utf-8',
        connection: 'keep-alive',
        'keep-alive': 'timeout=72',
        'content-length': String(Buffer.byteLength(answer.body)),
      });
      expect(new Date(answer.headers.date!).getTime()).not.toBeNaN();
      const body = JSON.parse(answer.body) as Record<string, unknown>;
      expect(body.run_id).toBe(answer.headers['x-request-id']);
      expect(body.result).toEqual({ greeting: `Hello, ${name}!` });
    }
  });

  it('answers pipelined requests in the order they were sent, even when a later one finishes first', async () => {
    const gate = join(gates, 'pipelined');
    const connection = await open();
    connection.write(jsonPost('/v4/dev/e2e/gated', { gate, result: 'first' }) + jsonPost('/v4/dev/e2e/greet', { name: 'second' }) + jsonPost('/v4/dev/e2e/nope', {}));
    // The gated call holds the line: nothing may be answered before it.
    const firstAnswer = connection.next();
    await writeFile(gate, '');
    expect(greeting((await firstAnswer).body)).toBe('first');
    expect(greeting((await connection.next()).body)).toEqual({ greeting: 'Hello, second!' });
    const third = await connection.next();
    expect(third.status).toBe(404);
    expect(third.headers['content-type']).toBe('application/problem+json');
  });

  it('reads a request that arrives a few bytes at a time', async () => {
    const connection = await open();
    const request = Buffer.from(jsonPost('/v4/dev/e2e/greet', { name: 'slowly' }));
    for (let at = 0; at < request.length; at += 7) {
      connection.write(request.subarray(at, at + 7));
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(greeting((await connection.next()).body)).toEqual({ greeting: 'Hello, slowly!' });
  });

  it('answers Connection: close with connection: close, then closes', async () => {
    const connection = await open();
    connection.write(jsonPost('/v4/dev/e2e/greet', { name: 'bye' }, 'Connection: close\r\n'));
    const answer = await connection.next();
    expect(answer.status).toBe(200);
    expect(answer.headers.connection).toBe('close');
    await connection.closedByServer();
  });

  it('answers its own problems (bad JSON, a body over the limit, a missing function) like node:http would', async () => {
    const connection = await open();
    connection.write('POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\n{nope');
    const invalid = await connection.next();
    expect(invalid.status).toBe(400);
    expect(JSON.parse(invalid.body)).toMatchObject({ type: 'https://runlet.dev/problems#invalid-json', status: 400 });
    connection.write('POST /v4/dev/nowhere/greet HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect((await connection.next()).status).toBe(404);
    connection.write(jsonPost('/v4/dev/e2e/greet', { name: 'still here' }));
    expect(greeting((await connection.next()).body)).toEqual({ greeting: 'Hello, still here!' });
  });

  it('refuses, as llhttp does, a request pipelined behind one that asks to close the connection', async () => {
    const connection = await open();
    connection.write(jsonPost('/v4/dev/e2e/greet', { name: 'first' }, 'Connection: close\r\n') + jsonPost('/v4/dev/e2e/greet', { name: 'second' }));
    await connection.closedByServer();
    expect(connection.received()).toBe('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
  });

  it('reads no further request while a caller leaves its answers unread, so the sidecar holds at most a buffer of them', async () => {
    let serverSide: Socket | undefined;
    const onConnection = (socket: Socket): void => void (serverSide ??= socket);
    sidecar.server.on('connection', onConnection);
    // The caller: small calls answered at once (each a 400 invalid-json problem), never read.
    const requests = 20_000;
    const caller = await UnreadingCaller.start(sidecar.url, requests, 'POST /v4/dev/e2e/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx');
    try {
      const server = await waitFor(() => serverSide, { what: 'the caller\'s connection' });
      await waitFor(() => server.isPaused() && server.writableNeedDrain, { what: 'the front to stop reading' });
      expect(server.writableLength).toBeLessThan(server.writableHighWaterMark + 1024);
      expect(await caller.readAll()).toBe(requests);
    } finally {
      sidecar.server.off('connection', onConnection);
      await caller.close();
    }
  });

  it('streams through node:http\'s response on its own connection, then answers the next call itself', async () => {
    const connection = await open();
    connection.write(jsonPost('/v4/dev/e2e/items', { n: 3 }, 'Accept: text/event-stream\r\n'));
    const stream = await connection.next();
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.headers['transfer-encoding']).toBe('chunked');
    expect(stream.body).toContain('data: {"i":2}');
    connection.write(jsonPost('/v4/dev/e2e/greet', { name: 'next' }));
    const next = await connection.next();
    expect(greeting(next.body)).toEqual({ greeting: 'Hello, next!' });
    // The front's own head (node:http writes `Date:`): the connection is still the front's.
    expect(next.head).toContain('\r\ndate: ');
  });

  it('passes a chunked request on to node:http, on the same connection, after answering one itself', async () => {
    const connection = await open();
    connection.write(jsonPost('/v4/dev/e2e/greet', { name: 'front' }));
    expect(greeting((await connection.next()).body)).toEqual({ greeting: 'Hello, front!' });
    const body = JSON.stringify({ name: 'node' });
    connection.write(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    expect(greeting((await connection.next()).body)).toEqual({ greeting: 'Hello, node!' });
    // node:http keeps the connection from here on, and answers the common call as well.
    connection.write(jsonPost('/v4/dev/e2e/greet', { name: 'after' }));
    expect(greeting((await connection.next()).body)).toEqual({ greeting: 'Hello, after!' });
  });

  it('passes on, with every byte, a request pipelined behind one it answers', async () => {
    const connection = await open();
    connection.write(
      jsonPost('/v4/dev/e2e/greet', { name: 'one' }) +
        'POST /v4/dev/web/echo?x=1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello' +
        jsonPost('/v4/dev/e2e/greet', { name: 'three' }),
    );
    expect(greeting((await connection.next()).body)).toEqual({ greeting: 'Hello, one!' });
    const custom = await connection.next();
    expect(custom.status).toBe(200);
    expect(JSON.parse(custom.body)).toMatchObject({ method: 'POST', path: '/echo', query: '?x=1', body: 'hello' });
    expect(greeting((await connection.next()).body)).toEqual({ greeting: 'Hello, three!' });
  });

  it('passes on a body too large to read whole, and node:http runs it', async () => {
    const connection = await open();
    const text = 'x'.repeat(300 * 1024);
    connection.write(jsonPost('/v4/dev/e2e/echo', { text }));
    const answer = await connection.next();
    expect(answer.status).toBe(200);
    expect(greeting(answer.body)).toEqual({ text });
  });

  it('serves a stream and a custom app on a connection it has answered on, and the common call after', async () => {
    const agent = new Agent({ connections: 1 });
    let accepted = 0;
    const countConnection = (): void => void accepted++;
    sidecar.server.on('connection', countConnection);
    try {
      // undici's own fetch: the one that takes this Agent, which keeps every call on one connection.
      const call = (path: string, init: UndiciRequestInit = {}) => undiciFetch(`${sidecar.url}${path}`, { ...init, dispatcher: agent });
      const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
        call(path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });

      expect(await (await post('/v4/dev/e2e/greet', { name: 'a' })).json()).toMatchObject({ result: { greeting: 'Hello, a!' } });
      const stream = await post('/v4/dev/e2e/items', { n: 3 }, { accept: 'text/event-stream' });
      expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const events = await new EventReader(stream.body as ReadableStream<Uint8Array>).rest();
      expect(events.map((event) => event.data)).toEqual(expect.arrayContaining(['{"i":0}', '{"i":1}', '{"i":2}']));
      // A custom app's call is node:http's (its body is streamed to the app); the connection stays with it.
      const custom = await call('/v4/dev/web/things/1', { method: 'DELETE' });
      expect(await custom.json()).toMatchObject({ method: 'DELETE', path: '/things/1' });
      expect(await (await post('/v4/dev/e2e/greet', { name: 'b' })).json()).toMatchObject({ result: { greeting: 'Hello, b!' } });
      expect(accepted).toBe(1);
    } finally {
      sidecar.server.off('connection', countConnection);
      await agent.close();
    }
  });
});

describe('closing the run port', () => {
  it('closes idle connections at once, and a busy one after its answer', async () => {
    const own = await startRunServer(dev.replica);
    const gate = join(gates, 'closing');
    const idle = await open(own.url);
    idle.write(jsonPost('/v4/dev/e2e/greet', { name: 'idle' }));
    await idle.next();
    const busy = await open(own.url);
    busy.write(jsonPost('/v4/dev/e2e/gated', { gate, result: 'finished' }));
    // The gated call is in flight once the runtime has it: wait for it among the replica's active runs.
    await waitForActiveRun();
    const closed = new Promise<void>((resolve) => own.server.close(() => resolve()));
    await idle.closedByServer();
    await writeFile(gate, '');
    const answer = await busy.next();
    expect(greeting(answer.body)).toBe('finished');
    await busy.closedByServer();
    await closed;
  });
});

async function waitForActiveRun(): Promise<void> {
  await waitFor(() => dev.replica.activeRuns.size > 0, { what: 'the gated run to start' });
}
