// What the run port does with a caller that sends too much, too slowly, or not as HTTP/1.1 allows, through
// both front doors (`runlet dev`, and the sidecar's run server with its front), to a real Python runtime: a
// body over the limit gets its 413 however it is framed, a request that stops arriving or arrives too slowly
// gets a 408, one the shared request buffer has no room for a 503, a repeated X-Webhook-Secret a 400.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { makeCustomApp } from '../support/custom-app.ts';
import { FIXTURE_APPS, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { RawConnection } from '../support/raw-http.ts';
import { FRONT_DOORS, openFrontDoor, type OpenFrontDoor } from '../support/run-server.ts';
import { waitFor } from '../support/wait.ts';

const BODY_LIMIT_BYTES = 64 * 1024;
/** Short, so a test waits for them: the sidecar's run server and `runlet dev` both get them. */
const HEAD_TIMEOUT_MS = 300;
const BODY_TIMEOUT_MS = 300;
/** Long enough for every other request here, short enough to wait for. */
const DEADLINE_MS = 1000;
/** Room for one body at the limit, not two. */
const REQUEST_BUFFER_BYTES = 96 * 1024;

let dev: TestDevServer;
const connections: RawConnection[] = [];

beforeAll(async () => {
  dev = await startTestDevServer({
    appDirs: [`${FIXTURE_APPS}/e2e`, await makeCustomApp('upload')],
    bodyLimitBytes: BODY_LIMIT_BYTES,
    timeouts: { headMs: HEAD_TIMEOUT_MS, bodyMs: BODY_TIMEOUT_MS, deadlineMs: DEADLINE_MS },
    requestBufferBytes: REQUEST_BUFFER_BYTES,
  });
});
afterAll(async () => dev?.dispose());
afterEach(() => {
  for (const connection of connections.splice(0)) connection.close();
});

function chunk(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
}

/** A JSON body of `bytes` bytes, split in chunks of at most 16 KiB. */
function chunkedJson(bytes: number): string {
  const body = JSON.stringify({ text: 'x'.repeat(bytes - 11) });
  let framed = '';
  for (let at = 0; at < body.length; at += 16 * 1024) framed += chunk(body.slice(at, at + 16 * 1024));
  return framed + '0\r\n\r\n';
}

/** `runlet_runs_refused_total{reason}` of the replica behind both front doors. */
async function refusedCount(reason: string): Promise<number> {
  const metric = await dev.replica.metrics.registry.getSingleMetric('runlet_runs_refused_total')!.get();
  return metric.values.find((value) => value.labels.reason === reason)?.value ?? 0;
}

function expectProblem(answer: { status: number; headers: Record<string, string>; body: string }, status: number, code: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toBe('application/problem+json');
  expect(JSON.parse(answer.body)).toMatchObject({ type: `https://runlet.dev/problems#${code}`, status });
  expect(answer.headers['x-request-id']).toBeTruthy();
}

describe.each(FRONT_DOORS)('through %s', (door) => {
  let frontDoor: OpenFrontDoor;
  beforeEach(async () => {
    frontDoor = await openFrontDoor(door, dev, HEAD_TIMEOUT_MS);
  });
  afterEach(() => frontDoor.close());

  async function open(): Promise<RawConnection> {
    const connection = await RawConnection.open(frontDoor.origin);
    connections.push(connection);
    return connection;
  }

  describe('a body over the limit', () => {
    it('is refused with 413 when it is chunked, and the connection serves the next call', async () => {
      const connection = await open();
      connection.write(`POST /v4/dev/e2e/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunkedJson(2 * BODY_LIMIT_BYTES)}`);
      const answer = await connection.next();
      expectProblem(answer, 413, 'body-too-large');
      connection.write(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n${chunk('{"name":"next"}')}0\r\n\r\n`);
      expect(JSON.parse((await connection.next()).body)).toMatchObject({ result: { greeting: 'Hello, next!' } });
    });

    it('is refused with 413 instead of 100 Continue when its declared length is over the limit', async () => {
      const connection = await open();
      connection.write(`POST /v4/dev/e2e/echo HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: ${BODY_LIMIT_BYTES + 1}\r\n\r\n`);
      const answer = await connection.next();
      expectProblem(answer, 413, 'body-too-large');
      expect(answer.headers.connection).toBe('close');
      await connection.closedByServer();
    });

    it('is refused with 413 after 100 Continue when it is chunked, as it arrives', async () => {
      const connection = await open();
      connection.write('POST /v4/dev/e2e/echo HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n');
      expect((await connection.next()).status).toBe(100);
      connection.write(chunkedJson(2 * BODY_LIMIT_BYTES));
      expectProblem(await connection.next(), 413, 'body-too-large');
    });
  });

  describe('a request that stops arriving', () => {
    it.each([
      ['read by the front', 'Content-Length: 20\r\n\r\n{"name":'],
      ['read by node:http (chunked)', `Transfer-Encoding: chunked\r\n\r\n${chunk('{"name":')}`],
    ])('gets 408 request-timeout once its body pauses past the body timeout (%s), then is closed', async (_path, rest) => {
      const connection = await open();
      const refusedBefore = await refusedCount('request_timeout');
      const sentAt = performance.now();
      connection.write(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: localhost\r\n${rest}`);
      const answer = await connection.next();
      expectProblem(answer, 408, 'request-timeout');
      expect(performance.now() - sentAt).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 20);
      // Counted, for whoever watches for slow callers.
      expect(await refusedCount('request_timeout')).toBe(refusedBefore + 1);
      await connection.closedByServer();
    });

    /** A request to `path` whose body (framed by `rest` and `frame`) comes a byte every 50 ms: its 408, once closed. */
    async function trickledPastDeadline(path: string, rest: string, frame: (byte: string) => string): Promise<{ headers: Record<string, string> }> {
      const connection = await open();
      connection.write(`POST ${path} HTTP/1.1\r\nHost: localhost\r\n${rest}`);
      // Far within the body timeout each time; 200 bytes would take 10 s.
      const trickle = setInterval(() => connection.write(frame(' ')), 50);
      try {
        const answer = await connection.next();
        expectProblem(answer, 408, 'request-timeout');
        expect(JSON.parse(answer.body).detail).toContain(`did not arrive whole within ${DEADLINE_MS / 1000} s`);
        await connection.closedByServer();
        return answer;
      } finally {
        clearInterval(trickle);
      }
    }
    const sized = (byte: string): string => byte;

    it.each([
      ['read by the front', 'Content-Length: 200\r\n\r\n', sized],
      ['read by node:http (chunked)', 'Transfer-Encoding: chunked\r\n\r\n', chunk],
    ])('gets 408 request-timeout once its body, however steady, is not whole by the deadline (%s), then is closed', async (_path, rest, frame) => {
      await trickledPastDeadline('/v4/dev/e2e/greet', rest, frame);
    });

    it.each([
      ['sized', 'Content-Length: 200\r\n\r\n', sized],
      ['chunked', 'Transfer-Encoding: chunked\r\n\r\n', chunk],
    ])("gets 408 request-timeout once a custom app's %s upload, streamed to the app as it comes, is not whole by the deadline; the run is recorded so", async (_framing, rest, frame) => {
      const answer = await trickledPastDeadline('/v4/dev/upload/echo', rest, frame);
      const run = (await (await fetch(`${dev.url}/v2/projects/dev/apps/upload/runs/${answer.headers['x-request-id']}`)).json()) as { item: unknown };
      expect(run.item).toMatchObject({ status: 'failure', statusCode: 408 });
    });

    // node:http's own answers (fastify's in `runlet dev`, which words the body its way): the status line is the contract.
    it('gets 408 once its head takes longer than the head timeout, then is closed', async () => {
      const connection = await open();
      const sentAt = performance.now();
      connection.write('POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: localhost\r\n');
      await connection.closedByServer();
      expect(connection.received()).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(performance.now() - sentAt).toBeGreaterThanOrEqual(HEAD_TIMEOUT_MS - 20);
    });

    it('gets 400 at once for a head with a bare LF, whatever the head timeout', async () => {
      const connection = await open();
      connection.write('POST /v4/dev/e2e/greet HTTP/1.1\nHost: localhost\n');
      await connection.closedByServer();
      expect(connection.received()).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    });
  });

  const byFront = (bytes: number) => ({ head: `Content-Length: ${bytes + 1}\r\n\r\n`, body: ' '.repeat(bytes) });
  const byNode = (bytes: number) => ({ head: 'Transfer-Encoding: chunked\r\n\r\n', body: chunk(' '.repeat(bytes)) });
  it.each([
    ['the front', 'node:http', byFront, byNode],
    ['node:http', 'the front', byNode, byFront],
  ])('refuses (503 request-buffer-full) a body the request buffer has no room for, while %s holds one (refused by %s)', async (_holder, _refuser, holding, refused) => {
    const budget = dev.replica.requestBudget;
    const holder = await open();
    const held = holding(60 * 1024);
    holder.write(`POST /v4/dev/e2e/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${held.head}${held.body}`);
    await waitFor(() => budget.usedBytes >= 60 * 1024, { what: 'the first body to be held' });
    const second = await open();
    const refusedBefore = await refusedCount('request_buffer_full');
    const more = refused(40 * 1024);
    second.write(`POST /v4/dev/e2e/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${more.head}${more.body}`);
    const answer = await second.next();
    expectProblem(answer, 503, 'request-buffer-full');
    expect(answer.headers['retry-after']).toBe('1');
    expect(await refusedCount('request_buffer_full')).toBe(refusedBefore + 1);
    await second.closedByServer();
    holder.close();
    // Let go of at once: the next test starts with all of the budget.
    await waitFor(() => budget.usedBytes === 0, { what: 'the held body to leave the budget' });
  });

  it('refuses a repeated X-Webhook-Secret with 400 invalid-header, and runs nothing', async () => {
    const connection = await open();
    const body = '{"name":"twice"}';
    connection.write(
      `POST /v4/dev/e2e/greet?webhookEndpoint=${encodeURIComponent('http://127.0.0.1:9/hook')} HTTP/1.1\r\nHost: localhost\r\n` +
        `X-Webhook-Secret: a\r\nX-Webhook-Secret: b\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    const answer = await connection.next();
    expectProblem(answer, 400, 'invalid-header');
    expect(JSON.parse(answer.body).detail).toContain('more than once');
    const runs = (await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${answer.headers['x-request-id']}`)).json()) as { status?: number };
    expect(runs.status).toBe(404);
  });
});
