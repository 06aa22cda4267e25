// The direct transport on a real HTTP server that resets a kept-alive connection when the next request arrives on
// it (a server closing an idle connection as the client reuses it: the race node:http's Agent leaves to its
// callers). A read is sent again on a new connection; a write is not, its outcome unknown to the client.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KubeCredentials } from './credentials.ts';
import { createTransport, type Transport } from './transport.ts';

let server: Server;
let transport: Transport;
let url: string;
/** Requests each connection carried; the second on a connection is answered with a reset. */
const served = new WeakMap<Socket, number>();
let answered = 0;

beforeEach(async () => {
  server = createServer((request: IncomingMessage, response) => {
    const count = (served.get(request.socket) ?? 0) + 1;
    served.set(request.socket, count);
    if (count === 2) {
      request.socket.resetAndDestroy();
      return;
    }
    answered += 1;
    response.end(JSON.stringify({ method: request.method }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const credentials = { server: url, tls: async () => ({}), authHeaders: async () => ({}) } as unknown as KubeCredentials;
  transport = await createTransport(credentials);
  answered = 0;
});

afterEach(async () => {
  await transport.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('the direct transport', () => {
  it('sends a GET again on a new connection when its kept-alive one is reset before any answer', async () => {
    expect((await transport.send('GET', `${url}/api/v1/namespaces/default/secrets/a`, {}, undefined, 5_000)).status).toBe(200);
    const again = await transport.send('GET', `${url}/api/v1/namespaces/default/secrets/b`, {}, undefined, 5_000);
    expect(again).toMatchObject({ status: 200, text: '{"method":"GET"}' });
    expect(answered).toBe(2);
  });

  it('does not send a write again: its failure is the caller’s', async () => {
    expect((await transport.send('GET', `${url}/api/v1/namespaces/default/secrets/a`, {}, undefined, 5_000)).status).toBe(200);
    const failed = await transport.send('POST', `${url}/api/v1/namespaces/default/secrets`, {}, '{}', 5_000).catch((error: unknown) => error);
    expect(failed).toMatchObject({ code: 'ECONNRESET' });
    expect(answered).toBe(1);
  });
});
