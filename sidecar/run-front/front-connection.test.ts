// The front's connection handling on its own, over real sockets: which requests it answers, and that a socket
// passed on carries every byte it has not answered. The run interface here answers at once with what it got;
// test/e2e/run-front.test.ts has the real pipeline behind it.
import { once } from 'node:events';
import { createServer, Socket, type AddressInfo, type Server } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { jsonPost, RawConnection } from '../../test/support/raw-http.ts';
import { UnreadingCaller } from '../../test/support/unreading-caller.ts';
import { waitFor } from '../../test/support/wait.ts';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { AnswerSink } from '../../run-request/answer-sink.ts';
import type { WholeRequest } from '../exchange.ts';
import { RequestBudget } from '../../run-request/request-budget.ts';
import type { HeadScreening, RunInterface } from '../run-interface.ts';
import { FrontConnection, type FrontSettings } from './front-connection.ts';

interface Harness {
  origin: string;
  /** The server's side of each connection accepted, in order. */
  sockets: Socket[];
  /** Requests the front handed to the run interface. */
  handled: WholeRequest[];
  /** Resolves once the front passes a socket on: what is then read from it, as node:http would read it. */
  passedOn: Promise<PassedOn>;
  /** Resolves once the first connection has been idle for the keep-alive timeout (its socket's 'timeout'). */
  timedOut: Promise<void>;
  /** Answers to requests whose path says `gated` wait for this. */
  openGate(): void;
  /** The paths of the heads the run interface was asked about before their bodies. */
  screened: string[];
  /** The problem codes of the requests the front refused as they arrived, as it reports them. */
  refusals: string[];
  budget: RequestBudget;
}

/** A socket passed on, read at once (as node:http's connection handling does) into `received`. */
class PassedOn {
  #received = Buffer.alloc(0);
  #wake: (() => void) | null = null;

  constructor(socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#received = Buffer.concat([this.#received, chunk]);
      this.#wake?.();
    });
    // As node:http would: a caller that has gone is let go, so the test's server can close.
    socket.on('end', () => socket.end());
  }

  /** The bytes read, once there are at least `length` of them. */
  async read(length: number): Promise<string> {
    while (this.#received.length < length) await new Promise<void>((resolve) => (this.#wake = resolve));
    return this.#received.toString('latin1');
  }
}

const servers: Server[] = [];
const connections: RawConnection[] = [];
afterEach(async () => {
  for (const connection of connections.splice(0)) connection.close();
  for (const server of servers.splice(0)) {
    server.close();
    await once(server, 'close');
  }
});

/**
 * Answers every whole request with its body on a later turn of the event loop (once `gate` resolves, if its
 * path says `gated`), unless its path says `pass`. A head whose path says `refused` is refused 401 on sight,
 * one that says `verifying` once `gate` resolves (as a new token is refused once verified); `screened` counts
 * the heads it was asked about.
 */
const echoing = (handled: WholeRequest[], gate: Promise<void>, screened: string[] = [], refusals: string[] = []): RunInterface => ({
  handle() {
    throw new Error('the front never calls handle');
  },
  screenHead(url: string): HeadScreening {
    screened.push(url);
    const refusal = new ProblemError(Problems.unauthorized, 'no token', { headers: { 'www-authenticate': 'Bearer' } });
    if (url.includes('refused')) return refusal;
    if (url.includes('verifying')) return gate.then(() => refusal);
    return null;
  },
  bodyBounds: { limitBytes: 1024, idleMs: 60_000, deadlineMs: 60_000, budget: new RequestBudget(1024 * 1024) },
  requestRefused(problem) {
    refusals.push(problem.spec.code);
  },
  handleWhole(request: WholeRequest, answer: AnswerSink): boolean {
    if (request.url.includes('pass')) return false;
    handled.push(request);
    const ready = request.url.includes('gated') ? gate : Promise.resolve();
    void ready.then(() =>
      setImmediate(() => {
        answer.writeHead(200, ['content-type', 'text/plain', 'x-url', request.url]);
        answer.end(request.body.toString('utf8'));
      }),
    );
    return true;
  },
});

