// RFC 9112 §6.1 on the sidecar's run port: an HTTP/1.0 request with Transfer-Encoding is refused (400), and its
// connection closed, whatever else it carries; HTTP/1.0 without it is served as before. Raw sockets: no client
// library sends such a request.
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noRuns } from '../../docs/openapi-documents.ts';
import { RawConnection } from '../../test/support/raw-http.ts';
import { AppRegistry, AppTarget } from '../apps.ts';
import { Replica } from '../replica.ts';
import { createRunInterface } from '../run-interface.ts';
import { createRunServer } from '../run-server.ts';

const logger = pino({ level: 'silent' });
const apps = new AppRegistry();
apps.add(new AppTarget({ projectId: 'p', appName: 'a', runtime: 'python', replicaConcurrency: 1, responseGracePeriodSeconds: 5 }));
const replica = new Replica({ apps, store: noRuns, replicaName: 'test', logger });
const server = createRunServer(createRunInterface(replica), logger);
let origin: string;

beforeAll(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  server.close();
  await replica.deliverer.close();
});

/** Sends `request` on a new connection: the answer, and whether the server then closed the connection. */
async function answerTo(request: string): Promise<{ status: number; body: string; closed: boolean; connection: string | undefined }> {
  const connection = await RawConnection.open(origin);
  try {
    connection.write(request);
    const answer = await connection.next();
    await connection.closedByServer();
    return { status: answer.status, body: answer.body, closed: true, connection: answer.headers.connection };
  } finally {
    connection.close();
  }
}

describe('HTTP/1.0 with Transfer-Encoding on the run port', () => {
  it.each([
    ['chunked', 'POST /v4/p/a/f HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'],
    // What a smuggler sends to a proxy that reads HTTP/1.0 bodies to the connection's end: the chunked reading sees two requests.
    ['with a request after its last chunk', 'POST /v4/p/a/f HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /v4/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['on a GET, in another case', 'GET /v4/openapi.json HTTP/1.0\r\nHost: x\r\ntransfer-encoding: Chunked\r\n\r\n0\r\n\r\n'],
    ['without a Host', 'POST /v4/p/a/f HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
  ])('refuses it %s with 400 and closes the connection', async (_case, request) => {
    const answer = await answerTo(request);
    expect(answer.status).toBe(400);
    expect(answer.connection).toBe('close');
    expect(JSON.parse(answer.body)).toMatchObject({ type: 'https://runlet.dev/problems#malformed-request', detail: expect.stringContaining('RFC 9112') });
    expect(answer.closed).toBe(true);
  });

  it('is refused by node:http itself with a Content-Length too (its parser takes no message with both)', async () => {
    const answer = await answerTo('POST /v4/p/a/f HTTP/1.0\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
    expect([answer.status, answer.closed]).toEqual([400, true]);
  });

  it('serves HTTP/1.0 without it as before, and HTTP/1.1 chunked too', async () => {
    // The app's runtime is not attached here: 503 is the run interface's answer to a call it read.
    const plain = await answerTo('POST /v4/p/a/f HTTP/1.0\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}');
    expect(plain.status).toBe(503);
    const chunked = await answerTo('POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n');
    expect(chunked.status).toBe(503);
  });
});
