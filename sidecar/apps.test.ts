// An app's readiness as its runtime goes and returns: what a run waiting for it (whenReady) sees.
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../test/support/custom-app.ts';
import { waitFor } from '../test/support/wait.ts';
import { AppTarget } from './apps.ts';

describe('an app whose runtime was seen going', () => {
  const target = new AppTarget({ projectId: 'p', appName: 'hello', runtime: 'python', replicaConcurrency: 2, responseGracePeriodSeconds: 60 });
  let server: Server | undefined;
  afterEach(async () => {
    await target.detach();
    if (server?.listening) await new Promise((resolve) => server!.close(resolve));
  });

  /** A runtime that answers HTTP, or (`answers` false) a dying one whose kernel still accepts connections. */
  async function listening(answers = true): Promise<string> {
    server = answers ? createHttpServer((_request, response) => response.writeHead(404).end()) : createServer((socket) => socket.destroy());
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  it('is taken back by itself, its waiting runs woken, when the runtime still answers (a dropped connection, not a death)', async () => {
    target.attach(await listening());
    target.runtimeGone();
    expect(target.ready).toBe(false);
    await target.whenReady(new AbortController().signal);
    expect(target.ready).toBe(true);
  });

  it('is not taken back by a listener that accepts connections but answers none (a process dying)', async () => {
    const dying = await listening(false);
    target.attach(dying);
    target.runtimeGone();
    let woken = false;
    const waiting = target.whenReady(new AbortController().signal).then(() => (woken = true));
    // Accepted and dropped, as a dying runtime's kernel does: wait for a few of the probe's tries.
    let accepted = 0;
    server!.on('connection', () => (accepted += 1));
    await waitFor(() => accepted >= 3 || woken, { what: 'three tries of the return probe' });
    expect(woken).toBe(false);
    expect(target.ready).toBe(false);
    target.attach(dying);
    await waiting;
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
