import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteRunStore } from '../sidecar/runs/sqlite-run-store.ts';
import { PROBLEM_CONTENT_TYPE, ProblemError, problemTypeUri } from '../crds/problem.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import { RUN_STATUSES } from '../crds/run-record-values.ts';
import type { RunSource } from './run-source.ts';
import { failedAsyncRunRecord, pendingAsyncRunRecord, runRecord } from '../test/support/sqlite-run-records.ts';
import { InMemoryAppDirectory } from './app-directory.ts';
import { Problems, requestRejectedProblem } from '../crds/problems.ts';
import { encodePageToken } from './page-token.ts';
import { managementApi, type ManagementApiOptions } from './routes.ts';
import { problemSchema, runItemSchema, runPageSchema } from './schemas.ts';

// The response schemas double as the contract the bodies are checked against, with formats enforced.
const ajv = new Ajv({ strict: true, allErrors: true });
addFormats.default(ajv);
const validatePage = ajv.compile(runPageSchema);
const validateItem = ajv.compile(runItemSchema);
const validateProblem = ajv.compile(problemSchema);

const apps = new InMemoryAppDirectory([
  { projectId: 'demo', appName: 'hello' },
  { projectId: 'demo', appName: 'x' },
  // Literally named `{project}-x`: must win over the `{project}-{app}` reading of its name.
  { projectId: 'demo', appName: 'demo-x' },
  { projectId: 'demo', appName: 'quiet' },
  { projectId: 'demo', appName: 'filtered' },
]);

interface Response {
  status: number;
  headers: Headers;
  body: unknown;
}

let dataDir: string;
let store: SqliteRunStore;
let servers: FastifyInstance[] = [];
/** Runs of demo/hello, oldest first. */
const helloRuns: RunRecord[] = [];
let xRun: RunRecord;
let demoXRun: RunRecord;
let baseUrl: string;

