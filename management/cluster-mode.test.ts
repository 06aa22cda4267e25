// The management API as the operator serves it: the plugin over real HTTP with the RunLog cache as its runs and
// apps, and service-account tokens checked by TokenReview and SubjectAccessReview on the in-memory API server.
import type { AddressInfo } from 'node:net';
import fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_CONTENT_TYPE, problemTypeUri } from '../crds/problem.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { Problems } from '../crds/problems.ts';
import type { KubeApi } from '../kube/client.ts';
import { RUNS_ACCESS, kubeAuthenticator, type KubeAuthOptions } from './kube-auth.ts';
import { managementApi } from './routes.ts';
import type { RunLogSource } from './runlog-source.ts';
import {
  OTHER_PROJECT,
  PROJECT,
  appRuns,
  createApp,
  newestFirst,
  onReplica,
  startSource,
  startTestCluster,
  writeRunLog,
  type TestCluster,
} from '../test/support/runlog-source-kit.ts';
import { testLogger } from '../test/support/logger.ts';

const APP = 'hello';
const REPLICAS = ['hello-7d9c-aaaaa', 'hello-7d9c-bbbbb'];
const CHALLENGE = 'Bearer realm="runlet-management"';
const REVIEWS = { token: { method: 'POST', pathPattern: 'tokenreviews' }, access: { method: 'POST', pathPattern: 'subjectaccessreviews' } };

/** May list runs in team-a (a grant to the user). */
const READER = 'reader.eyJ0b2tlbiI6InJlYWRlciJ9.sig-0123';
const READER_USER = `system:serviceaccount:${PROJECT}:reader`;
/** Authenticated, but granted nothing. */
const OUTSIDER = 'outsider.eyJ0b2tlbiI6Im91dHNpZGVyIn0.sig-4567';
/** May list runs in team-b (a grant to its group). */
const TEAM_B_VIEWER = 'viewer.eyJ0b2tlbiI6InZpZXdlciJ9.sig-89ab';
/** Never issued. */
const UNKNOWN = 'unknown.eyJ0b2tlbiI6InVua25vd24ifQ.sig-cdef';

let cluster: TestCluster;
let source: RunLogSource & { api: KubeApi };
let runs: RunRecord[];
let servers: FastifyInstance[] = [];

beforeAll(async () => {
  cluster = await startTestCluster();
  await createApp(cluster.api, PROJECT, APP);
  await createApp(cluster.api, OTHER_PROJECT, 'web');
  runs = appRuns({ appName: APP, count: 50, replicas: REPLICAS });
  for (const replica of REPLICAS) await writeRunLog(cluster.api, PROJECT, replica, APP, onReplica(runs, replica));
  cluster.server.tokens.set(READER, { username: READER_USER, groups: ['system:serviceaccounts', `system:serviceaccounts:${PROJECT}`] });
  cluster.server.tokens.set(OUTSIDER, { username: `system:serviceaccount:${OTHER_PROJECT}:ci`, groups: ['system:serviceaccounts'] });
  cluster.server.tokens.set(TEAM_B_VIEWER, { username: `system:serviceaccount:${OTHER_PROJECT}:viewer`, groups: [`system:serviceaccounts:${OTHER_PROJECT}`] });
  cluster.server.allow({ user: READER_USER, namespace: PROJECT, ...RUNS_ACCESS });
  cluster.server.allow({ userGroup: `system:serviceaccounts:${OTHER_PROJECT}`, namespace: OTHER_PROJECT, ...RUNS_ACCESS });
  // Other access to runs grants nothing here: the review asks for exactly `list`.
  cluster.server.allow({ user: `system:serviceaccount:${OTHER_PROJECT}:ci`, namespace: PROJECT, ...RUNS_ACCESS, verb: 'get' });
  source = await startSource(cluster);
});

afterAll(async () => {
  await source.stop();
  await source.api.close();
  await cluster.close();
});

afterEach(async () => {
  await Promise.all(servers.map((server) => server.close()));
  servers = [];
});

