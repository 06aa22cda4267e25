// A runtime that dies mid-call: the call fails with a reason, the sidecar keeps answering, the runtime returns.
// Only the calls in flight fail: runs still waiting in the queue wait for the restarted runtime, and calls that
// arrive while it is down (or has died unnoticed) get 503.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { makePythonApp } from '../support/app-dir.ts';
import { freePort } from '../support/custom-app.ts';
import type { DevApp } from '../../local/dev-server.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { waitFor } from '../support/wait.ts';

let dev: TestDevServer;
/** The app's run path through the front door under test; the management API is always the dev server's. */
let base: string;
/** The same through the app of one slot, `narrow`. */
let narrowBase: string;
/** Gate files; and the file that, while it exists, keeps `narrow`'s runtime from starting. */
let gates: string;
let holdStart: string;

beforeAll(async () => {
  gates = await mkdtemp(join(tmpdir(), 'runlet-crash-'));
  holdStart = join(gates, 'hold-start');
  const narrow = await makePythonApp('narrow', `[deployment.env]\nHOLD_START_WHILE = "${holdStart}"\n\n[scaling]\nreplica_concurrency = 1\nresponse_grace_period = 60`);
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`, narrow] });
});

function app(name: string): DevApp {
  return dev.apps.find((candidate) => candidate.target.appName === name)!;
}

async function runRecord(appName: string, runId: string): Promise<{ status: string; reason: string | null; statusCode: number | null }> {
  const response = await fetch(`${dev.url}/v2/projects/dev/apps/${appName}/runs/${runId}`);
  return ((await response.json()) as { item: { status: string; reason: string | null; statusCode: number | null } }).item;
}

async function expectUnavailable(response: Response): Promise<void> {
  expect(response.status).toBe(503);
  expect(response.headers.get('retry-after')).toBe('1');
  expect(((await response.json()) as { type: string }).type).toBe('https://runlet.dev/problems#app-unavailable');
}
afterAll(async () => dev?.dispose());

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    base = `${front.origin}/v4/dev/e2e`;
    narrowBase = `${front.origin}/v4/dev/narrow`;
    return front.close;
  });

  describe('runtime crash', () => {
    it('fails the runs in flight with reason runtime_crashed, answers 503 while restarting, then serves again', async () => {
      const gate = join(await mkdtemp(join(tmpdir(), 'runlet-crash-')), 'gate');
      const supervisor = dev.apps[0]!.supervisor;
      const crashesBefore = supervisor.crashes;

      const inFlight = postJson(`${base}/gated`, { gate });
      const exiting = postJson(`${base}/exit_when_open`, { gate });
      await waitFor(() => dev.apps[0]!.target.admission.inFlight === 2, { what: 'both calls in flight' });
      await writeFile(gate, '');

      const [gatedResponse, exitingResponse] = [await inFlight, await exiting];
      expect(exitingResponse.status).toBe(502);
      // The gated call may win the race and finish before the exit; if not, it fails the same way.
      for (const response of gatedResponse.status === 200 ? [exitingResponse] : [gatedResponse, exitingResponse]) {
        expect(response.status).toBe(502);
        const problem = (await response.json()) as { type: string; detail: string };
        expect(problem.type).toBe('https://runlet.dev/problems#upstream-failed');
        expect(problem.detail).toMatch(/exited or crashed/);
        const record = await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${response.headers.get('x-request-id')}`)).json();
        expect(record).toMatchObject({ item: { status: 'failure', reason: 'runtime_crashed', statusCode: 502 } });
      }

      await waitFor(() => supervisor.crashes > crashesBefore, { what: 'the supervisor to see the exit' });
      const during = await postJson(`${base}/echo`, {});
      if (during.status !== 200) {
        expect(during.status).toBe(503);
        expect(during.headers.get('retry-after')).toBe('1');
        expect(((await during.json()) as { type: string }).type).toBe('https://runlet.dev/problems#app-unavailable');
      }
      const after = await waitFor(async () => {
        const response = await postJson(`${base}/greet`, { name: 'again' });
        return response.status === 200 ? response : null;
      }, { what: 'the restarted runtime to serve' });
      expect(await after.json()).toMatchObject({ result: { greeting: 'Hello, again!' } });
    });

    it('runs waiting in the queue when the runtime crashes wait for its restart and then run; calls meanwhile get 503', async () => {
      const narrow = app('narrow');
      const crashesBefore = narrow.supervisor.crashes;
      const gate = join(gates, `queued-${door.replaceAll(' ', '-')}`);
      // Held from now: once it crashes, the runtime stays down until the test lets it start.
      await writeFile(holdStart, '');

      const inFlight = postJson(`${narrowBase}/exit_when_open`, { gate });
      await waitFor(() => narrow.target.admission.inFlight === 1, { what: 'the crashing call in flight' });
      const accepted = await postJson(`${narrowBase}/greet?async=true`, { name: 'queued async' });
      expect(accepted.status).toBe(202);
      const { run_id: asyncRunId } = (await accepted.json()) as { run_id: string };
      const queuedSync = postJson(`${narrowBase}/greet`, { name: 'queued sync' });
      await waitFor(() => narrow.target.admission.queued === 2, { what: 'an async and a sync run queued behind it' });

      await writeFile(gate, '');
      const crashed = await inFlight;
      expect(crashed.status).toBe(502);
      expect(await runRecord('narrow', crashed.headers.get('x-request-id')!)).toMatchObject({ status: 'failure', reason: 'runtime_crashed' });
      await waitFor(() => narrow.supervisor.crashes > crashesBefore, { what: 'the supervisor to see the exit' });

      // Down, and held down: whatever arrives now is refused at once, sync or async, and nothing of it is recorded.
      await expectUnavailable(await postJson(`${narrowBase}/greet`, { name: 'while down' }));
      await expectUnavailable(await postJson(`${narrowBase}/greet?async=true`, { name: 'while down' }));
      expect(await runRecord('narrow', asyncRunId)).toMatchObject({ status: 'pending' });
      expect(narrow.target.admission.queued + narrow.target.admission.inFlight).toBe(2);

      await rm(holdStart);
      const served = await queuedSync;
      expect(served.status).toBe(200);
      expect(await served.json()).toMatchObject({ result: { greeting: 'Hello, queued sync!' } });
      const settled = await waitFor(async () => {
        const record = await runRecord('narrow', asyncRunId);
        return record.status === 'pending' || record.status === 'running' ? null : record;
      }, { what: 'the queued async run to finish' });
      expect(settled).toMatchObject({ status: 'success', statusCode: 200, reason: null });
    });

    it('answers 503, not 502, a call that finds the runtime dead before its supervisor has seen the exit, and marks the app not ready', async () => {
      const e2e = app('e2e');
      const liveOrigin = e2e.target.origin!;
      // The race made on purpose: the runtime's address stops answering while the app is still attached to it,
      // as in the moment between a runtime's death and its supervisor (or a pod's readiness probe) seeing it.
      e2e.target.attach(`http://127.0.0.1:${await freePort()}`);
      try {
        const response = await postJson(`${base}/greet`, { name: 'too early' });
        const runId = response.headers.get('x-request-id')!;
        await expectUnavailable(response);
        expect(await runRecord('e2e', runId)).toMatchObject({ status: 'failure', statusCode: 503 });
        expect(e2e.target.ready).toBe(false);
        // Found at once from now on, before anything is tried; an async call's check is answered alike.
        await expectUnavailable(await postJson(`${base}/greet?async=true`, { name: 'too early' }));
      } finally {
        e2e.target.attach(liveOrigin);
      }
      expect(e2e.target.ready).toBe(true);
      expect((await postJson(`${base}/greet`, { name: 'back' })).status).toBe(200);
    });

    it('answers 503, not 502, an async call whose check finds the runtime dead before anyone has seen it', async () => {
      const e2e = app('e2e');
      const liveOrigin = e2e.target.origin!;
      e2e.target.attach(`http://127.0.0.1:${await freePort()}`);
      try {
        await expectUnavailable(await postJson(`${base}/greet?async=true`, { name: 'too early' }));
      } finally {
        e2e.target.attach(liveOrigin);
      }
    });
  });
});