async function start(overrides: Partial<FrontSettings> = {}): Promise<Harness> {
  const handled: WholeRequest[] = [];
  let resolvePassedOn!: (passed: PassedOn) => void;
  const passedOn = new Promise<PassedOn>((resolve) => (resolvePassedOn = resolve));
  const passOn = (socket: Socket): void => resolvePassedOn(new PassedOn(socket));
  let openGate!: () => void;
  const gate = new Promise<void>((resolve) => (openGate = resolve));
  let resolveTimedOut!: () => void;
  const timedOut = new Promise<void>((resolve) => (resolveTimedOut = resolve));
  const screened: string[] = [];
  const refusals: string[] = [];
  const settings: FrontSettings = {
    runInterface: echoing(handled, gate, screened, refusals),
    passOn,
    keepAliveTimeoutMs: 60_000,
    maxBodyBytes: 1024,
    headTimeoutMs: 60_000,
    bodyTimeoutMs: 60_000,
    deadlineMs: 60_000,
    budget: new RequestBudget(1024 * 1024),
    ...overrides,
  };
  const sockets: Socket[] = [];
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    sockets.push(socket);
    new FrontConnection(socket, settings, () => undefined);
    socket.once('timeout', resolveTimedOut);
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sockets, handled, passedOn, timedOut, openGate, screened, refusals, budget: settings.budget };
}

async function open(origin: string): Promise<RawConnection> {
  const connection = await RawConnection.open(origin);
  connections.push(connection);
  return connection;
}

