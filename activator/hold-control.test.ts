// The holder's control routes on a real HTTP server: only requests signed with the control key, within a minute,
// are answered; a list shows the calls of one App as pending runs without their webhook secret; a cancel stops a
// waiting sync call once and says what it was; hostile paths and signatures are refused, never a crash.
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { answerHoldControl, HeldCallIndex, HOLD_CONTROL_HEADER, holdControlPath, signHoldControl, type HeldCancelAnswer } from './hold-control.ts';

const KEY = new Uint8Array(32).fill(1);
const OTHER_KEY = new Uint8Array(32).fill(2);
const SYNC_ID = '019ab000-0000-7000-8000-000000000001';
const ASYNC_ID = '019ab000-0000-7000-8000-000000000002';

describe('the holder control routes', () => {
  const index = new HeldCallIndex();
  let cancels = 0;
  let forgotten = 0;
  let server: Server;
  let base: string;

  beforeAll(async () => {
    index.add({ runId: SYNC_ID, namespace: 'team-a', appName: 'hello', method: 'POST', url: '/v4/team-a/hello/run?webhookEndpoint=https%3A%2F%2Fhooks.example%2Fdone%3Ftoken%3Dx', headers: { 'x-webhook-secret': 's3cret' }, acceptedAt: Date.parse('2030-01-01T00:00:00Z'), mode: 'sync', cancel: () => (cancels += 1) });
    index.add({ runId: ASYNC_ID, namespace: 'team-a', appName: 'hello', method: 'POST', url: '/v4/team-a/hello/count?async=true', headers: {}, acceptedAt: Date.parse('2030-01-01T00:00:01Z'), mode: 'async', forget: () => (forgotten += 1) });
    index.add({ runId: '019ab000-0000-7000-8000-000000000003', namespace: 'team-b', appName: 'hello', method: 'POST', url: '/v4/team-b/hello/run', headers: {}, acceptedAt: 0, mode: 'stream', cancel: () => {} });
    server = createServer((request, response) => answerHoldControl(request, response, { key: KEY, index, identity: 'activator-0' }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const ask = (method: string, path: string, signature = signHoldControl(KEY, method, path, Date.now())) => fetch(`${base}${path}`, { method, headers: { [HOLD_CONTROL_HEADER]: signature } });

  it('lists the calls held for one App as pending runs on this holder, without their webhook secret or query', async () => {
    const answer = await ask('GET', holdControlPath('team-a', 'hello'));
    expect(answer.status).toBe(200);
    const text = await answer.text();
    expect(text).not.toContain('s3cret');
    expect(text).not.toContain('token');
    const { runs } = JSON.parse(text) as { runs: RunRecord[] };
    expect(runs.map((run) => run.id).sort()).toEqual([SYNC_ID, ASYNC_ID]);
    expect(runs.find((run) => run.id === SYNC_ID)).toMatchObject({ status: 'pending', mode: 'sync', async: false, functionName: 'run', startedAt: null, replica: 'activator-0', createdAt: '2030-01-01T00:00:00.000Z', webhook: { endpoint: 'https://hooks.example/done', state: 'pending' } });
    expect(runs.find((run) => run.id === ASYNC_ID)).toMatchObject({ mode: 'async', async: true, functionName: 'count', webhook: null });
  });

  it('cancels a waiting sync call once, answering what it was; an async call (its record is cancelled) and an unknown one are 404', async () => {
    const answer = await ask('POST', holdControlPath('team-a', 'hello', SYNC_ID));
    expect(answer.status).toBe(202);
    expect(((await answer.json()) as HeldCancelAnswer).call).toMatchObject({ runId: SYNC_ID, mode: 'sync', headers: { 'x-webhook-secret': 's3cret' } });
    expect(cancels).toBe(1);
    expect((await ask('POST', holdControlPath('team-a', 'hello', ASYNC_ID))).status).toBe(404);
    expect((await ask('POST', holdControlPath('team-a', 'other', SYNC_ID))).status).toBe(404);
  });

  it('forgets an async call whose record a cancel deleted: listed no more; a sync call is not forgotten (it is cancelled)', async () => {
    expect((await ask('POST', holdControlPath('team-a', 'hello', SYNC_ID, 'forget'))).status).toBe(404);
    expect((await ask('POST', holdControlPath('team-a', 'hello', ASYNC_ID, 'forget'))).status).toBe(204);
    expect(forgotten).toBe(1);
  });

  it('refuses what the control key did not sign, or signed over a minute away, or for another request', async () => {
    const path = holdControlPath('team-a', 'hello');
    expect((await ask('GET', path, '')).status).toBe(403);
    expect((await ask('GET', path, 'not-a-signature')).status).toBe(403);
    expect((await ask('GET', path, signHoldControl(OTHER_KEY, 'GET', path, Date.now()))).status).toBe(403);
    expect((await ask('GET', path, signHoldControl(KEY, 'GET', path, Date.now() - 61_000))).status).toBe(403);
    expect((await ask('GET', path, signHoldControl(KEY, 'GET', holdControlPath('team-b', 'hello'), Date.now()))).status).toBe(403);
    const cancel = holdControlPath('team-a', 'hello', SYNC_ID);
    expect((await ask('POST', cancel, signHoldControl(KEY, 'GET', cancel, Date.now()))).status).toBe(403);
    expect(cancels).toBe(1);
  });

  it('closes an unsigned request’s connection on its head, reading none of a body it declares', async () => {
    const sockets: Socket[] = [];
    const own = createServer((request, response) => answerHoldControl(request, response, { key: KEY, index, identity: 'activator-0' }));
    own.on('connection', (socket) => sockets.push(socket));
    await new Promise<void>((resolve) => own.listen(0, '127.0.0.1', resolve));
    try {
      const client = connect((own.address() as AddressInfo).port, '127.0.0.1');
      client.on('error', () => {});
      await once(client, 'connect');
      const path = holdControlPath('team-a', 'hello', SYNC_ID, 'cancel');
      client.write(`POST ${path} HTTP/1.1\r\nHost: holder\r\nContent-Length: ${1 << 30}\r\n\r\n`);
      let answer = '';
      client.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      // Keep sending while the holder decides: a drained body would be read to its end (1 GiB).
      const chunk = Buffer.alloc(64 * 1024);
      const pump = setInterval(() => client.writable && client.write(chunk), 5);
      await once(client, 'close');
      clearInterval(pump);
      expect(answer).toMatch(/^HTTP\/1\.1 403 /);
      expect(sockets[0]!.bytesRead).toBeLessThan(64 << 20);
      expect(cancels).toBe(1);
    } finally {
      await new Promise<void>((resolve) => own.close(() => resolve()));
    }
  });

  it('answers a signed path that does not decode, or names no route, 404, and goes on serving', async () => {
    expect((await ask('GET', '/.runlet/held/%E0%A4%A/hello')).status).toBe(404);
    expect((await ask('GET', '/.runlet/held/team-a')).status).toBe(404);
    expect((await ask('DELETE', holdControlPath('team-a', 'hello'))).status).toBe(404);
    expect((await ask('GET', holdControlPath('team-a', 'hello'))).status).toBe(200);
  });
});