async function startServer(
  options: Partial<ManagementApiOptions> = {},
  logger: FastifyBaseLogger = pino({ level: 'silent' }),
  prepareHost: (server: FastifyInstance) => void = () => {},
): Promise<string> {
  const server = fastify({ loggerInstance: logger });
  prepareHost(server);
  await server.register(managementApi, { runs: store, apps, appList: () => [], ...options });
  server.get('/healthz', async () => ({ ok: true }));
  await server.listen({ host: '127.0.0.1', port: 0 });
  servers.push(server);
  return `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
}

async function request(path: string, init: RequestInit & { base?: string } = {}): Promise<Response> {
  const response = await fetch(`${init.base ?? baseUrl}${path}`, init);
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text === '' ? undefined : JSON.parse(text) };
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'runlet-management-'));
  store = new SqliteRunStore({ dataDir, logger: pino({ level: 'silent' }) });
  for (let i = 0; i < 137; i += 1) {
    const status = RUN_STATUSES[i % RUN_STATUSES.length]!;
    const record =
      i % 3 === 0
        ? failedAsyncRunRecord({ status })
        : i % 3 === 1
          ? pendingAsyncRunRecord({ status })
          : runRecord({ status });
    helloRuns.push(record);
    store.save(record);
  }
  xRun = runRecord({ appName: 'x' });
  demoXRun = runRecord({ appName: 'demo-x' });
  store.save(xRun);
  store.save(demoXRun);
  await store.flush();
  baseUrl = await startServer();
});

afterAll(async () => {
  for (const server of servers) await server.close();
  servers = [];
  await store.close();
  rmSync(dataDir, { recursive: true, force: true });
});

function newestFirst(runs: readonly RunRecord[]): RunRecord[] {
  return [...runs].sort((a, b) => (a.id < b.id ? 1 : -1));
}

function expectValid(validate: ValidateFunction, body: unknown): void {
  expect(validate(body), JSON.stringify(validate.errors)).toBe(true);
}

interface Page {
  items: RunRecord[];
  nextToken: string | null;
}

/** Follows nextToken to the end; every page is checked against the page schema. */
async function listAll(appPath: string, query: string): Promise<{ runs: RunRecord[]; pages: number }> {
  const runs: RunRecord[] = [];
  let pages = 0;
  let nextToken: string | null = null;
  do {
    const tokenPart: string = nextToken === null ? '' : `&nextToken=${encodeURIComponent(nextToken)}`;
    const response = await request(`/v2/projects/demo/apps/${appPath}/runs?${query}${tokenPart}`);
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expectValid(validatePage, response.body);
    const page = response.body as Page;
    runs.push(...page.items);
    nextToken = page.nextToken;
    pages += 1;
  } while (nextToken !== null);
  return { runs, pages };
}

describe('GET /v2/projects/{project_id}/apps/{app_id}/runs', () => {
  it('lists the runs newest first, 50 a page, following nextToken to null without gaps or duplicates', async () => {
    const { runs, pages } = await listAll('hello', '');
    expect(pages).toBe(3);
    expect(runs).toEqual(newestFirst(helloRuns));
  });

  it('pages with any pageSize from 1 to 500', async () => {
    expect((await listAll('hello', 'pageSize=7')).runs).toEqual(newestFirst(helloRuns));
    const all = await listAll('hello', 'pageSize=500');
    expect(all).toEqual({ runs: newestFirst(helloRuns), pages: 1 });
    const single = await request('/v2/projects/demo/apps/hello/runs?pageSize=1');
    expect((single.body as Page).items).toEqual([newestFirst(helloRuns)[0]]);
  });

  it('filters by asyncOnly and status, alone and together, across pages', async () => {
    const asyncRuns = newestFirst(helloRuns.filter((run) => run.async));
    expect((await listAll('hello', 'asyncOnly=true&pageSize=10')).runs).toEqual(asyncRuns);
    expect((await listAll('hello', 'asyncOnly=1&pageSize=10')).runs).toEqual(asyncRuns);
    expect((await listAll('hello', 'asyncOnly=false&pageSize=60')).runs).toEqual(newestFirst(helloRuns));
    expect((await listAll('hello', 'asyncOnly=0')).runs).toEqual(newestFirst(helloRuns));
    for (const status of RUN_STATUSES) {
      const expected = newestFirst(helloRuns.filter((run) => run.status === status));
      expect((await listAll('hello', `status=${status}&pageSize=4`)).runs).toEqual(expected);
      expect((await listAll('hello', `status=${status}&asyncOnly=true&pageSize=3`)).runs).toEqual(
        expected.filter((run) => run.async),
      );
    }
  });

  it('accepts {project_id}-{app_name} for app_id, and prefers an app literally named so', async () => {
    expect((await listAll('demo-hello', 'pageSize=100')).runs).toEqual(newestFirst(helloRuns));
    expect((await listAll('demo-x', '')).runs).toEqual([demoXRun]);
    expect((await listAll('x', '')).runs).toEqual([xRun]);
  });

  it('answers an app without runs with an empty last page, and lists a run saved a moment ago', async () => {
    const empty = await request('/v2/projects/demo/apps/quiet/runs');
    expect(empty).toMatchObject({ status: 200, body: { items: [], nextToken: null } });
    const fresh = runRecord({ appName: 'quiet' });
    // Not flushed: the store's reads include what is still pending.
    store.save(fresh);
    const response = await request('/v2/projects/demo/apps/quiet/runs');
    expect(response.body).toEqual({ items: [fresh], nextToken: null });
  });
});

describe('GET /v2/projects/{project_id}/apps/{app_id}/runs/{run_id}', () => {
  it('answers the run in an item envelope, by either form of app_id', async () => {
    const run = helloRuns[5]!;
    for (const appId of ['hello', 'demo-hello']) {
      const response = await request(`/v2/projects/demo/apps/${appId}/runs/${run.id}`);
      expect(response.status).toBe(200);
      expectValid(validateItem, response.body);
      expect(response.body).toEqual({ item: run });
    }
  });

  it('answers 404 for an unknown run, and for a run of another app', async () => {
    for (const path of [
      `/v2/projects/demo/apps/hello/runs/01900000-0000-7000-8000-000000000000`,
      `/v2/projects/demo/apps/hello/runs/${xRun.id}`,
    ]) {
      const response = await request(path);
      expectProblem(response, Problems.runNotFound, /^no run \S+ in app demo\/hello$/);
    }
  });
});

function expectProblem(
  response: Response,
  spec: { code: string; status: number; title: string },
  detail: RegExp | string,
  parameter?: string,
): void {
  expect(response.status, JSON.stringify(response.body)).toBe(spec.status);
  expect(response.headers.get('content-type')?.split(';')[0]).toBe(PROBLEM_CONTENT_TYPE);
  expectValid(validateProblem, response.body);
  const body = response.body as Record<string, unknown>;
  expect(body).toMatchObject({ type: problemTypeUri(spec.code), title: spec.title, status: spec.status });
  expect(body.detail).toMatch(detail);
  if (parameter !== undefined) expect(body.parameter).toBe(parameter);
}

describe('problems', () => {
  it('answers 404 for an unknown app or project', async () => {
    for (const path of ['/v2/projects/demo/apps/nope/runs', '/v2/projects/other/apps/hello/runs']) {
      expectProblem(await request(path), Problems.appNotFound, /^no app \S+ in project \S+ \(app_id is/);
    }
    expectProblem(
      await request(`/v2/projects/demo/apps/nope/runs/${xRun.id}`),
      Problems.appNotFound,
      'no app nope in project demo (app_id is an app name or {project_id}-{app_name})',
    );
  });

  const ACCEPTED = 'accepted: pageSize, nextToken, asyncOnly, status';
  const badQueries: Array<[query: string, parameter: string, detail: string]> = [
    ['pagesize=10', 'pagesize', `unknown query parameter pagesize; ${ACCEPTED}`],
    ['pageSize=0', 'pageSize', 'query parameter pageSize must be an integer from 1 to 500; got 0'],
    ['pageSize=501', 'pageSize', 'query parameter pageSize must be an integer from 1 to 500; got 501'],
    ['pageSize=abc', 'pageSize', 'query parameter pageSize must be an integer from 1 to 500; got "abc"'],
    ['pageSize=1.5', 'pageSize', 'query parameter pageSize must be an integer from 1 to 500; got "1.5"'],
    ['pageSize=', 'pageSize', 'query parameter pageSize must be an integer from 1 to 500; got ""'],
    ['pageSize=5&pageSize=6', 'pageSize', 'query parameter pageSize is given 2 times; give it once'],
    ['asyncOnly=yes', 'asyncOnly', 'query parameter asyncOnly must be one of true, false, 1, 0; got "yes"'],
    [
      'status=done',
      'status',
      'query parameter status must be one of pending, running, success, failure, cancelled; got "done"',
    ],
  ];
  for (const [query, parameter, detail] of badQueries) {
    it(`answers 400 naming the parameter for ?${query}`, async () => {
      const response = await request(`/v2/projects/demo/apps/hello/runs?${query}`);
      expectProblem(response, Problems.invalidParameter, detail, parameter);
    });
  }

  it('answers 400 for a query parameter on get run, which takes none', async () => {
    const response = await request(`/v2/projects/demo/apps/hello/runs/${xRun.id}?verbose=1`);
    expectProblem(
      response,
      Problems.invalidParameter,
      'unknown query parameter verbose; this operation takes none',
      'verbose',
    );
  });

  it('answers 400 for a malformed nextToken', async () => {
    const unsupported = Buffer.from(JSON.stringify({ v: 2, after: helloRuns[0]!.id })).toString('base64url');
    const notJson = Buffer.from('not json').toString('base64url');
    const wrongShape = Buffer.from(JSON.stringify({ v: 1, after: 'x' })).toString('base64url');
    const cases: Array<[token: string, detail: RegExp]> = [
      ['garbage!', /^nextToken is malformed/],
      ['', /^nextToken is malformed/],
      [notJson, /^nextToken is malformed/],
      [wrongShape, /^nextToken is malformed/],
      ['A'.repeat(2000), /^nextToken is malformed/],
      [unsupported, /^nextToken has version 2, this server reads version 1$/],
    ];
    for (const [token, detail] of cases) {
      const response = await request(`/v2/projects/demo/apps/hello/runs?nextToken=${encodeURIComponent(token)}`);
      expectProblem(response, Problems.invalidPageToken, detail, 'nextToken');
    }
  });

  it('answers 400 for a nextToken reused with other filters or for another app', async () => {
    const first = await request('/v2/projects/demo/apps/hello/runs?asyncOnly=true&status=failure&pageSize=2');
    const token = encodeURIComponent((first.body as Page).nextToken!);
    expectProblem(
      await request(`/v2/projects/demo/apps/hello/runs?status=failure&pageSize=2&nextToken=${token}`),
      Problems.invalidPageToken,
      'nextToken was issued for asyncOnly=true, status=failure, but this request asks asyncOnly=false, ' +
        'status=failure: repeat the filters of the first page, or omit nextToken to start over',
    );
    expectProblem(
      await request(`/v2/projects/demo/apps/x/runs?asyncOnly=true&status=failure&nextToken=${token}`),
      Problems.invalidPageToken,
      'nextToken was issued for app demo/hello, not demo/x',
    );
    // The same filters in another order and spelling are the same filters.
    const same = await request(`/v2/projects/demo/apps/demo-hello/runs?status=failure&asyncOnly=1&nextToken=${token}`);
    expect(same.status).toBe(200);
  });

  it('answers 405 with Allow for other methods on the app and run resources', async () => {
    for (const [method, path, resource] of [
      ['POST', '/v2/projects/demo/apps/hello/runs', 'runs'],
      ['DELETE', `/v2/projects/demo/apps/hello/runs/${xRun.id}`, 'runs'],
      ['PUT', '/v2/projects/demo/apps/nope/runs', 'runs'],
      ['POST', '/v2/projects/demo/apps', 'apps'],
    ] as const) {
      const response = await request(path, {
        method,
        headers: { 'content-type': 'application/json' },
        body: '{not json',
      });
      expectProblem(response, Problems.methodNotAllowed, `${method} is not allowed on ${resource}; they are read with GET, HEAD`);
      expect(response.headers.get('allow')).toBe('GET, HEAD');
    }
  });

  it('answers 404 problems for unknown routes under /v2 and leaves the other paths to the host', async () => {
    expectProblem(
      await request('/v2/projects/demo/things?x=1'),
      Problems.routeNotFound,
      'no route for GET /v2/projects/demo/things; the management API serves GET /v2/projects/{project_id}/apps, ' +
        'GET /v2/projects/{project_id}/apps/{app_id}/runs, GET /v2/projects/{project_id}/apps/{app_id}/runs/{run_id}',
    );
    const outside = await request('/v3/anything');
    expect(outside.status).toBe(404);
    expect(outside.headers.get('content-type')).toMatch(/^application\/json/);
    expect((await request('/healthz')).status).toBe(200);
  });

  it("renders a client error of the host's own hooks as a problem with the hook's status", async () => {
    const base = await startServer({}, undefined, (server) => {
      server.addHook('onRequest', async () => {
        throw Object.assign(new Error('rate limit exceeded, retry in 1 minute'), { statusCode: 429 });
      });
    });
    const response = await request('/v2/projects/demo/apps/hello/runs', { base });
    expectProblem(
      response,
      requestRejectedProblem(429),
      'rate limit exceeded, retry in 1 minute',
    );
  });

  it('answers 500 without the cause when the run source fails, and logs it', async () => {
    const failing: RunSource = {
      listRuns: async () => {
        throw new Error('secret connection string in this message');
      },
      getRun: async () => undefined,
    };
    const logLines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => logLines.push(JSON.parse(line)) });
    const base = await startServer({ runs: failing }, logger);
    const response = await request('/v2/projects/demo/apps/hello/runs', { base });
    expectProblem(
      response,
      Problems.internalError,
      'the management API could not answer this request; the server log has the cause',
    );
    expect(JSON.stringify(response.body)).not.toContain('secret');
    expect(logLines).toContainEqual(
      expect.objectContaining({
        msg: 'management API request failed',
        err: expect.objectContaining({ message: 'secret connection string in this message' }),
      }),
    );
  });
});

describe('authenticate hook', () => {
  it('runs first with the project id and renders the problem it throws', async () => {
    const projects: string[] = [];
    const base = await startServer({
      authenticate: async (request, projectId) => {
        projects.push(projectId);
        if (request.headers.authorization !== 'Bearer good') {
          throw new ProblemError(Problems.unauthorized, 'a bearer service-account token is required', {
            headers: { 'www-authenticate': 'Bearer' },
          });
        }
      },
    });
    // Before the app lookup: an unauthenticated caller learns nothing about which apps exist.
    const refused = await request('/v2/projects/demo/apps/nope/runs', { base });
    expectProblem(refused, Problems.unauthorized, 'a bearer service-account token is required');
    expect(refused.headers.get('www-authenticate')).toBe('Bearer');

    const allowed = await request(`/v2/projects/demo/apps/hello/runs/${helloRuns[0]!.id}`, {
      base,
      headers: { authorization: 'Bearer good' },
    });
    expect(allowed.body).toEqual({ item: helloRuns[0] });
    expect(projects).toEqual(['demo', 'demo']);
  });
});

describe('the filters functionName, createdAfter and createdBefore', () => {
  /** Runs of demo/filtered, a minute apart from 10:00 on, every third of function `train`. */
  const runs: RunRecord[] = [];
  const at = (minute: number) => new Date(Date.UTC(2026, 10, 26, 10, minute)).toISOString();
  beforeAll(async () => {
    for (let minute = 0; minute < 30; minute++) {
      const run = runRecord({ appName: 'filtered', createdAt: at(minute), functionName: minute % 3 === 0 ? 'train' : 'run' });
      runs.push(run);
      store.save(run);
    }
    await store.flush();
  });

  it('list the runs of a function in a time window, across pages, and take any RFC 3339 offset', async () => {
    const expected = newestFirst(runs.filter((run) => run.functionName === 'train' && run.createdAt >= at(5) && run.createdAt < at(20)));
    expect(expected.length).toBeGreaterThan(3);
    expect((await listAll('filtered', `functionName=train&createdAfter=${at(5)}&createdBefore=${at(20)}&pageSize=2`)).runs).toEqual(expected);
    // The same instants at +02:00, with a lower-case t and more digits.
    const after = encodeURIComponent('2026-11-26t12:05:00.000000+02:00');
    expect((await listAll('filtered', `functionName=train&createdAfter=${after}&createdBefore=${at(20)}&pageSize=2`)).runs).toEqual(expected);
    expect((await listAll('filtered', `createdBefore=${at(0)}`)).runs).toEqual([]);
  });

  it('refuse what is not an instant, naming the parameter', async () => {
    for (const [name, value] of [
      ['createdAfter', '2026-11-26'],
      ['createdAfter', '2026-02-30T00:00:00Z'],
      ['createdBefore', '2026-13-01T00:00:00Z'],
      ['createdBefore', "2026-11-26T10:00:00Z' OR '1'='1"],
      ['createdAfter', '0000-01-01T00:00:00Z'],
    ] as const) {
      const response = await request(`/v2/projects/demo/apps/filtered/runs?${name}=${encodeURIComponent(value)}`);
      expectProblem(response, Problems.invalidParameter, new RegExp(`^query parameter ${name} must`), name);
    }
    expectProblem(await request('/v2/projects/demo/apps/filtered/runs?functionName='), Problems.invalidParameter, /functionName/, 'functionName');
  });

  it('are part of a nextToken: reused with others it is refused; a token issued before them still continues', async () => {
    const first = await request('/v2/projects/demo/apps/filtered/runs?functionName=train&pageSize=2');
    const token = encodeURIComponent((first.body as Page).nextToken!);
    expectProblem(
      await request(`/v2/projects/demo/apps/filtered/runs?functionName=run&pageSize=2&nextToken=${token}`),
      Problems.invalidPageToken,
      /^nextToken was issued for asyncOnly=false, status=\(any\), functionName=train, but this request asks asyncOnly=false, status=\(any\), functionName=run:/,
      'nextToken',
    );
    const newest = newestFirst(runs);
    const older = Buffer.from(JSON.stringify({ v: 1, after: newest[1]!.id, project: 'demo', app: 'filtered', asyncOnly: false, status: null })).toString('base64url');
    expect(((await request(`/v2/projects/demo/apps/filtered/runs?pageSize=3&nextToken=${older}`)).body as Page).items).toEqual(newest.slice(2, 5));
  });
});

describe('page token', () => {
  it('is opaque base64url and continues where the page ended', async () => {
    const newest = newestFirst(helloRuns);
    const scope = { projectId: 'demo', appName: 'hello', asyncOnly: false, status: null, functionName: null, createdAfter: null, createdBefore: null };
    const token = encodePageToken(newest[9]!.id, scope);
    expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
    const response = await request(`/v2/projects/demo/apps/hello/runs?pageSize=5&nextToken=${token}`);
    expect((response.body as Page).items).toEqual(newest.slice(10, 15));
  });
});
