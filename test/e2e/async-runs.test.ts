// Async runs: 202 + run_id only after the pending record is stored, background execution, failures, limits.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { makePythonApp } from '../support/app-dir.ts';
import { ContractChecker } from '../support/contract.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { waitFor } from '../support/wait.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';

let dev: TestDevServer;
/** Origin of the front door under test; the management API is always the dev server's. */
let runOrigin: string;
/** Gate files of the door under test: each door's tests open their own. */
let gates: string;

beforeAll(async () => {
  dev = await startTestDevServer({
    appDirs: [
      `${FIXTURE_APPS}/e2e`,
      await makePythonApp('narrow', '[scaling]\nreplica_concurrency = 1\nresponse_grace_period = 60'),
      await makePythonApp('brief', '[scaling]\nreplica_concurrency = 2\nresponse_grace_period = 1'),
      await makePythonApp('tight', '[scaling]\nreplica_concurrency = 1\nresponse_grace_period = 1'),
    ],
  });
});
afterAll(async () => dev?.dispose());

async function record(app: string, runId: string): Promise<RunRecord | null> {
  const response = await fetch(`${dev.url}/v2/projects/dev/apps/${app}/runs/${runId}`);
  return response.status === 200 ? ((await response.json()) as { item: RunRecord }).item : null;
}