describe('FrontConnection', () => {
  it('answers whole POSTs itself, body and headers as read', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    connection.write(jsonPost('/v4/p/a/f?x=1', { a: 1 }, 'X-Webhook-Secret: s\r\n'));
    const answer = await connection.next();
    expect(answer).toMatchObject({ status: 200, body: '{"a":1}' });
    expect(answer.headers['x-url']).toBe('/v4/p/a/f?x=1');
    expect(harness.handled[0]!.headers['x-webhook-secret']).toBe('s');
    expect(harness.handled[0]!.method).toBe('POST');
  });

  it('passes on a request it does not read, with it and everything after it unread', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    const rest = 'GET /v4/openapi.json HTTP/1.1\r\nHost: t\r\n\r\n' + jsonPost('/v4/p/a/f', { after: true });
    connection.write(jsonPost('/v4/p/a/f', { first: true }) + rest);
    expect((await connection.next()).body).toBe('{"first":true}');
    expect(await (await harness.passedOn).read(rest.length)).toBe(rest);
    expect(harness.handled).toHaveLength(1);
  });

  it('passes on a request the run interface declines, from its first byte', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    const request = jsonPost('/v4/p/a/pass', { stream: true });
    connection.write(request);
    expect(await (await harness.passedOn).read(request.length)).toBe(request);
  });

  it('passes on a body longer than it reads whole', async () => {
    const harness = await start({ maxBodyBytes: 10 });
    const connection = await open(harness.origin);
    const request = jsonPost('/v4/p/a/f', { text: 'more than ten bytes' });
    connection.write(request);
    expect(await (await harness.passedOn).read(request.length)).toBe(request);
  });

  it('refuses a head still incomplete after the head timeout as node:http does: 408, then closed', async () => {
    const harness = await start({ headTimeoutMs: 50 });
    const connection = await open(harness.origin);
    connection.write('POST /v4/p/a/f HTTP/1.1\r\nHost: t\r\nContent-Len');
    await connection.closedByServer();
    expect(connection.received()).toBe('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
    expect(harness.handled).toHaveLength(0);
  });

  it('answers 408 request-timeout to a body that stops arriving, then closes', async () => {
    const harness = await start({ bodyTimeoutMs: 100 });
    const connection = await open(harness.origin);
    connection.write('POST /v4/p/a/f HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n{"a"');
    const answer = await connection.next();
    expect(answer.status).toBe(408);
    expect(answer.headers).toMatchObject({ 'content-type': 'application/problem+json', connection: 'close' });
    expect(JSON.parse(answer.body)).toMatchObject({ type: 'https://runlet.dev/problems#request-timeout', status: 408 });
    expect(JSON.parse(answer.body).detail).toContain('after 4 bytes');
    await connection.closedByServer();
    expect(harness.handled).toHaveLength(0);
  });

  it('passes on at once a head with a bare LF, which node:http refuses at once', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    const partial = 'POST /v4/p/a/f HTTP/1.1\nHost: t\n';
    connection.write(partial);
    expect(await (await harness.passedOn).read(partial.length)).toBe(partial);
  });

  it('passes on a request pipelined behind one that asks to close, for node:http to refuse as llhttp does', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    const bytes = jsonPost('/v4/p/a/f', { first: true }, 'Connection: close\r\n') + jsonPost('/v4/p/a/f', { second: true });
    connection.write(bytes);
    expect(await (await harness.passedOn).read(bytes.length)).toBe(bytes);
    expect(harness.handled).toHaveLength(0);
  });

  it('refuses (400, closed) bytes that arrive after a request that asks to close, as node:http does', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    connection.write(jsonPost('/v4/p/a/gated', { first: true }, 'Connection: close\r\n'));
    await waitFor(() => harness.handled.length === 1, { what: 'the first request to be handled' });
    connection.write(jsonPost('/v4/p/a/f', { second: true }));
    await connection.closedByServer();
    expect(connection.received()).toBe('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    harness.openGate();
    expect(harness.handled).toHaveLength(1);
  });

  it('reads no further request while the caller leaves its answers unread, and loses none of them', async () => {
    const harness = await start();
    const requests = 20_000;
    const caller = await UnreadingCaller.start(harness.origin, requests, jsonPost('/v4/p/a/f', {}));
    try {
      // The caller reads nothing: its small receive buffer fills, then the sidecar's send buffer; then the front
      // stops reading, and its requests wait in the kernel and in the caller.
      const server = await waitFor(() => harness.sockets[0]);
      await waitFor(() => server.isPaused() && server.writableNeedDrain, { what: 'the front to stop reading' });
      // One answer past the socket's own buffer at most: nothing else waits in the sidecar for the caller.
      expect(server.writableLength).toBeLessThan(server.writableHighWaterMark + 1024);
      expect(harness.handled.length).toBeLessThan(requests);
      expect(await caller.readAll()).toBe(requests);
    } finally {
      await caller.close();
    }
  });

  it('passes on a head longer than it reads', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    const request = jsonPost('/v4/p/a/f', {}, `X-Long: ${'a'.repeat(9000)}\r\n`);
    connection.write(request);
    expect(await (await harness.passedOn).read(request.length)).toBe(request);
  });

  it('keeps a connection open past its idle timeout while answering, and closes it once idle', async () => {
    const harness = await start({ keepAliveTimeoutMs: 50 });
    const connection = await open(harness.origin);
    connection.write(jsonPost('/v4/p/a/gated', { slow: true }));
    await harness.timedOut;
    harness.openGate();
    expect((await connection.next()).body).toBe('{"slow":true}');
    await connection.closedByServer();
  });

  it('takes a half-close as the caller gone, as node:http does: the connection ends at once', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    connection.socket.end(jsonPost('/v4/p/a/gated', { first: true }) + jsonPost('/v4/p/a/f', { second: true }));
    await connection.closedByServer();
    harness.openGate();
    expect(harness.handled.map((request) => request.url)).toEqual(['/v4/p/a/gated']);
  });
});


/** A head for `path` declaring a body of `length` bytes. */
function postHead(path: string, length: number): string {
  return `POST ${path} HTTP/1.1\r\nHost: t\r\nContent-Length: ${length}\r\n\r\n`;
}