/** The plugin over the RunLog cache and a fresh authenticator (an empty decision cache), on 127.0.0.1. */
async function startApi(authOptions: Partial<KubeAuthOptions> = {}): Promise<string> {
  const server = fastify({ loggerInstance: testLogger() as FastifyBaseLogger });
  await server.register(managementApi, { runs: source, apps: source, appList: () => [], authenticate: kubeAuthenticator({ api: source.api, ...authOptions }) });
  await server.listen({ host: '127.0.0.1', port: 0 });
  servers.push(server);
  return `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: Record<string, unknown>;
}

async function get(base: string, path: string, token?: string, authorization = token === undefined ? undefined : `Bearer ${token}`): Promise<Answer> {
  const response = await fetch(`${base}/v2${path}`, { headers: authorization === undefined ? {} : { authorization } });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: JSON.parse(text) as Record<string, unknown> };
}

function expectProblem(answer: Answer, code: string, status: number): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toContain(PROBLEM_CONTENT_TYPE);
  expect(answer.body).toMatchObject({ type: problemTypeUri(code), status });
  for (const token of [READER, OUTSIDER, TEAM_B_VIEWER, UNKNOWN]) {
    expect(answer.text).not.toContain(token);
    expect(answer.headers.get('www-authenticate') ?? '').not.toContain(token);
  }
}

const runsPath = (project = PROJECT, app = APP) => `/projects/${project}/apps/${app}/runs`;

function reviewsSince(start: { token: number; access: number }): { token: number; access: number } {
  return {
    token: cluster.server.countRequests(REVIEWS.token) - start.token,
    access: cluster.server.countRequests(REVIEWS.access) - start.access,
  };
}

function reviewCounts(): { token: number; access: number } {
  return { token: cluster.server.countRequests(REVIEWS.token), access: cluster.server.countRequests(REVIEWS.access) };
}

describe('management API in cluster mode', () => {
  it('answers 401 with the bare Bearer challenge when no bearer token is given, without asking the cluster', async () => {
    const base = await startApi();
    const before = reviewCounts();
    for (const authorization of [undefined, '', 'Basic dXNlcjpwYXNz']) {
      const answer = await get(base, runsPath(), undefined, authorization);
      expectProblem(answer, Problems.unauthorized.code, 401);
      expect(answer.headers.get('www-authenticate'), `Authorization: ${authorization}`).toBe(CHALLENGE);
    }
    // The scheme without a token is a malformed credential rather than none.
    const empty = await get(base, runsPath(), undefined, 'Bearer');
    expectProblem(empty, Problems.unauthorized.code, 401);
    expect(empty.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(reviewsSince(before)).toEqual({ token: 0, access: 0 });
  });

  it('answers 401 invalid_token for a token the cluster does not authenticate, and for a malformed one', async () => {
    const base = await startApi();
    const unknown = await get(base, runsPath(), UNKNOWN);
    expectProblem(unknown, Problems.unauthorized.code, 401);
    expect(unknown.headers.get('www-authenticate')).toMatch(/^Bearer realm="runlet-management", error="invalid_token", error_description="[^"]+"$/);
    const malformed = await get(base, runsPath(), 'two words');
    expectProblem(malformed, Problems.unauthorized.code, 401);
    expect(malformed.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('answers 403 to an authenticated user the SubjectAccessReview does not allow to list runs of the project', async () => {
    const base = await startApi();
    const outsider = await get(base, runsPath(), OUTSIDER);
    expectProblem(outsider, Problems.forbidden.code, 403);
    expect(outsider.body.detail).toContain(`system:serviceaccount:${OTHER_PROJECT}:ci`);
    expect(outsider.headers.get('www-authenticate')).toBe(`${CHALLENGE}, error="insufficient_scope"`);
    // The reader's grant is for team-a only; the project is checked before the app is looked up.
    expectProblem(await get(base, runsPath(OTHER_PROJECT, 'web'), READER), Problems.forbidden.code, 403);
    expectProblem(await get(base, runsPath(OTHER_PROJECT, 'no-such-app'), READER), Problems.forbidden.code, 403);
  });

  it('serves an allowed caller: both RunLogs paged newest first through nextToken, a run, filters, and 404s', async () => {
    const base = await startApi();
    const listed: string[] = [];
    let nextToken: string | null = null;
    do {
      const query: string = nextToken === null ? '?pageSize=7' : `?pageSize=7&nextToken=${nextToken}`;
      const page = await get(base, `${runsPath()}${query}`, READER);
      expect(page.status).toBe(200);
      listed.push(...(page.body.items as RunRecord[]).map((run) => run.id));
      nextToken = page.body.nextToken as string | null;
    } while (nextToken !== null);
    expect(listed).toEqual(newestFirst(runs).map((run) => run.id));

    const run = runs[17]!;
    const one = await get(base, `${runsPath(PROJECT, `${PROJECT}-${APP}`)}/${run.id}`, READER);
    expect(one.status).toBe(200);
    expect(one.body.item).toEqual(run);
    const failures = await get(base, `${runsPath()}?status=failure&asyncOnly=true&pageSize=500`, READER);
    expect((failures.body.items as RunRecord[]).map((r) => r.id)).toEqual(newestFirst(runs).filter((r) => r.async && r.status === 'failure').map((r) => r.id));

    expectProblem(await get(base, runsPath(PROJECT, 'no-such-app'), READER), Problems.appNotFound.code, 404);
    expectProblem(await get(base, `${runsPath()}/01900000-0000-7000-8000-000000000000`, READER), Problems.runNotFound.code, 404);
  });

  it("passes the user's groups to the SubjectAccessReview: a grant to a group admits its members", async () => {
    const base = await startApi();
    const answer = await get(base, runsPath(OTHER_PROJECT, 'web'), TEAM_B_VIEWER);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ items: [], nextToken: null });
    expectProblem(await get(base, runsPath(), TEAM_B_VIEWER), Problems.forbidden.code, 403);
  });

  it('remembers decisions per token and project: allowed for 30 s, refused for 5 s, one review for a burst', async () => {
    let now = 1_000_000;
    const base = await startApi({ now: () => now });
    const before = reviewCounts();

    for (let i = 0; i < 3; i++) expect((await get(base, runsPath(), READER)).status).toBe(200);
    expect(reviewsSince(before)).toEqual({ token: 1, access: 1 });
    const burst = await Promise.all(Array.from({ length: 6 }, () => get(base, runsPath(), TEAM_B_VIEWER)));
    expect(burst.map((answer) => answer.status)).toEqual(Array(6).fill(403));
    expect(reviewsSince(before)).toEqual({ token: 2, access: 2 });
    for (let i = 0; i < 2; i++) expect((await get(base, runsPath(), UNKNOWN)).status).toBe(401);
    expect(reviewsSince(before)).toEqual({ token: 3, access: 2 });
    // The same token for another project is another question.
    expect((await get(base, runsPath(OTHER_PROJECT, 'web'), READER)).status).toBe(403);
    expect(reviewsSince(before)).toEqual({ token: 4, access: 3 });

    now += 5_001; // refusals expire, the allowed decision stands
    expect((await get(base, runsPath(), READER)).status).toBe(200);
    expect((await get(base, runsPath(), UNKNOWN)).status).toBe(401);
    expect((await get(base, runsPath(), TEAM_B_VIEWER)).status).toBe(403);
    expect(reviewsSince(before)).toEqual({ token: 6, access: 4 });

    now += 25_000; // past 30 s: the allowed decision is asked again
    expect((await get(base, runsPath(), READER)).status).toBe(200);
    expect(reviewsSince(before)).toEqual({ token: 7, access: 5 });
  });

  it('answers 503 when the reviews fail, lets nothing through, and caches no failure', async () => {
    const base = await startApi();
    const before = reviewCounts();
    cluster.server.failNext({ ...REVIEWS.token, status: 500, reason: 'InternalError', message: 'etcdserver: request timed out' });
    const tokenReviewFailed = await get(base, runsPath(), READER);
    expectProblem(tokenReviewFailed, Problems.authUnavailable.code, 503);
    expect(tokenReviewFailed.headers.get('retry-after')).toBe('5');
    expect(tokenReviewFailed.body.detail).toContain('answered 500 InternalError to a TokenReview');

    cluster.server.failNext({ ...REVIEWS.access, status: 429, reason: 'TooManyRequests', message: 'slow down' });
    expectProblem(await get(base, runsPath(), READER), Problems.authUnavailable.code, 503);

    cluster.server.pause('refuse');
    try {
      const unreachable = await get(base, runsPath(), READER);
      expectProblem(unreachable, Problems.authUnavailable.code, 503);
      expect(unreachable.body.detail).toContain('did not answer');
    } finally {
      cluster.server.resume();
    }
    // Nothing was remembered: the next request is reviewed anew, and allowed.
    expect((await get(base, runsPath(), READER)).status).toBe(200);
    expect(reviewsSince(before).access).toBe(2);
  });
});
