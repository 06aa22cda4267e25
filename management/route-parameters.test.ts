// Every path parameter of the management API is checked against its rule (crds/route-names.ts) before anything
// else: a hostile name — an encoded path, dots, unicode, too long — is answered 400 `invalid-parameter` naming
// the parameter, and reaches neither the caller's token review nor a store. Requests go out over a raw socket
// path (node:http), exactly as written: fetch would resolve `..` and `%2e%2e` segments before sending them.
import { mkdtemp } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_ID, KEY_NAME, PROJECT_ID, ROUTE_PARAMETERS, RUN_ID, followsRule, type NameRule } from '../crds/route-names.ts';
import { LocalApiKeys } from '../local/dev-api-keys.ts';
import { sharedKeyFromText } from '../run-request/auth/config.ts';
import { InMemoryAppDirectory } from './app-directory.ts';
import type { ApiKeyStore } from './api-keys.ts';
import { managementApi } from './routes.ts';
import type { RunSource } from './run-source.ts';
import { sendVerbatim } from '../test/support/raw-http.ts';

/** fastify's `maxParamLength`: longer parameters are 414 URI Too Long before any route. */
const FASTIFY_MAX_PARAM_LENGTH = 100;
const RUN = '0192f0c4-5b1e-7a3c-8d2e-1f0a9b8c7d6e';
/** Every name that reached the token review or a store, as it reached it. */
const reached: string[] = [];
let server: FastifyInstance;
let port: number;

beforeAll(async () => {
  const runs: RunSource = {
    listRuns: async (query) => (reached.push(query.projectId, query.appName), { items: [], hasMore: false }),
    getRun: async (projectId, appName, runId) => (reached.push(projectId, appName, runId), undefined),
  };
  const local = new LocalApiKeys({
    dataDir: await mkdtemp(join(tmpdir(), 'runlet-route-parameters-')),
    signingKeys: { 'team-a': sharedKeyFromText('the auth key of the route parameters test, 32 bytes', 'the test key') },
    onRevoke: () => {},
  });
  const keys: ApiKeyStore = {
    list: (projectId) => (reached.push(projectId), local.list(projectId)),
    create: (projectId, name, expiresAt) => (reached.push(projectId, name), local.create(projectId, name, expiresAt)),
    revoke: (projectId, name) => (reached.push(projectId, name), local.revoke(projectId, name)),
  };
  server = fastify();
  await server.register(managementApi, {
    runs,
    apps: new InMemoryAppDirectory([{ projectId: 'team-a', appName: 'app' }]),
    appList: (projectId) => (reached.push(projectId), []),
    canceller: { cancel: (projectId, appName, runId) => (reached.push(projectId, appName, runId), null) },
    keys,
    // Records the project whose access a token would be reviewed for, and lets every caller in.
    authenticate: async (_request, projectId) => void reached.push(projectId),
  });
  await server.listen({ host: '127.0.0.1', port: 0 });
  port = (server.server.address() as AddressInfo).port;
});

afterAll(() => server.close());

/** Sends `path` byte for byte. */
function send(method: string, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const body = method === 'POST' && path.endsWith('/keys') ? JSON.stringify({ name: 'ci', expiresAt: new Date(Date.now() + 86_400_000).toISOString() }) : undefined;
  return sendVerbatim(port, method, path, { headers: { 'content-type': 'application/json' }, body });
}

/** Each operation with a good value for each of its parameters. */
const OPERATIONS: Array<{ method: string; path: (p: Record<string, string>) => string; params: Array<keyof typeof ROUTE_PARAMETERS> }> = [
  { method: 'GET', path: (p) => `/v2/projects/${p.project_id}/apps`, params: ['project_id'] },
  { method: 'GET', path: (p) => `/v2/projects/${p.project_id}/apps/${p.app_id}/runs`, params: ['project_id', 'app_id'] },
  { method: 'GET', path: (p) => `/v2/projects/${p.project_id}/apps/${p.app_id}/runs/${p.run_id}`, params: ['project_id', 'app_id', 'run_id'] },
  { method: 'POST', path: (p) => `/v2/projects/${p.project_id}/apps/${p.app_id}/runs/${p.run_id}/cancel`, params: ['project_id', 'app_id', 'run_id'] },
  { method: 'GET', path: (p) => `/v2/projects/${p.project_id}/keys`, params: ['project_id'] },
  { method: 'POST', path: (p) => `/v2/projects/${p.project_id}/keys`, params: ['project_id'] },
  { method: 'DELETE', path: (p) => `/v2/projects/${p.project_id}/keys/${p.key_name}`, params: ['project_id', 'key_name'] },
];
const GOOD: Record<string, string> = { project_id: 'team-a', app_id: 'app', run_id: RUN, key_name: 'ci' };