describe('FrontConnection, what a caller costs before it is let in', () => {
  it('refuses a caller its head refuses before the body comes, and holds none of it: the answer arrives while the body is unsent', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    connection.write(postHead('/v4/p/a/refused', 1000) + '{"a":');
    const answer = await connection.next();
    expect(answer.status).toBe(401);
    expect(answer.headers).toMatchObject({ 'www-authenticate': 'Bearer', connection: 'close' });
    expect(JSON.parse(answer.body)).toMatchObject({ type: 'https://runlet.dev/problems#unauthorized' });
    // What the caller sends after its answer is dropped, not held.
    connection.write('x'.repeat(995));
    await connection.closedByServer();
    expect(harness.handled).toHaveLength(0);
    await waitFor(() => harness.budget.usedBytes === 0, { what: 'the refused request to leave the budget' });
  });

  it('reads nothing more while a new token is verified, and refuses the caller once it is refused', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    connection.write(postHead('/v4/p/a/verifying', 1000) + '{"a":');
    await waitFor(() => harness.screened.length === 1, { what: 'the head to be screened' });
    expect(harness.sockets[0]!.isPaused()).toBe(true);
    harness.openGate();
    expect((await connection.next()).status).toBe(401);
    await connection.closedByServer();
    expect(harness.handled).toHaveLength(0);
  });

  it('asks nothing of the run interface for a request that came whole: the common call pays nothing more', async () => {
    const harness = await start();
    const connection = await open(harness.origin);
    connection.write(jsonPost('/v4/p/a/refused-if-screened', { a: 1 }));
    expect((await connection.next()).status).toBe(200);
    expect(harness.screened).toEqual([]);
    await waitFor(() => harness.budget.usedBytes === 0, { what: 'the request to leave the budget' });
  });

  it('refuses (503 request-buffer-full, Retry-After, closed) a request the shared budget has no room for, and lets the others finish', async () => {
    const harness = await start({ budget: new RequestBudget(1100) });
    const first = await open(harness.origin);
    first.write(postHead('/v4/p/a/f', 1000) + 'a'.repeat(600));
    await waitFor(() => harness.budget.usedBytes >= 600, { what: 'the first request to be held' });
    const second = await open(harness.origin);
    second.write(postHead('/v4/p/a/f', 1000) + 'b'.repeat(600));
    const refused = await second.next();
    expect(refused.status).toBe(503);
    expect(refused.headers).toMatchObject({ 'retry-after': '1', connection: 'close', 'content-type': 'application/problem+json' });
    expect(JSON.parse(refused.body)).toMatchObject({ type: 'https://runlet.dev/problems#request-buffer-full', status: 503 });
    expect(harness.refusals).toEqual(['request-buffer-full']);
    await second.closedByServer();
    first.write('a'.repeat(400));
    expect(await first.next()).toMatchObject({ status: 200, body: 'a'.repeat(1000) });
    expect(harness.handled).toHaveLength(1);
    await waitFor(() => harness.budget.usedBytes === 0, { what: 'every request to leave the budget' });
  });

  it('answers 408 request-timeout to a body that keeps coming too slowly to finish by the deadline, then closes', async () => {
    const harness = await start({ deadlineMs: 300 });
    const connection = await open(harness.origin);
    connection.write(postHead('/v4/p/a/f', 100));
    // A byte every 20 ms: the body timeout (60 s here) never comes near; only the deadline ends it.
    const trickle = setInterval(() => connection.write('a'), 20);
    try {
      const answer = await connection.next();
      expect(answer.status).toBe(408);
      expect(answer.headers.connection).toBe('close');
      expect(JSON.parse(answer.body)).toMatchObject({ type: 'https://runlet.dev/problems#request-timeout', status: 408 });
      expect(JSON.parse(answer.body).detail).toContain('did not arrive whole within 0.3 s');
    } finally {
      clearInterval(trickle);
    }
    expect(harness.handled).toHaveLength(0);
  });

  it('refuses a head still trickling at the deadline as node:http refuses a late head: 408, then closed', async () => {
    const harness = await start({ deadlineMs: 300 });
    const connection = await open(harness.origin);
    connection.write('POST /v4/p/a/f HTTP/1.1\r\nX-Long: ');
    const trickle = setInterval(() => connection.write('a'), 20);
    try {
      await connection.closedByServer();
    } finally {
      clearInterval(trickle);
    }
    expect(connection.received()).toBe('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
  });
});

