// A body read whole on node:http, against the run port's shared budget: whatever way its reading ends — read
// whole, over the limit, stalled, past its deadline, cut by its caller — what it took is given back, and one
// the budget has no room for is refused. Over real sockets to a real node:http server.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ProblemError } from '../crds/problem.ts';
import { RawConnection } from '../test/support/raw-http.ts';
import { waitFor } from '../test/support/wait.ts';
import { RequestBudget } from './request-budget.ts';
import { readLimitedBody, type BodyBounds } from './request-body.ts';

const servers: Server[] = [];
const connections: RawConnection[] = [];
afterEach(async () => {
  for (const connection of connections.splice(0)) connection.close();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  }
});

/** A server that reads each body with `bounds` and answers its length, or the problem's status and code. */
async function start(bounds: BodyBounds): Promise<RawConnection> {
  const server = createServer((request, response) => {
    readLimitedBody(request, bounds).then(
      (body) => response.end(String(body.length)),
      (error: unknown) => {
        const problem = error as ProblemError;
        response.writeHead(problem instanceof ProblemError ? problem.status : 500, problem.headers ?? {});
        response.end(problem instanceof ProblemError ? problem.spec.code : String(error));
      },
    );
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const connection = await RawConnection.open(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  connections.push(connection);
  return connection;
}

const chunk = (text: string): string => `${text.length.toString(16)}\r\n${text}\r\n`;
const chunkedHead = 'POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n';

describe('readLimitedBody and the shared budget', () => {
  it.each([
    ['read whole', 100, `${chunk('a'.repeat(50))}0\r\n\r\n`, 200, '50'],
    ['over the limit', 10, `${chunk('a'.repeat(50))}0\r\n\r\n`, 413, 'body-too-large'],
    ['stalled', 100, chunk('a'.repeat(50)), 408, 'request-timeout'],
  ])('gives back what it took once its body is %s', async (_how, limitBytes, body, status, text) => {
    const budget = new RequestBudget(1000);
    const connection = await start({ limitBytes, idleMs: 200, deadlineMs: 60_000, budget });
    connection.write(chunkedHead + body);
    expect(await connection.next()).toMatchObject({ status, body: text });
    await waitFor(() => budget.usedBytes === 0, { what: 'the body to leave the budget' });
  });

  it('refuses with 503 request-buffer-full a body the budget has no room for, closing the connection', async () => {
    const budget = new RequestBudget(1000);
    expect(budget.take(980)).toBe(true);
    const connection = await start({ limitBytes: 1000, idleMs: 60_000, deadlineMs: 60_000, budget });
    connection.write(chunkedHead + chunk('a'.repeat(50)));
    const answer = await connection.next();
    expect(answer).toMatchObject({ status: 503, body: 'request-buffer-full' });
    expect(answer.headers).toMatchObject({ 'retry-after': '1', connection: 'close' });
    await connection.closedByServer();
    expect(budget.usedBytes).toBe(980);
  });

  it('ends a body that keeps coming past its deadline, and gives back what it took', async () => {
    const budget = new RequestBudget(1000);
    const connection = await start({ limitBytes: 1000, idleMs: 60_000, deadlineMs: 200, budget });
    connection.write(chunkedHead);
    const trickle = setInterval(() => connection.write(chunk('a')), 20);
    try {
      expect(await connection.next()).toMatchObject({ status: 408, body: 'request-timeout' });
    } finally {
      clearInterval(trickle);
    }
    await waitFor(() => budget.usedBytes === 0, { what: 'the body to leave the budget' });
  });
});