/** Hostile values as a caller would put them in a path (already percent-encoded where they hold a `/`). */
const HOSTILE = [
  'x%2F..%2F..%2F..%2Fteam-b%2Fserviceaccounts%2Frunlet-key-prod',
  '..',
  '.',
  '%2e%2e',
  '%2E%2E%2F',
  'a.b',
  'team-a%00',
  'caf%C3%A9',
  '%E2%80%AEteam',
  'Team-A',
  '-team',
  'team-',
  'a%20b',
  'a%3Fb',
];

const overlong: Record<string, string> = {
  project_id: 'a'.repeat(PROJECT_ID.maxLength + 1),
  app_id: 'a'.repeat(APP_ID.maxLength + 1),
  run_id: `${RUN}0`,
  key_name: 'a'.repeat(KEY_NAME.maxLength + 1),
};

describe('the management API refuses a name that breaks its rule', () => {
  for (const operation of OPERATIONS) {
    for (const param of operation.params) {
      it(`${operation.method} ${operation.path({ ...GOOD, [param]: `{${param}}` })}: hostile ${param} values are 400 invalid-parameter, reaching nothing`, async () => {
        for (const value of [...HOSTILE, overlong[param]!]) {
          reached.length = 0;
          const answer = await send(operation.method, operation.path({ ...GOOD, [param]: value }));
          if (value.length > FASTIFY_MAX_PARAM_LENGTH) {
            // Longer than any parameter fastify routes: 414 before routing.
            expect([value, answer.status, reached]).toEqual([value, 414, []]);
            continue;
          }
          expect({ value, status: answer.status, type: answer.body.type, parameter: answer.body.parameter }).toEqual({
            value,
            status: 400,
            type: expect.stringMatching(/#invalid-parameter$/),
            parameter: param,
          });
          expect(reached).toEqual([]);
        }
      });
    }
  }

  it('never routes an empty name to an operation', async () => {
    for (const operation of OPERATIONS) {
      for (const param of operation.params) {
        reached.length = 0;
        const answer = await send(operation.method, operation.path({ ...GOOD, [param]: '' }));
        expect(answer.status).toBeGreaterThanOrEqual(400);
        expect(answer.status).toBeLessThan(500);
        expect(reached).toEqual([]);
      }
    }
  });

  it('for any string: refused 400 naming the parameter, reaching nothing, unless it follows the rule', async () => {
    const named = fc.constantFrom(...OPERATIONS.flatMap((operation) => operation.params.map((param) => ({ operation, param }))));
    const value = fc.oneof(fc.string({ unit: 'binary', minLength: 1 }).filter(encodable), fc.stringMatching(/^[a-z0-9.-]{1,70}$/), fc.uuid().map((id) => id.toLowerCase()));
    await fc.assert(
      fc.asyncProperty(named, value, async ({ operation, param }, raw) => {
        reached.length = 0;
        const answer = await send(operation.method, operation.path({ ...GOOD, [param]: encodeURIComponent(raw) }));
        const rule: NameRule = ROUTE_PARAMETERS[param];
        if (followsRule(rule, raw)) {
          expect(answer.body.type ?? '').not.toMatch(/#invalid-parameter$/);
        } else {
          expect([answer.status, answer.body.parameter]).toEqual([400, param]);
          expect(reached).toEqual([]);
        }
      }),
      { numRuns: 300 },
    );
  });
});

function encodable(value: string): boolean {
  try {
    encodeURIComponent(value);
    return true;
  } catch {
    return false;
  }
}

describe('the name rules', () => {
  it('admit only lowercase letters, digits and "-" (and a run id\'s UUID): nothing a path could be built of', () => {
    fc.assert(
      fc.property(fc.constantFrom(...Object.values(ROUTE_PARAMETERS)), fc.oneof(fc.string({ unit: 'binary' }), fc.stringMatching(/^[a-z0-9.-]{0,70}$/)), (rule, value) => {
        if (followsRule(rule, value)) {
          expect(value).toMatch(/^[a-z0-9-]+$/);
          expect(value.length).toBeLessThanOrEqual(rule.maxLength);
          expect(encodeURIComponent(value)).toBe(value);
        }
      }),
      { numRuns: 2000 },
    );
    expect(followsRule(RUN_ID, RUN)).toBe(true);
    expect(followsRule(RUN_ID, RUN.toUpperCase())).toBe(false);
  });
});