/** A front on a socket with no peer: its bytes are given to it as chunks chosen here, its answers dropped. */
function frontOnLoneSocket(maxBodyBytes: number): { receive(chunk: Buffer): void; close(): void; handled: WholeRequest[]; budget: RequestBudget } {
  const socket = new Socket();
  socket.write = (() => true) as Socket['write'];
  const handled: WholeRequest[] = [];
  const budget = new RequestBudget(1 << 30);
  const runInterface: RunInterface = {
    handle() {
      throw new Error('the front never calls handle');
    },
    screenHead: () => null,
    bodyBounds: { limitBytes: maxBodyBytes, idleMs: 60_000, deadlineMs: 60_000, budget },
    requestRefused() {},
    handleWhole(request: WholeRequest, answer: AnswerSink): boolean {
      handled.push({ ...request, body: Buffer.from(request.body) });
      answer.end('');
      return true;
    },
  };
  const settings: FrontSettings = { runInterface, passOn: () => undefined, keepAliveTimeoutMs: 60_000, maxBodyBytes, headTimeoutMs: 60_000, bodyTimeoutMs: 60_000, deadlineMs: 60_000, budget };
  const front = new FrontConnection(socket, settings, () => undefined);
  return { receive: (chunk) => socket.emit('data', chunk), close: () => front.destroy(), handled, budget };
}

describe('FrontConnection, the work a request costs', () => {
  it('copies a body sent in 8-byte pieces a bounded number of times, not once per piece', () => {
    const body = JSON.stringify({ text: 'x'.repeat(64 * 1024) });
    const request = Buffer.from(postHead('/v4/p/a/f', body.length) + body);
    const pieces: Buffer[] = [];
    for (let at = 0; at < request.length; at += 8) pieces.push(Buffer.from(request.subarray(at, at + 8)));
    const front = frontOnLoneSocket(128 * 1024);
    const allocations = [vi.spyOn(Buffer, 'allocUnsafe'), vi.spyOn(Buffer, 'allocUnsafeSlow'), vi.spyOn(Buffer, 'alloc')];
    const concat = vi.spyOn(Buffer, 'concat');
    let allocated: number;
    try {
      for (const piece of pieces) front.receive(piece);
      // Counted before the spies are restored, which forgets their calls.
      allocated =
        allocations.reduce((sum, spy) => sum + spy.mock.calls.reduce((bytes, [size]) => bytes + Number(size), 0), 0) +
        concat.mock.results.reduce((bytes, result) => bytes + (result.value as Buffer).length, 0);
    } finally {
      for (const spy of [...allocations, concat]) spy.mockRestore();
      front.close();
    }
    expect(front.handled.map((handled) => handled.body.toString())).toEqual([body]);
    expect(allocated).toBeGreaterThan(0);
    // Doubling allocates under twice the request; a copy per piece, thousands of times it.
    expect(allocated).toBeLessThan(3 * request.length);
  });

  it('reads the same requests however their bytes are split: at every position, and one byte at a time', () => {
    const bytes = Buffer.from(postHead('/v4/p/a/one', 12) + '{"first":1} ' + postHead('/v4/p/a/two?x=1', 13) + '{"second":2} ');
    const read = (chunks: Buffer[]): Array<[string, string]> => {
      const front = frontOnLoneSocket(1024);
      for (const chunk of chunks) front.receive(chunk);
      expect(front.budget.usedBytes).toBe(0);
      front.close();
      return front.handled.map((request) => [request.url, request.body.toString()]);
    };
    const reference = read([bytes]);
    expect(reference).toEqual([
      ['/v4/p/a/one', '{"first":1} '],
      ['/v4/p/a/two?x=1', '{"second":2} '],
    ]);
    for (let at = 1; at < bytes.length; at++) {
      expect(read([Buffer.from(bytes.subarray(0, at)), Buffer.from(bytes.subarray(at))]), `split at ${at}`).toEqual(reference);
    }
    expect(read([...bytes].map((byte) => Buffer.from([byte])))).toEqual(reference);
  });
});
