// The API key operations of the management API, over runlet dev's key store, on a real loopback server: what
// they answer, and what they refuse (hostile names and expiries, unknown fields, a body that is not an object).
import { mkdtemp } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalApiKeys } from '../local/dev-api-keys.ts';
import { sharedKeyFromText } from '../run-request/auth/config.ts';
import { KEY_NAME } from '../crds/route-names.ts';
import { InMemoryAppDirectory } from './app-directory.ts';
import { managementApi } from './routes.ts';
import type { RunSource } from './run-source.ts';

const KEY = sharedKeyFromText('the auth key of the key routes test, 32 bytes or more', 'the test key');
const noRuns: RunSource = { listRuns: async () => ({ items: [], hasMore: false }), getRun: async () => undefined };
let server: FastifyInstance;
let base: string;

beforeAll(async () => {
  const keys = new LocalApiKeys({ dataDir: await mkdtemp(join(tmpdir(), 'runlet-key-routes-')), signingKeys: { dev: KEY }, onRevoke: () => {} });
  server = fastify();
  await server.register(managementApi, { runs: noRuns, apps: new InMemoryAppDirectory(), appList: () => [], keys });
  await server.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}/v2/projects/dev/keys`;
});

afterAll(() => server.close());

const inADay = () => new Date(Date.now() + 86_400_000).toISOString();

async function create(body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(base, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('the API key operations', () => {
  it('create (201, the token once), list (no tokens), revoke (204), then 404', async () => {
    const expiresAt = inADay();
    const made = await create({ name: 'ci', expiresAt });
    expect(made.status).toBe(201);
    expect(made.body.item).toEqual({ name: 'ci', createdAt: expect.any(String), expiresAt: new Date(Math.floor(Date.parse(expiresAt) / 1000) * 1000).toISOString() });
    expect(typeof made.body.token).toBe('string');
    const listed = await (await fetch(base)).text();
    expect(JSON.parse(listed)).toEqual({ items: [made.body.item] });
    expect(listed).not.toContain(made.body.token as string);
    expect((await fetch(`${base}/ci`, { method: 'DELETE' })).status).toBe(204);
    const again = await fetch(`${base}/ci`, { method: 'DELETE' });
    expect(again.status).toBe(404);
    expect(((await again.json()) as { type: string }).type).toMatch(/#key-not-found$/);
  });

  it.each([
    ['a path in the name', { name: '../../etc', expiresAt: inADay() }, 'name'],
    ['markup in the name', { name: '<script>', expiresAt: inADay() }, 'name'],
    ['a name too long for its ServiceAccount', { name: 'a'.repeat(KEY_NAME.maxLength + 1), expiresAt: inADay() }, 'name'],
    ['an encoded path in the name', { name: 'x%2F..%2Fteam-b', expiresAt: inADay() }, 'name'],
    ['unicode in the name', { name: 'cı', expiresAt: inADay() }, 'name'],
    ['an empty name', { name: '', expiresAt: inADay() }, 'name'],
    ['an expiry past a year', { name: 'ci', expiresAt: new Date(Date.now() + 366 * 86_400_000).toISOString() }, 'expiresAt'],
    ['uppercase', { name: 'CI', expiresAt: inADay() }, 'name'],
    ['an expiry in the past', { name: 'ci', expiresAt: '2001-01-01T00:00:00Z' }, 'expiresAt'],
    ['an expiry in 5 minutes', { name: 'ci', expiresAt: new Date(Date.now() + 300_000).toISOString() }, 'expiresAt'],
    ['an expiry that is no date', { name: 'ci', expiresAt: 'tomorrow' }, 'expiresAt'],
    ['an expiry that is a number', { name: 'ci', expiresAt: 4102444800 }, 'expiresAt'],
    ['no name', { expiresAt: inADay() }, 'name'],
    ['an unknown field', { name: 'ci', expiresAt: inADay(), role: 'admin' }, 'role'],
  ])('refuses %s (400 invalid-parameter naming the field)', async (_what, body, field) => {
    const refused = await create(body);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ type: expect.stringMatching(/#invalid-parameter$/), parameter: field });
  });

  it('takes a name as long as its ServiceAccount name allows, and an expiry of a year', async () => {
    const longest = 'k'.repeat(KEY_NAME.maxLength);
    const made = await create({ name: longest, expiresAt: new Date(Date.now() + 365 * 86_400_000 - 60_000).toISOString() });
    expect(made.status).toBe(201);
    expect(`runlet-key-${longest}`).toHaveLength(63);
  });

  it('names the longest lifetime when an expiry is past it', async () => {
    const refused = await create({ name: 'ci', expiresAt: new Date(Date.now() + 400 * 86_400_000).toISOString() });
    expect(refused.body.detail).toMatch(/^expiresAt must be at most 365 days from now \(the longest lifetime of a key here\)/);
  });

  it('refuses a body that is not a JSON object, and a second key of one name', async () => {
    expect((await create('[1,2]')).status).toBe(400);
    expect((await create('{"name":')).status).toBe(400);
    expect((await create({ name: 'twice', expiresAt: inADay() })).status).toBe(201);
    const second = await create({ name: 'twice', expiresAt: inADay() });
    expect(second.status).toBe(409);
    expect(second.body.type).toMatch(/#key-exists$/);
  });
});
