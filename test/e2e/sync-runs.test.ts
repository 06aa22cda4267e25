// Sync runs through the sidecar to a real Python runtime, and every platform error of the run interface.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { version as uuidVersion, validate as uuidValidate } from 'uuid';
import { ContractChecker } from '../support/contract.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';

const contract = new ContractChecker('run');
const RUN_OPERATION = '/v4/{project_id}/{app_name}/{function}';

let dev: TestDevServer;
/** Origin of the front door under test. */
let runOrigin: string;
let base: string;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`], bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => dev?.dispose());

function expectRunId(response: Response): string {
  const runId = response.headers.get('x-request-id');
  expect(runId).toBeTruthy();
  expect(uuidValidate(runId!)).toBe(true);
  expect(uuidVersion(runId!)).toBe(7);
  return runId!;
}

async function expectProblem(response: Response, status: number, code: string, detail: RegExp, method = 'POST'): Promise<Record<string, unknown>> {
  expect(response.status).toBe(status);
  if (code !== 'route-not-found') await contract.expectDescribed(method, RUN_OPERATION, response);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json(; charset=utf-8)?$/);
  expectRunId(response);
  const problem = (await response.json()) as Record<string, unknown>;
  expect(problem).toMatchObject({ type: `https://runlet.dev/problems#${code}`, status });
  expect(problem.title).toEqual(expect.any(String));
  expect(problem.detail).toMatch(detail);
  return problem;
}

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    runOrigin = front.origin;
    base = `${runOrigin}/v4/dev/e2e`;
    return front.close;
  });

  describe('sync runs', () => {
    it('answers 200 with run_id, result and run_time_ms, and X-Request-Id equal to the run id', async () => {
      const response = await postJson(`${base}/greet`, { name: 'Ada' });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      const runId = expectRunId(response);
      await contract.expectDescribed('POST', RUN_OPERATION, response);
      const body = (await response.json()) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['run_id', 'result', 'run_time_ms']);
      expect(body).toMatchObject({ run_id: runId, result: { greeting: 'Hello, Ada!' } });
      expect(body.run_time_ms).toEqual(expect.any(Number));
    });

    it('calls async def functions and passes any JSON result through unchanged', async () => {
      const sum = await postJson(`${base}/async_add`, { a: 2, b: 40 });
      expect(await sum.json()).toMatchObject({ result: 42 });
      const nested = { s: 'é✓', n: null, l: [1, 2.5, true], o: { deep: ['x'] } };
      const echo = await postJson(`${base}/echo`, nested);
      expect(((await echo.json()) as { result: unknown }).result).toEqual(nested);
    });

    it('accepts a call without a body or content-type as no arguments', async () => {
      const response = await fetch(`${base}/echo`, { method: 'POST' });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ result: {} });
    });

    it('collects a generator called plainly into a list', async () => {
      const response = await postJson(`${base}/items`, { n: 3 });
      expect(await response.json()).toMatchObject({ result: [{ i: 0 }, { i: 1 }, { i: 2 }] });
    });

    it('answers 500 with run_id, error {type, message} and run_time_ms when the function raises', async () => {
      const response = await postJson(`${base}/boom`, { message: 'it broke' });
      expect(response.status).toBe(500);
      const runId = expectRunId(response);
      await contract.expectDescribed('POST', RUN_OPERATION, response);
      const body = (await response.json()) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['run_id', 'error', 'run_time_ms']);
      expect(body).toMatchObject({ run_id: runId, error: { type: 'ValueError', message: 'it broke' } });
    });

    it.each([
      ['nested 100,000 deep', 'nested', { depth: 100_000 }, 'RecursionError'],
      ['an integer of 1,000,000 digits', 'big_integer', { digits: 1_000_000 }, 'ValueError'],
    ])('answers a result %s, which JSON cannot encode, with the function error 500, and serves on', async (_, name, args, type) => {
      const response = await postJson(`${base}/${name}`, args);
      expect(response.status).toBe(500);
      const body = (await response.json()) as { error: { type: string; message: string } };
      expect(body.error.type).toBe(type);
      expect(body.error.message).toMatch(/result cannot be encoded as JSON/);
      expect((await postJson(`${base}/greet`, { name: 'after' })).status).toBe(200);
    });

    it('answers a clear error naming the type of a result JSON cannot encode', async () => {
      const response = await postJson(`${base}/not_serialisable`, {});
      expect(response.status).toBe(500);
      const body = (await response.json()) as { error: { type: string; message: string } };
      expect(body.error.message).toMatch(/set/);
    });
  });

  describe('platform errors answer problem+json and run nothing', () => {
    it('invalid JSON → 400', async () => {
      const response = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name": ' });
      await expectProblem(response, 400, 'invalid-json', /could not be parsed as JSON/);
    });

    // Valid JSON that Python will not decode (its recursion and int-digit limits): the runtime's 400, which once
    // broke its connection and came back as 502 upstream-failed. The runtime serves on after it.
    it.each([
      ['arrays nested 30,000 deep', '{"a":' + '['.repeat(30_000) + ']'.repeat(30_000) + '}', /deeper than the runtime decodes/],
      // Deeper than any Python's limit (3.13 decodes 9,000 levels of objects), within the 64 KiB body limit.
      ['objects nested 12,000 deep', '{"":'.repeat(12_000) + '1' + '}'.repeat(12_000), /deeper than the runtime decodes/],
      ['an integer of 60,000 digits', `{"a":${'1'.repeat(60_000)}}`, /more than 4300 digits/],
    ])('%s → 400 json-too-complex, recorded as a failure, and the runtime serves on', async (_, body, detail) => {
      const response = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await expectProblem(response, 400, 'json-too-complex', detail);
      const record = await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${response.headers.get('x-request-id')}`)).json();
      expect(record).toMatchObject({ item: { status: 'failure', statusCode: 400 } });
      expect(await (await postJson(`${base}/echo`, { again: true })).json()).toMatchObject({ result: { again: true } });
    });

    it.each([
      ['an array', '[1,2]'],
      ['a string', '"x"'],
      ['null', 'null'],
      ['a number', '3'],
    ])('body that is %s → 400', async (what, body) => {
      const response = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await expectProblem(response, 400, 'body-not-object', new RegExp(`got ${what}`));
    });

    it('unknown project or app → 404', async () => {
      await expectProblem(await postJson(`${runOrigin}/v4/dev/nope/run`, {}), 404, 'app-not-found', /No app named "nope" in project "dev"/);
      await expectProblem(await postJson(`${runOrigin}/v4/other/e2e/run`, {}), 404, 'app-not-found', /project "other"/);
    });

    it('unknown function → 404; private function → 404; no function → 404', async () => {
      await expectProblem(await postJson(`${base}/missing`, {}), 404, 'function-not-found', /missing/);
      await expectProblem(await postJson(`${base}/_wait_for`, { path: '/' }), 404, 'function-not-found', /private/);
      await expectProblem(await postJson(`${base}/`, {}), 404, 'function-not-found', /names no function/);
      await expectProblem(await postJson(`${base}/a/b`, {}), 404, 'function-not-found', /single path segment/);
    });

    it('arguments that do not bind → 422 naming the missing and unexpected ones', async () => {
      const missing = await expectProblem(await postJson(`${base}/greet`, {}), 422, 'invalid-arguments', /name/);
      expect(missing.missing).toEqual(['name']);
      const unexpected = await expectProblem(await postJson(`${base}/greet`, { name: 'x', colour: 'red' }), 422, 'invalid-arguments', /colour/);
      expect(unexpected.unexpected).toEqual(['colour']);
    });

    it('body over the limit → 413', async () => {
      const big = { blob: 'x'.repeat(70 * 1024) };
      await expectProblem(await postJson(`${base}/echo`, big), 413, 'body-too-large', /65536 bytes/);
    });

    it('a method other than POST → 405 with Allow', async () => {
      const response = await fetch(`${base}/echo`, { method: 'GET' });
      await expectProblem(response, 405, 'method-not-allowed', /POST/, 'GET');
      expect(response.headers.get('allow')).toBe('POST');
    });

    it('bad async and webhookEndpoint parameters → 400', async () => {
      await expectProblem(await postJson(`${base}/echo?async=yes`, {}), 400, 'invalid-parameter', /async must be one of/);
      await expectProblem(await postJson(`${base}/echo?webhookEndpoint=not-a-url`, {}), 400, 'invalid-webhook-endpoint', /absolute URL/);
    });

    it('paths outside the run interface → 404 problem', async () => {
      await expectProblem(await fetch(`${runOrigin}/nowhere`), 404, 'route-not-found', /nowhere/);
    });
  });
});
