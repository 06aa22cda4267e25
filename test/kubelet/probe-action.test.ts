import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attempt, hookAction, probeAction } from './probe-action.ts';

const asked: { url: string; headers: IncomingHttpHeaders }[] = [];
const server = createServer((request, response) => {
  asked.push({ url: request.url ?? '', headers: request.headers });
  response.end('ok');
});
let port: number;

beforeAll(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  server.close();
});

describe('httpGet lifecycle hooks', () => {
  const container = { name: 'app' };
  const hook = { httpGet: { path: '/drain/token?x=1', port: 8001, httpHeaders: [{ name: 'x-hook', value: 'yes' }] } };

  it('are asked as kubelets from 1.26 ask them: the path as given, with the headers', async () => {
    const action = hookAction(probeAction(hook, container, new Map([[8001, port]]), 'preStop hook'), 'consistent');
    expect(await attempt(action, 2000)).toBe(true);
    expect(asked.at(-1)).toMatchObject({ url: '/drain/token?x=1', headers: { 'x-hook': 'yes' } });
  });

  it('are asked as kubelets before 1.26 asked them: no headers, and the path after a second slash', async () => {
    const action = hookAction(probeAction(hook, container, new Map([[8001, port]]), 'preStop hook'), 'before-1.26');
    expect(await attempt(action, 2000)).toBe(true);
    expect(asked.at(-1)!.url).toBe('//drain/token?x=1');
    expect(asked.at(-1)!.headers['x-hook']).toBeUndefined();
  });
});