function settled(app: string, runId: string): Promise<RunRecord> {
  return waitFor(async () => {
    const item = await record(app, runId);
    return item && item.completedAt !== null ? item : null;
  }, { what: `run ${runId} to complete` });
}

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeAll(async () => {
    gates = await mkdtemp(join(tmpdir(), 'runlet-async-gates-'));
  });
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    runOrigin = front.origin;
    return front.close;
  });

  describe('async runs', () => {
    it('answers 202 with exactly {"run_id"} and X-Request-Id, after the pending record is stored', async () => {
      const gate = join(gates, 'accept');
      const response = await postJson(`${runOrigin}/v4/dev/e2e/gated?async=true`, { gate, result: { ok: 1 } });
      expect(response.status).toBe(202);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      await new ContractChecker('run').expectDescribed('POST', '/v4/{project_id}/{app_name}/{function}', response);
      const body = (await response.json()) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['run_id']);
      expect(response.headers.get('x-request-id')).toBe(body.run_id);
      const runId = body.run_id as string;

      // Listed at once, before the function can have finished: it is waiting on the gate.
      const early = await record('e2e', runId);
      expect(early).toMatchObject({ async: true, mode: 'async' });
      expect(['pending', 'running']).toContain(early!.status);
      await waitFor(async () => (await record('e2e', runId))?.status === 'running', { what: 'the run to start' });

      await writeFile(gate, '');
      const done = await settled('e2e', runId);
      expect(done).toMatchObject({ status: 'success', statusCode: 200, async: true, error: null });
      expect(done.runtimeMs).toEqual(expect.any(Number));
    });

    it.each(['true', '1'])('accepts async=%s; async=false and async=0 run synchronously', async (flag) => {
      const accepted = await postJson(`${runOrigin}/v4/dev/e2e/echo?async=${flag}`, { a: 1 });
      expect(accepted.status).toBe(202);
      for (const off of ['false', '0']) {
        const sync = await postJson(`${runOrigin}/v4/dev/e2e/echo?async=${off}`, { a: 1 });
        expect(await sync.json()).toMatchObject({ result: { a: 1 } });
      }
    });

    it('validates the body and parameters before accepting', async () => {
      const invalidJson = await fetch(`${runOrigin}/v4/dev/e2e/echo?async=true`, { method: 'POST', body: '{' });
      expect(invalidJson.status).toBe(400);
      const notObject = await postJson(`${runOrigin}/v4/dev/e2e/echo?async=true`, [1]);
      expect(notObject.status).toBe(400);
      const badFlag = await postJson(`${runOrigin}/v4/dev/e2e/echo?async=maybe`, {});
      expect(badFlag.status).toBe(400);
      const unknownApp = await postJson(`${runOrigin}/v4/dev/nope/echo?async=true`, {});
      expect(unknownApp.status).toBe(404);
      const unknownFunction = await postJson(`${runOrigin}/v4/dev/e2e/nope?async=true`, {});
      expect(unknownFunction.status).toBe(404);
      expect(((await unknownFunction.json()) as { type: string }).type).toBe('https://runlet.dev/problems#function-not-found');
      // Checked by the runtime before the 202: JSON deeper than Python decodes is its 400, not a 502.
      const tooDeep = await fetch(`${runOrigin}/v4/dev/e2e/echo?async=true`, { method: 'POST', body: '{"a":' + '['.repeat(30_000) + ']'.repeat(30_000) + '}' });
      expect(tooDeep.status).toBe(400);
      expect(((await tooDeep.json()) as { type: string }).type).toBe('https://runlet.dev/problems#json-too-complex');
      const badArguments = await postJson(`${runOrigin}/v4/dev/e2e/greet?async=true`, { nom: 'x' });
      expect(badArguments.status).toBe(422);
      expect(await badArguments.json()).toMatchObject({ missing: ['name'], unexpected: ['nom'] });
      // None of the refused calls was recorded: nothing was accepted.
      const listed = (await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs?asyncOnly=true`)).json()) as { items: Array<{ functionName: string }> };
      expect(listed.items.filter((run) => run.functionName === 'nope' || run.functionName === 'greet')).toEqual([]);
    });

    it('records a function that raises as failure with its status code and error', async () => {
      const response = await postJson(`${runOrigin}/v4/dev/e2e/boom?async=true`, { message: 'late failure' });
      const { run_id: runId } = (await response.json()) as { run_id: string };
      expect(await settled('e2e', runId)).toMatchObject({ status: 'failure', statusCode: 500, error: { type: 'ValueError', message: 'late failure' } });
    });

    it('runs a stream request with async=true as async, the generator items becoming the result', async () => {
      const response = await postJson(`${runOrigin}/v4/dev/e2e/items?async=true`, { n: 2 }, { accept: 'text/event-stream' });
      expect(response.status).toBe(202);
      const { run_id: runId } = (await response.json()) as { run_id: string };
      expect(await settled('e2e', runId)).toMatchObject({ status: 'success', mode: 'async' });
    });

    it('stops a run past response_grace_period and records failure with reason timeout', async () => {
      const response = await postJson(`${runOrigin}/v4/dev/brief/sleep?async=true`, { seconds: 4 });
      const { run_id: runId } = (await response.json()) as { run_id: string };
      const done = await settled('brief', runId);
      expect(done).toMatchObject({ status: 'failure', reason: 'timeout', statusCode: 504, error: { type: 'Timeout' } });
      expect(done.responseTimeMs).toBeLessThan(4000);
    });

    it('gives a run that times out while queued the same error type as one that times out running', async () => {
      // tight takes one at a time (an app of its own: the runtime's threads sleep on after the runs are
      // stopped): the second call waits for a slot past its 1 s limit.
      const calls = await Promise.all([2, 2].map((seconds) => postJson(`${runOrigin}/v4/dev/tight/sleep?async=true`, { seconds })));
      const records = await Promise.all(calls.map(async (call) => settled('tight', ((await call.json()) as { run_id: string }).run_id)));
      for (const done of records) expect(done).toMatchObject({ status: 'failure', reason: 'timeout', error: { type: 'Timeout' } });
    });
  });

  describe('admission', () => {
    it('queues past replica_concurrency (recorded pending), and refuses past the queue with 503 + Retry-After', async () => {
      const gate = join(gates, 'capacity');
      const first = postJson(`${runOrigin}/v4/dev/narrow/gated`, { gate });
      const target = dev.apps.find((app) => app.loaded.name === 'narrow')!.target;
      await waitFor(() => target.admission.inFlight === 1, { what: 'the first call to hold the slot' });

      const queued = Array.from({ length: 10 }, () => postJson(`${runOrigin}/v4/dev/narrow/echo`, {}));
      await waitFor(() => target.admission.queued === 10, { what: 'ten calls to queue' });

      const refused = await postJson(`${runOrigin}/v4/dev/narrow/echo`, {});
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(((await refused.json()) as { type: string }).type).toBe('https://runlet.dev/problems#over-capacity');
      const refusedAsync = await postJson(`${runOrigin}/v4/dev/narrow/echo?async=true`, {});
      expect(refusedAsync.status).toBe(503);

      const list = await fetch(`${dev.url}/v2/projects/dev/apps/narrow/runs?status=pending`);
      expect(((await list.json()) as { items: unknown[] }).items).toHaveLength(10);

      await writeFile(gate, '');
      expect((await first).status).toBe(200);
      const answers = await Promise.all(queued);
      expect(answers.map((r) => r.status)).toEqual(Array(10).fill(200));
      const runIds = answers.map((r) => r.headers.get('x-request-id')!);
      const records = await Promise.all(runIds.map((id) => settled('narrow', id)));
      expect(records.every((r) => r.status === 'success' && (r.queueTimeMs ?? 0) > 0)).toBe(true);
    });
  });
});
