// A function's result has a limit (502 result-too-large, the run recorded failure); a large result within it is
// passed on as it arrives.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { waitFor } from '../support/wait.ts';

const LIMIT = 4 * 1024 * 1024;
let dev: TestDevServer;
let base: string;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`], resultLimitBytes: LIMIT });
});
afterAll(async () => dev?.dispose());

async function recordOf(response: Response): Promise<Record<string, unknown>> {
  const id = response.headers.get('x-request-id');
  return waitFor(async () => {
    const answer = await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${id}`);
    const { item } = (await answer.json()) as { item?: Record<string, unknown> };
    return item && item.status !== 'running' && item.status !== 'pending' ? item : null;
  }, { what: `run ${id} to be recorded as finished` });
}

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    base = `${front.origin}/v4/dev/e2e`;
    return front.close;
  });

  it('a result over the limit is refused: 502 result-too-large, recorded failure', async () => {
    const response = await postJson(`${base}/big`, { size: LIMIT + 1 });
    expect(response.status).toBe(502);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await response.json()) as { type: string; detail: string };
    expect(problem.type).toBe('https://runlet.dev/problems#result-too-large');
    expect(problem.detail).toMatch(new RegExp(`over the limit of ${LIMIT} bytes`));
    expect(await recordOf(response)).toMatchObject({ status: 'failure', statusCode: 502, error: { type: 'ResultTooLarge' } });
    // The runtime is fine: the next call is served.
    expect((await postJson(`${base}/greet`, { name: 'after' })).status).toBe(200);
  });

  it('a large result within the limit arrives whole, and the connection serves the next call', async () => {
    const size = LIMIT - 1024;
    const response = await postJson(`${base}/big`, { size });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { run_id: string; result: string; run_time_ms: number };
    expect(answer.result.length).toBe(size);
    expect(answer.run_id).toBe(response.headers.get('x-request-id'));
    expect(answer.run_time_ms).toBeGreaterThanOrEqual(0);
    expect(await recordOf(response)).toMatchObject({ status: 'success', statusCode: 200 });
    expect(await (await postJson(`${base}/greet`, { name: 'next' })).json()).toMatchObject({ result: { greeting: 'Hello, next!' } });
  });
});
