// Custom runtime: any method and path after the app name reach the app's own server unchanged.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { makeCustomApp } from '../support/custom-app.ts';
import { waitFor } from '../support/wait.ts';

let dev: TestDevServer;
/** Origin of the front door under test. */
let runOrigin: string;
let base: string;
/** Gate files; and the file that, while it exists, keeps the app `solo` from starting. */
let gates: string;
let holdStart: string;

beforeAll(async () => {
  gates = await mkdtemp(join(tmpdir(), 'runlet-custom-gates-'));
  holdStart = join(gates, 'hold-start');
  const solo = await makeCustomApp('solo', `[deployment.env]\nHOLD_START_WHILE = "${holdStart}"\n\n[scaling]\nreplica_concurrency = 1`);
  dev = await startTestDevServer({ appDirs: [await makeCustomApp('web'), solo], bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => dev?.dispose());

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    runOrigin = front.origin;
    base = `${runOrigin}/v4/dev/web`;
    return front.close;
  });

  describe('custom runtime', () => {
    it('forwards method, path, query (minus reserved parameters), body and X-Request-Id', async () => {
      const response = await fetch(`${base}/things/42?colour=red%20blue&async=false&x=1`, {
        method: 'PUT',
        headers: { 'content-type': 'text/plain' },
        body: 'hello app',
      });
      expect(response.status).toBe(200);
      const runId = response.headers.get('x-request-id');
      expect(runId).toMatch(/^[0-9a-f-]{36}$/);
      expect(await response.json()).toEqual({
        method: 'PUT',
        path: '/things/42',
        query: '?colour=red%20blue&x=1',
        requestId: runId,
        contentType: 'text/plain',
        body: 'hello app',
      });
    });

    it('tells the app to listen on the loopback (HOST), as the operator tells it in a pod', async () => {
      const response = await fetch(`${base}/host`);
      expect(await response.json()).toEqual({ host: '127.0.0.1', listens: '127.0.0.1' });
    });

    it('forwards the path as the caller encoded it', async () => {
      const response = await fetch(`${base}/files/a%2Fb/%C3%A9t%C3%A9`, { method: 'POST', body: '' });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { path: string }).path).toBe('/files/a%2Fb/%C3%A9t%C3%A9');
    });

    it('forwards GET to the app root and passes the app headers back, multi-valued ones included', async () => {
      const response = await fetch(base);
      expect(response.status).toBe(200);
      expect(response.headers.get('x-app')).toBe('custom');
      expect(response.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
      expect(await response.json()).toMatchObject({ method: 'GET', path: '/' });
    });

    it("passes the app's status and streamed body through", async () => {
      const streamed = await fetch(`${base}/stream`);
      expect(await streamed.text()).toBe('part 0\npart 1\npart 2\n');
      const teapot = await fetch(`${base}/status?code=418`);
      expect(teapot.status).toBe(418);
      expect(await teapot.json()).toEqual({ code: 418 });
    });

    it('records a call whose caller leaves mid-response as cancelled', async () => {
      const controller = new AbortController();
      const response = await fetch(`${base}/endless`, { signal: controller.signal });
      const runId = response.headers.get('x-request-id');
      const reader = response.body!.getReader();
      await reader.read();
      controller.abort();
      const record = await waitFor(async () => {
        const item = ((await (await fetch(`${dev.url}/v2/projects/dev/apps/web/runs/${runId}`)).json()) as { item: { status: string } }).item;
        return item.status !== 'running' ? item : null;
      }, { what: 'the abandoned proxy run to end' });
      expect(record).toMatchObject({ status: 'cancelled', reason: 'client_closed' });
    });

    it('refuses a body declared over the limit with 413 before the app sees it', async () => {
      const response = await fetch(`${base}/things`, { method: 'POST', body: 'x'.repeat(70 * 1024) });
      expect(response.status).toBe(413);
      expect(((await response.json()) as { type: string }).type).toBe('https://runlet.dev/problems#body-too-large');
    });

    it("fails only the call in flight when the app's server dies; queued runs wait for its restart; calls meanwhile get 503", async () => {
      const solo = dev.apps.find((candidate) => candidate.target.appName === 'solo')!;
      const crashesBefore = solo.supervisor.crashes;
      const soloBase = `${runOrigin}/v4/dev/solo`;
      const gate = join(gates, `crash-${door.replaceAll(' ', '-')}`);
      await writeFile(holdStart, '');

      const inFlight = fetch(`${soloBase}/exit-when-open?gate=${encodeURIComponent(gate)}`);
      await waitFor(() => solo.target.admission.inFlight === 1, { what: 'the crashing call in flight' });
      const accepted = await fetch(`${soloBase}/things?async=true`, { method: 'POST', body: 'queued async' });
      expect(accepted.status).toBe(202);
      const asyncRunId = accepted.headers.get('x-request-id')!;
      const queuedSync = fetch(`${soloBase}/things`, { method: 'POST', body: 'queued sync' });
      await waitFor(() => solo.target.admission.queued === 2, { what: 'an async and a sync run queued behind it' });

      await writeFile(gate, '');
      expect((await inFlight).status).toBe(502);
      await waitFor(() => solo.supervisor.crashes > crashesBefore, { what: 'the supervisor to see the exit' });
      const during = await fetch(`${soloBase}/things`);
      expect(during.status).toBe(503);
      expect(during.headers.get('retry-after')).toBe('1');
      // Unfinished: it may have tried the server as it died (then it shows `running`), but it did not fail.
      const waiting = await fetch(`${dev.url}/v2/projects/dev/apps/solo/runs/${asyncRunId}`);
      expect(((await waiting.json()) as { item: { completedAt: string | null } }).item.completedAt).toBeNull();

      await rm(holdStart);
      const served = await queuedSync;
      expect(served.status).toBe(200);
      expect(await served.json()).toMatchObject({ body: 'queued sync' });
      const settled = await waitFor(async () => {
        const response = await fetch(`${dev.url}/v2/projects/dev/apps/solo/runs/${asyncRunId}`);
        const { item } = (await response.json()) as { item: { status: string; statusCode: number } };
        return item.status === 'pending' || item.status === 'running' ? null : item;
      }, { what: 'the queued async run to finish' });
      expect(settled).toMatchObject({ status: 'success', statusCode: 200 });
    });

    it('records each call with the status the app answered', async () => {
      const response = await fetch(`${base}/status?code=503`);
      const runId = response.headers.get('x-request-id');
      await response.text();
      const record = await fetch(`${dev.url}/v2/projects/dev/apps/web/runs/${runId}`);
      expect(((await record.json()) as { item: unknown }).item).toMatchObject({ status: 'failure', statusCode: 503, functionName: 'status' });
    });
  });
});
