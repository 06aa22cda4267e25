// A runtime that dies mid-call: the call fails with a reason, the sidecar keeps answering, the runtime returns.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { waitFor } from '../support/wait.ts';

let dev: TestDevServer;
/** The app's run path through the front door under test; the management API is always the dev server's. */
let base: string;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`] });
});
afterAll(async () => dev?.dispose());

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    base = `${front.origin}/v4/dev/e2e`;
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
  });
});
