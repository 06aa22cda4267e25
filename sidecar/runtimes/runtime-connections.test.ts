// The runtime client against a scripted server: answers cut at every byte, chunked streams, connection reuse
// and its limits, and every way a connection can end mid-call.
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RuntimeConnectionError, RuntimeConnections, stopperOf, type CallStopper, type RuntimeRequest } from './runtime-connections.ts';

interface Received {
  head: string;
  body: Buffer;
  socket: Socket;
}

/** A server that hands each complete request (content-length framed) to `answer`. */
async function scriptedServer(answer: (request: Received) => void): Promise<{ origin: string; server: Server; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = buffered.toString('latin1', 0, end);
        const length = Number(/content-length: (\d+)/.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        const body = buffered.subarray(end + 4, end + 4 + length);
        buffered = buffered.subarray(end + 4 + length);
        answer({ head, body, socket });
      }
    });
    socket.on('error', () => undefined);
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address() as { port: number };
  return { origin: `http://127.0.0.1:${address.port}`, server, connections: () => connections };
}

/** Polls a condition of this process's own state, each turn of the event loop, within a bound. */
async function waitUntil(condition: () => boolean): Promise<void> {
  const bound = performance.now() + 5_000;
  while (!condition()) {
    if (performance.now() > bound) throw new Error('the condition never held');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Writes `bytes` one at a time, each in its own TCP segment as far as the kernel allows. */
async function dribble(socket: Socket, bytes: string): Promise<void> {
  for (const byte of Buffer.from(bytes)) {
    socket.write(Buffer.from([byte]));
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function call(overrides: Partial<RuntimeRequest> = {}): RuntimeRequest {
  return { path: '/run', runId: '01a1fd47-de3c-732f-bf96-53ef207c3d83', stream: false, body: Buffer.from('{"name":"Ada"}'), stopper: { stopReason: null, onStop: null }, ...overrides };
}

const servers: Server[] = [];
const pools: RuntimeConnections[] = [];

function connectionsTo(origin: string, maxConnections = 4): RuntimeConnections {
  const pool = new RuntimeConnections(origin, { maxConnections });
  pools.push(pool);
  return pool;
}

afterEach(() => {
  for (const pool of pools.splice(0)) pool.destroy();
  for (const server of servers.splice(0)) server.close();
});

const JSON_ANSWER = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 26\r\n\r\n{"greeting":"Hello, Ada!"}';
const chunk = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
// 90 characters of head, then the chunks: cutting it at 110 cuts it mid-stream.
const STREAM_ANSWER =
  'HTTP/1.1 200 OK\r\ncontent-type: application/x-runlet-stream\r\ntransfer-encoding: chunked\r\n\r\n' +
  chunk('i1\n') + chunk('i"two\\nö"\n') + chunk('d\n') + '0\r\n\r\n';

describe('RuntimeConnections', () => {
  it('sends one call as the protocol says, with its id, stream flag and body', async () => {
    const received: Received[] = [];
    const { origin } = await scriptedServer((request) => {
      received.push(request);
      request.socket.write(JSON_ANSWER);
    });
    const pool = connectionsTo(origin);
    const big = Buffer.alloc(200_000, 'a');
    await pool.request(call({ stream: true }));
    await pool.request(call({ body: big }));
    const [first, second] = received;
    expect(first!.head.split('\r\n')).toEqual([
      'POST /run HTTP/1.1',
      `host: ${new URL(origin).host}`,
      'content-type: application/json',
      'x-request-id: 01a1fd47-de3c-732f-bf96-53ef207c3d83',
      'x-runlet-stream: 1',
      'content-length: 14',
    ]);
    expect(first!.body.toString()).toBe('{"name":"Ada"}');
    expect(second!.head).not.toContain('x-runlet-stream');
    expect(second!.body.equals(big)).toBe(true);
  });

  it('reads an answer cut at every byte, then reuses the connection', async () => {
    const { origin, connections } = await scriptedServer((request) => void dribble(request.socket, JSON_ANSWER));
    const pool = connectionsTo(origin);
    for (let i = 0; i < 2; i++) {
      const response = await pool.request(call());
      expect(response).toMatchObject({ statusCode: 200, contentType: 'application/json', allow: null, stream: null });
      expect(response.body!.toString()).toBe('{"greeting":"Hello, Ada!"}');
    }
    expect(connections()).toBe(1);
  });

  it('decodes a chunked stream cut at every byte, and reuses the connection after its last chunk', async () => {
    const { origin, connections } = await scriptedServer((request) =>
      void dribble(request.socket, request.head.includes('x-runlet-stream') ? STREAM_ANSWER : JSON_ANSWER),
    );
    const pool = connectionsTo(origin);
    const response = await pool.request(call({ stream: true }));
    expect(response.body).toBeNull();
    const text = Buffer.concat(await response.stream!.toArray()).toString('utf8');
    expect(text).toBe('i1\ni"two\\nö"\nd\n');
    expect((await pool.request(call())).statusCode).toBe(200);
    expect(connections()).toBe(1);
  });

  it('passes on problem answers with their Allow header, and drops a connection the runtime closes after its answer', async () => {
    const { origin, connections } = await scriptedServer((request) =>
      request.socket.write('HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/problem+json\r\nallow: POST\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}'),
    );
    const pool = connectionsTo(origin);
    const response = await pool.request(call());
    expect(response).toMatchObject({ statusCode: 405, contentType: 'application/problem+json', allow: 'POST' });
    await pool.request(call());
    expect(connections()).toBe(2);
  });

  it('fails a call whose connection closes before the answer is complete', async () => {
    const { origin } = await scriptedServer((request) => request.socket.end(JSON_ANSWER.slice(0, 60)));
    const failure = await connectionsTo(origin).request(call()).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RuntimeConnectionError);
    expect((failure as RuntimeConnectionError).code).toBe('RUNTIME_CONNECTION_CLOSED');
  });

  it('ends a stream with an error when its connection closes mid-stream', async () => {
    const { origin } = await scriptedServer((request) => request.socket.end(STREAM_ANSWER.slice(0, 110)));
    const response = await connectionsTo(origin).request(call({ stream: true }));
    const failure = await response.stream!.toArray().catch((error: unknown) => error);
    expect((failure as RuntimeConnectionError).code).toBe('RUNTIME_CONNECTION_CLOSED');
  });

  it('closes the connection when a call is aborted, failing it with the abort reason', async () => {
    let serverSide: Socket | null = null;
    const { origin } = await scriptedServer((request) => (serverSide = request.socket));
    const abort = new AbortController();
    const pending = connectionsTo(origin).request(call({ stopper: stopperOf(abort.signal) }));
    while (serverSide === null) await new Promise((resolve) => setImmediate(resolve));
    abort.abort(new Error('run stopped: timeout'));
    await expect(pending).rejects.toThrow('run stopped: timeout');
    await once(serverSide as Socket, 'close');
  });

  it('fails a call stopped while it waits for a connection, and leaves its stopper free once a call ends', async () => {
    const { origin } = await scriptedServer(() => undefined);
    const pool = connectionsTo(origin, 1);
    const first: CallStopper = { stopReason: null, onStop: null };
    const waiting: CallStopper = { stopReason: null, onStop: null };
    const busy = pool.request(call({ stopper: first }));
    const queued = pool.request(call({ stopper: waiting }));
    while (waiting.onStop === null) await new Promise((resolve) => setImmediate(resolve));
    waiting.onStop(new Error('run stopped: shutdown'));
    await expect(queued).rejects.toThrow('run stopped: shutdown');
    first.onStop!(new Error('run stopped: timeout'));
    await expect(busy).rejects.toThrow('run stopped: timeout');
    expect([first.onStop, waiting.onStop]).toEqual([null, null]);
  });

  it('refuses at once a call whose stopper has already stopped', async () => {
    const { origin } = await scriptedServer(() => undefined);
    const stopped: CallStopper = { stopReason: new Error('run stopped: timeout'), onStop: null };
    await expect(connectionsTo(origin).request(call({ stopper: stopped }))).rejects.toThrow('run stopped: timeout');
  });

  it('closes the connection when a stream is destroyed before its end', async () => {
    let serverSide: Socket | null = null;
    const { origin, connections } = await scriptedServer((request) => {
      if (!request.head.includes('x-runlet-stream')) return void request.socket.write(JSON_ANSWER);
      serverSide = request.socket;
      request.socket.write(STREAM_ANSWER.slice(0, 110));
    });
    const pool = connectionsTo(origin);
    const response = await pool.request(call({ stream: true }));
    response.stream!.destroy();
    await once(serverSide!, 'close');
    expect((await pool.request(call())).statusCode).toBe(200);
    expect(connections()).toBe(2);
  });

  it('fails calls in flight once destroyed (the app was detached), and later ones as never sent', async () => {
    const { origin } = await scriptedServer(() => undefined);
    const pool = connectionsTo(origin);
    const pending = pool.request(call());
    await new Promise((resolve) => setTimeout(resolve, 20));
    pool.destroy();
    await expect(pending).rejects.toMatchObject({ code: 'RUNTIME_DETACHED' });
    await expect(pool.request(call())).rejects.toMatchObject({ code: 'RUNTIME_UNREACHABLE' });
  });

  it('fails a call whose connection is refused as never sent, and says the runtime is gone', async () => {
    const { origin, server } = await scriptedServer(() => undefined);
    await new Promise((resolve) => server.close(resolve));
    let gone = 0;
    const pool = new RuntimeConnections(origin, { maxConnections: 4, onRuntimeGone: () => gone++ });
    pools.push(pool);
    await expect(pool.request(call())).rejects.toMatchObject({ code: 'RUNTIME_UNREACHABLE' });
    expect(gone).toBe(1);
  });

  it('says the runtime is gone when it closes a connection unasked, idle or mid-call, and not when a call is stopped', async () => {
    const sockets: Socket[] = [];
    const { origin } = await scriptedServer((request) => {
      sockets.push(request.socket);
      if (sockets.length === 1) request.socket.write(JSON_ANSWER);
    });
    let gone = 0;
    const pool = new RuntimeConnections(origin, { maxConnections: 4, onRuntimeGone: () => gone++ });
    pools.push(pool);
    expect((await pool.request(call())).statusCode).toBe(200);
    sockets[0]!.destroy();
    await waitUntil(() => gone === 1);

    const midCall = pool.request(call());
    await waitUntil(() => sockets.length === 2);
    sockets[1]!.destroy();
    await expect(midCall).rejects.toMatchObject({ code: 'RUNTIME_CONNECTION_CLOSED' });
    expect(gone).toBe(2);

    const controller = new AbortController();
    const stopped = pool.request(call({ stopper: stopperOf(controller.signal) }));
    await waitUntil(() => sockets.length === 3);
    const closed = once(sockets[2]!, 'close');
    controller.abort(new Error('the run was stopped'));
    await expect(stopped).rejects.toThrow('the run was stopped');
    await closed;
    expect(gone).toBe(2);
  });

  it('holds calls beyond its connection limit until a connection is free', async () => {
    const sockets: Socket[] = [];
    const { origin, connections } = await scriptedServer((request) => sockets.push(request.socket));
    const pool = connectionsTo(origin, 1);
    const first = pool.request(call());
    const second = pool.request(call());
    while (sockets.length < 1) await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sockets).toHaveLength(1);
    sockets[0]!.write(JSON_ANSWER);
    await first;
    while (sockets.length < 2) await new Promise((resolve) => setImmediate(resolve));
    sockets[1]!.write(JSON_ANSWER);
    await second;
    expect(connections()).toBe(1);
  });
});
