// Runs that outlive their time limit: answered 504 at the limit, and they must not take later calls with them.
// Their code cannot be stopped (a Python thread), so the runtime gives the worker back at once and runs the
// function on an orphaned thread; too many of those, and the runtime recycles itself.
import { afterEach, describe, expect, it } from 'vitest';
import { makePythonApp } from '../support/app-dir.ts';
import { postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { waitFor } from '../support/wait.ts';

let dev: TestDevServer | undefined;
afterEach(async () => {
  await dev?.dispose();
  dev = undefined;
});

async function startApp(name: string, scaling: string): Promise<TestDevServer> {
  dev = await startTestDevServer({ appDirs: [await makePythonApp(name, `[scaling]\n${scaling}`)] });
  return dev;
}

describe.each(FRONT_DOORS)('through %s', (door) => {
  it('calls after timed-out ones get free workers: four 504s, then four 200s', async () => {
    const server = await startApp('limits', 'replica_concurrency = 4\nresponse_grace_period = 3');
    const front = await openFrontDoor(door, server);
    try {
      const base = `${front.origin}/v4/dev/limits`;
      const slow = await Promise.all([1, 2, 3, 4].map(() => postJson(`${base}/sleep`, { seconds: 30 })));
      for (const response of slow) {
        expect(response.status).toBe(504);
        expect(((await response.json()) as { type: string }).type).toBe('https://runlet.dev/problems#timeout');
      }
      // The four functions still sleep on their threads, each one replaced in the runtime's pool.
      const quick = await Promise.all([1, 2, 3, 4].map((n) => postJson(`${base}/greet`, { name: `n${n}` })));
      expect(quick.map((response) => response.status)).toEqual([200, 200, 200, 200]);
      expect(server.apps[0]!.supervisor.recycles).toBe(0);
    } finally {
      await front.close();
    }
  });
});

describe('a runtime with more calls running past their limit than its concurrency', () => {
  it('recycles itself (not a crash) and serves again', async () => {
    const server = await startApp('recycled', 'replica_concurrency = 1\nresponse_grace_period = 1');
    const base = `${server.url}/v4/dev/recycled`;
    const supervisor = server.apps[0]!.supervisor;
    const firstPid = supervisor.pid;
    // One orphan is within the bound (the concurrency); the second is past it.
    expect((await postJson(`${base}/sleep`, { seconds: 30 })).status).toBe(504);
    expect((await postJson(`${base}/greet`, { name: 'between' })).status).toBe(200);
    expect((await postJson(`${base}/sleep`, { seconds: 30 })).status).toBe(504);

    await waitFor(() => supervisor.recycles === 1, { what: 'the runtime to recycle itself' });
    const after = await waitFor(async () => {
      const response = await postJson(`${base}/greet`, { name: 'again' });
      return response.status === 200 ? response : null;
    }, { what: 'the fresh runtime to serve' });
    expect(await after.json()).toMatchObject({ result: { greeting: 'Hello, again!' } });
    expect(supervisor.pid).not.toBe(firstPid);
    expect(supervisor.crashes).toBe(0);
  });
});
