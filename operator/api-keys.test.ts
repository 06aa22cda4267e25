// API keys in a cluster, tried as a second tenant would: through the operator's own management API
// (mountManagementApi: its routes, its key store of ServiceAccounts, its token reviews) against the in-memory
// API server, with two tenant namespaces. A team-a admin names team-b's key through an encoded key name; a key
// is shown to be no credential of the API server, and a key of one namespace to be refused on another's routes.
import type { AddressInfo } from 'node:net';
import fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import { InMemoryAppDirectory } from '../management/app-directory.ts';
import { RUNS_ACCESS } from '../management/kube-auth.ts';
import type { RunSource } from '../management/run-source.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { testLogger } from '../test/support/logger.ts';
import { sendVerbatim } from '../test/support/raw-http.ts';
import { mountManagementApi } from './management.ts';

const ADMIN_A = 'admin-a.eyJ0ZWFtIjoiYSJ9.sig-aaaa';
const ADMIN_B = 'admin-b.eyJ0ZWFtIjoiYiJ9.sig-bbbb';
const DAY_MS = 86_400_000;
const noRuns: RunSource = { listRuns: async () => ({ items: [], hasMore: false }), getRun: async () => undefined };

let server: KubeApiServer;
let api: KubeApi;
let management: FastifyInstance;
let port: number;
const opened: KubeApi[] = [];

async function startManagement(maxKeyLifetimeMs?: number): Promise<FastifyInstance> {
  const http = fastify({ loggerInstance: testLogger() as FastifyBaseLogger });
  const apps = new InMemoryAppDirectory([{ projectId: 'team-a', appName: 'hello' }, { projectId: 'team-b', appName: 'web' }]);
  mountManagementApi(http, { api, runs: noRuns, apps, appList: () => [], canceller: { cancel: () => null }, logger: testLogger(), maxKeyLifetimeMs });
  await http.listen({ host: '127.0.0.1', port: 0 });
  return http;
}

beforeAll(async () => {
  server = await startKubeApiServer({ namespaces: ['team-a', 'team-b'] });
  api = new KubeApi(await server.credentials());
  for (const [token, team] of [[ADMIN_A, 'team-a'], [ADMIN_B, 'team-b']] as const) {
    const user = `system:serviceaccount:${team}:admin`;
    server.tokens.set(token, { username: user, groups: ['system:serviceaccounts', `system:serviceaccounts:${team}`] });
    for (const verb of ['list', 'create', 'delete']) server.allow({ user, namespace: team, group: 'runlet.dev', resource: 'apikeys', verb });
  }
  management = await startManagement();
  port = (management.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await management?.close();
  await api?.close();
  await server?.close();
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((client) => client.close()));
});

