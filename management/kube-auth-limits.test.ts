// The management API in cluster mode under a flood of bogus bearer tokens: what it costs the Kubernetes API
// server (reviews in flight, reviews per second), what the flood's callers are answered, and that callers with
// real tokens are still served. The plugin over real HTTP, the reviews on the in-memory API server.
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KubeApi } from '../kube/client.ts';
import { PROBLEM_CONTENT_TYPE, problemTypeUri } from '../crds/problem.ts';
import { waitFor } from '../test/support/wait.ts';
import { Problems } from '../crds/problems.ts';
import { RUNS_ACCESS, kubeAuthenticator, type KubeAuthOptions } from './kube-auth.ts';
import { REVIEW_LIMITS } from './review-limiter.ts';
import { managementApi } from './routes.ts';
import type { RunLogSource } from './runlog-source.ts';
import { testLogger } from '../test/support/logger.ts';
import { PROJECT, createApp, startSource, startTestCluster, type TestCluster } from '../test/support/runlog-source-kit.ts';

const APP = 'hello';
const RUNS = `/v2/projects/${PROJECT}/apps/${APP}/runs`;
const TOKEN_REVIEWS = { method: 'POST', pathPattern: 'tokenreviews' };
const FLOOD = 1_000;
/** Allowed to list runs in the project. */
const READER = 'reader.eyJ0b2tlbiI6InJlYWRlciJ9.sig-0123';
/** Allowed too: a second caller, whose decision the tests let expire. */
const WRITER = 'writer.eyJ0b2tlbiI6IndyaXRlciJ9.sig-4567';

let cluster: TestCluster;
let source: RunLogSource & { api: KubeApi };
let reviewsApi: KubeApi;
let servers: FastifyInstance[] = [];
/** Enough sockets for a burst, few enough for a loaded 2-core machine. */
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

beforeAll(async () => {
  cluster = await startTestCluster();
  await createApp(cluster.api, PROJECT, APP);
  for (const [token, name] of [[READER, 'reader'], [WRITER, 'writer']] as const) {
    const username = `system:serviceaccount:${PROJECT}:${name}`;
    cluster.server.tokens.set(token, { username });
    cluster.server.allow({ user: username, namespace: PROJECT, ...RUNS_ACCESS });
  }
  source = await startSource(cluster);
  reviewsApi = new KubeApi(await cluster.server.credentials());
});

afterAll(async () => {
  agent.destroy();
  await reviewsApi.close();
  await source.stop();
  await source.api.close();
  await cluster.close();
});

afterEach(async () => {
  cluster.server.resume();
  await Promise.all(servers.map((server) => server.close()));
  servers = [];
});

/** The plugin with a fresh authenticator (empty caches, a full bucket) on 127.0.0.1; its port. */
async function startApi(authOptions: Partial<KubeAuthOptions> = {}): Promise<number> {
  const server = fastify({ loggerInstance: testLogger() as FastifyBaseLogger });
  await server.register(managementApi, { runs: source, apps: source, appList: () => [], authenticate: kubeAuthenticator({ api: reviewsApi, ...authOptions }) });
  await server.listen({ host: '127.0.0.1', port: 0 });
  servers.push(server);
  return (server.server.address() as AddressInfo).port;
}

interface Answer {
  status: number;
  contentType: string | undefined;
  retryAfter: string | undefined;
  body: { type?: string };
}

function get(port: number, token: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const call = request({ host: '127.0.0.1', port, path: RUNS, agent, headers: { authorization: `Bearer ${token}` } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          contentType: response.headers['content-type'],
          retryAfter: response.headers['retry-after'],
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'],
        }),
      );
      response.on('error', reject);
    });
    call.on('error', reject);
    call.end();
  });
}

/** Well-formed service-account-shaped tokens the cluster never issued, distinct per call. */
let bogusIssued = 0;
function bogusTokens(count: number): string[] {
  return Array.from({ length: count }, () => `eyJhbGciOiJSUzI1NiJ9.eyJib2d1cyI6${(bogusIssued++).toString(36)}fQ.c2lnbmF0dXJl`);
}

function tokenReviews(): number {
  return cluster.server.countRequests(TOKEN_REVIEWS);
}

/** TokenReviews the API server has received and not answered (it is paused with `hang`). */
function heldTokenReviews(): number {
  return cluster.server.requests.filter((record) => record.path.includes(TOKEN_REVIEWS.pathPattern) && record.status === undefined).length;
}

function expectOverloaded(answer: Answer): void {
  expect(answer.status).toBe(503);
  expect(answer.contentType).toContain(PROBLEM_CONTENT_TYPE);
  expect(answer.body.type).toBe(problemTypeUri(Problems.authOverloaded.code));
  expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
  expect(Number.isInteger(Number(answer.retryAfter))).toBe(true);
}

