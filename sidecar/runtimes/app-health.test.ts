import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AppHealthCheck } from './app-health.ts';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  if (server?.listening) await new Promise((resolve) => server!.close(resolve));
  server = undefined;
});

async function appServer(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<string> {
  server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("a custom app's health, asked by the sidecar on the loopback", () => {
  it('fails a server that takes the connection and never answers, once its timeout passes', async () => {
    const origin = await appServer(() => undefined);
    const health = await new AppHealthCheck(origin, '/health', 100).check();
    expect(health).toEqual({ healthy: false, detail: "the app's health path did not answer: no answer within 100 ms" });
  });

  it('asks the app once for checks asked at once: whoever reaches the admin port cannot make it ask more often', async () => {
    const held: ServerResponse[] = [];
    const origin = await appServer((_request, response) => held.push(response));
    const check = new AppHealthCheck(origin, '/health', 5_000);
    const answers = Promise.all(Array.from({ length: 20 }, () => check.check()));
    await new Promise<void>((resolve) => server!.once('request', () => resolve()));
    held[0]!.writeHead(204).end();
    expect(new Set((await answers).map((answer) => answer.healthy))).toEqual(new Set([true]));
    expect(held).toHaveLength(1);
    // The next check is a new request.
    const again = check.check();
    await new Promise<void>((resolve) => server!.once('request', () => resolve()));
    held[1]!.writeHead(503).end();
    expect(await again).toEqual({ healthy: false, detail: "the app's health path answered 503" });
  });

  it('asks the path as given, and tells neither the path nor the port in its answer', async () => {
    const paths: string[] = [];
    const origin = await appServer((request, response) => {
      paths.push(request.url!);
      response.writeHead(200).end();
    });
    const health = await new AppHealthCheck(origin, '/internal/health?deep=1', 1_000).check();
    expect(paths).toEqual(['/internal/health?deep=1']);
    expect(health.detail).not.toContain('/internal');
    expect(health.detail).not.toContain(new URL(origin).port);
  });
});
