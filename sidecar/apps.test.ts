// An app's readiness as its runtime goes and returns: what a run waiting for it (whenReady) sees.
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../test/support/custom-app.ts';
import { AppTarget } from './apps.ts';

describe('an app whose runtime was seen going', () => {
  const target = new AppTarget({ projectId: 'p', appName: 'hello', runtime: 'python', replicaConcurrency: 2, responseGracePeriodSeconds: 60 });
  let server: Server | undefined;
  afterEach(async () => {
    await target.detach();
    if (server?.listening) await new Promise((resolve) => server!.close(resolve));
  });

  async function listening(): Promise<string> {
    server = createServer((socket) => socket.destroy());
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  it('is taken back by itself, its waiting runs woken, when the runtime still listens (a dropped connection, not a death)', async () => {
    target.attach(await listening());
    target.runtimeGone();
    expect(target.ready).toBe(false);
    await target.whenReady(new AbortController().signal);
    expect(target.ready).toBe(true);
  });

  it('stays not ready while nothing listens, until its runtime is attached again', async () => {
    target.attach(`http://127.0.0.1:${await freePort()}`);
    target.runtimeGone();
    let woken = false;
    const waiting = target.whenReady(new AbortController().signal).then(() => (woken = true));
    // Its return probe's connects are refused: nothing but the attach below wakes it.
    const live = await listening();
    expect(woken).toBe(false);
    expect(target.ready).toBe(false);
    target.attach(live);
    await waiting;
    expect(target.ready).toBe(true);
  });

  it('rejects a wait with the reason of the run stopped meanwhile', async () => {
    const stopped = new AbortController();
    const waiting = target.whenReady(stopped.signal);
    stopped.abort(new Error('run stopped: timeout'));
    await expect(waiting).rejects.toThrow('run stopped: timeout');
  });
});