/** Every answer of a burst is a 401 (its token was reviewed) or a 503 auth-overloaded (it was not). */
function expectRefusedOrShed(answers: Answer[], reviewed: number): void {
  expect(answers.filter((answer) => answer.status === 401)).toHaveLength(reviewed);
  for (const answer of answers.filter((answer) => answer.status !== 401)) expectOverloaded(answer);
}

describe('management API in cluster mode under a flood of bogus tokens', () => {
  it('holds at most maxInFlight reviews at once and sheds the rest with 503, serving known callers meanwhile', async () => {
    let now = 1_000_000;
    const port = await startApi({ now: () => now });
    expect((await get(port, WRITER)).status).toBe(200);
    now += 30_001; // WRITER's decision has expired: its next request is reviewed again
    expect((await get(port, READER)).status).toBe(200);
    const before = tokenReviews();

    cluster.server.pause('hang');
    let settled = 0;
    const flood = bogusTokens(FLOOD).map((token) => get(port, token).finally(() => (settled += 1)));
    // Either every request is accounted for, or more reviews are held than the bound allows (fail at once).
    await waitFor(() => settled + heldTokenReviews() === FLOOD || heldTokenReviews() > REVIEW_LIMITS.maxInFlight, {
      what: 'every request of the flood answered or held in a review',
    });
    const inFlight = heldTokenReviews();
    expect(inFlight).toBeGreaterThan(0);
    expect(inFlight).toBeLessThanOrEqual(REVIEW_LIMITS.maxInFlight);
    expect(tokenReviews() - before).toBe(inFlight);

    // A cached decision needs no review; a known caller's review takes a slot the flood cannot take.
    expect((await get(port, READER)).status).toBe(200);
    let writerAnswer: Answer | undefined;
    const writer = get(port, WRITER).then((answer) => (writerAnswer = answer));
    await waitFor(() => heldTokenReviews() === inFlight + 1 || writerAnswer !== undefined, { what: "WRITER's TokenReview" });
    expect(writerAnswer, 'WRITER answered before its review').toBeUndefined();
    expectOverloaded(await get(port, bogusTokens(1)[0]!));

    cluster.server.resume();
    expect((await writer).status).toBe(200);
    expectRefusedOrShed(await Promise.all(flood), inFlight);
  });

  it('starts at most `burst` reviews, then `perSecond`, caches refusals, and re-reviews known callers regardless', async () => {
    let now = 1_000_000;
    const { burst, perSecond } = REVIEW_LIMITS;
    const port = await startApi({ now: () => now, allowedTtlMs: 1_000 });
    expect((await get(port, READER)).status).toBe(200); // one review out of the bucket
    const start = tokenReviews();

    const tokens = bogusTokens(FLOOD);
    const first = await Promise.all(tokens.map((token) => get(port, token)));
    const reviewed = tokenReviews() - start;
    expect(reviewed).toBeGreaterThan(0);
    expect(reviewed).toBeLessThanOrEqual(burst - 1);
    expectRefusedOrShed(first, reviewed);
    // A refused token is refused from the cache: a repeated bogus token costs one review.
    const refused = tokens.filter((_, i) => first[i]!.status === 401);
    expect((await Promise.all(refused.map((token) => get(port, token)))).map((answer) => answer.status)).toEqual(refused.map(() => 401));
    expect(tokenReviews() - start).toBe(reviewed);

    now += 1_001; // a second's worth of reviews more; READER's decision has expired
    const second = await Promise.all(bogusTokens(FLOOD).map((token) => get(port, token)));
    expectRefusedOrShed(second, tokenReviews() - start - reviewed);
    // One at a time, so no slot is ever full: the first one shed proves the bucket empty.
    let shed: Answer | undefined;
    for (let i = 0; i <= burst + perSecond && shed === undefined; i++) {
      const answer = await get(port, bogusTokens(1)[0]!);
      if (answer.status !== 401) shed = answer;
    }
    expectOverloaded(shed!);
    const bogusReviews = tokenReviews() - start;
    expect(bogusReviews).toBeLessThanOrEqual(burst - 1 + perSecond);

    expect((await get(port, READER)).status).toBe(200);
    expect(tokenReviews() - start).toBe(bogusReviews + 1);
  });

  it('refuses a token that is not shaped as a service-account token with 401, without a review', async () => {
    const port = await startApi();
    const before = tokenReviews();
    for (const token of ['opaque-api-key', 'a.b', 'a.b.c.d', 'a..c', 'eyJh.eyJz.c2ln=', 'abc/def.ghi.jkl']) {
      const answer = await get(port, token);
      expect(answer.status, token).toBe(401);
      expect(answer.body.type).toBe(problemTypeUri(Problems.unauthorized.code));
    }
    expect(tokenReviews()).toBe(before);
  });
});