/** Sends `path` byte for byte over a socket (fetch would resolve dot segments first). */
function send(method: string, path: string, token: string, body?: object): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  return sendVerbatim(port, method, path, { headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function createKey(team: string, token: string, name: string, expiresInMs = 30 * DAY_MS): Promise<{ status: number; body: Record<string, unknown> }> {
  return send('POST', `/v2/projects/${team}/keys`, token, { name, expiresAt: new Date(Date.now() + expiresInMs).toISOString() });
}

const accountOf = (team: string, name: string) => KubePath.of({ version: 'v1', namespace: team, resource: 'serviceaccounts', name });
const bindingOf = (team: string, name: string) => KubePath.of({ group: 'rbac.authorization.k8s.io', version: 'v1', namespace: team, resource: 'rolebindings', name });

describe("team-a's admin and team-b's API keys", () => {
  it("cannot reach team-b's key ServiceAccount or its RoleBinding through an encoded key name", async () => {
    expect((await createKey('team-b', ADMIN_B, 'prod')).status).toBe(201);
    const account = await api.get(accountOf('team-b', 'runlet-key-prod'));
    const binding = await api.get(bindingOf('team-b', 'runlet-key-prod'));
    server.clearRequests();

    const traversals = [
      'x%2F..%2F..%2F..%2Fteam-b%2Fserviceaccounts%2Frunlet-key-prod',
      'x%2F..%2F..%2F..%2F..%2F..%2Fapis%2Frbac.authorization.k8s.io%2Fv1%2Fnamespaces%2Fteam-b%2Frolebindings%2Frunlet-key-prod',
      'x%2F%2e%2e%2F%2e%2e%2F%2e%2e%2Fteam-b%2Fserviceaccounts%2Frunlet-key-prod',
      '..%2F..%2F..%2Fteam-b%2Fserviceaccounts%2Frunlet-key-prod',
    ];
    for (const keyName of traversals) {
      const answer = await send('DELETE', `/v2/projects/team-a/keys/${keyName}`, ADMIN_A);
      expect({ keyName, status: answer.status, type: answer.body.type, parameter: answer.body.parameter }).toEqual({
        keyName,
        status: 400,
        type: expect.stringMatching(/#invalid-parameter$/),
        parameter: 'key_name',
      });
    }

    // Untouched, and never even read: no request of the operator named team-b.
    expect((await api.get(accountOf('team-b', 'runlet-key-prod'))).metadata?.uid).toBe(account.metadata?.uid);
    expect((await api.get(bindingOf('team-b', 'runlet-key-prod'))).metadata?.uid).toBe(binding.metadata?.uid);
    expect(server.requests.filter((request) => request.path.includes('team-b')).map((request) => `${request.method} ${request.path}`)).toEqual([
      'GET /api/v1/namespaces/team-b/serviceaccounts/runlet-key-prod',
      'GET /apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings/runlet-key-prod',
    ]);
  });
});

describe('an API key', () => {
  it('is for Runlet only: audience runlet, refused by the API server as a credential', async () => {
    const made = await createKey('team-b', ADMIN_B, 'ci');
    expect(made.status).toBe(201);
    const token = made.body.token as string;
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { aud: string[] };
    expect(claims.aud).toEqual(['runlet']);

    const asKey = new KubeApi(await server.credentials({ token }));
    opened.push(asKey);
    const refused = await asKey.list(KubePath.of({ version: 'v1', namespace: 'team-b', resource: 'secrets' })).catch((error: unknown) => error);
    expect(refused).toMatchObject({ name: 'KubeApiError', status: 401 });
    // What it would read with an API server credential: the test's own client reads it.
    expect((await api.list(KubePath.of({ version: 'v1', namespace: 'team-b', resource: 'secrets' }))).items).toBeDefined();
  });

  it("is accepted on its own namespace's routes, reviewed for Runlet's audience, and refused on another's whatever RBAC grants", async () => {
    const made = await createKey('team-b', ADMIN_B, 'reader');
    const token = made.body.token as string;
    const user = 'system:serviceaccount:team-b:runlet-key-reader';
    // Both grants, as a ClusterRoleBinding to the key would give them: the namespace rule refuses the second.
    server.allow({ user, namespace: 'team-b', ...RUNS_ACCESS });
    server.allow({ user, namespace: 'team-a', ...RUNS_ACCESS });

    expect((await send('GET', '/v2/projects/team-b/apps', token)).status).toBe(200);
    const elsewhere = await send('GET', '/v2/projects/team-a/apps/hello/runs', token);
    expect(elsewhere.status).toBe(403);
    expect(elsewhere.body.detail).toBe(
      `User "${user}" may not list runs in project "team-a": its token is a Runlet API key of namespace "team-b", and a key speaks for its own namespace only`,
    );

    // The key's token is valid for `runlet` only: a review for the API server's audience refuses it, so the
    // management API's 200 above was a review for Runlet's.
    const review = (await api.create(KubePath.of({ group: 'authentication.k8s.io', version: 'v1', resource: 'tokenreviews' }), {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token },
    } as KubeObject)) as KubeObject & { status: { authenticated: boolean } };
    expect(review.status.authenticated).toBe(false);
  });

  it('is made to last at most the maximum: a year by default, or what the operator is told', async () => {
    const tooLong = await createKey('team-a', ADMIN_A, 'forever', 366 * DAY_MS);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toMatchObject({ parameter: 'expiresAt', detail: expect.stringMatching(/^expiresAt must be at most 365 days from now/) });
    expect(await api.find(accountOf('team-a', 'runlet-key-forever'))).toBeUndefined();

    const capped = await startManagement(30 * DAY_MS);
    const before = port;
    port = (capped.server.address() as AddressInfo).port;
    try {
      const refused = await createKey('team-a', ADMIN_A, 'monthly', 31 * DAY_MS);
      expect(refused.body.detail).toMatch(/^expiresAt must be at most 30 days from now/);
      expect((await createKey('team-a', ADMIN_A, 'monthly', 29 * DAY_MS)).status).toBe(201);
    } finally {
      port = before;
      await capped.close();
    }
  });
});
