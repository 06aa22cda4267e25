import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { testLogger } from '../../test/support/logger.ts';
import { waitFor } from '../../test/support/wait.ts';
import { AppTarget } from '../apps.ts';
import { RuntimeWatcher } from './runtime-watch.ts';

describe('the watch of a pod runtime’s health', () => {
  let server: Server | undefined;
  let watcher: RuntimeWatcher | undefined;
  const target = new AppTarget({ projectId: 'p', appName: 'hello', runtime: 'python', replicaConcurrency: 2, responseGracePeriodSeconds: 60 });
  afterEach(async () => {
    watcher?.stop();
    await target.detach();
    if (server?.listening) await new Promise((resolve) => server!.close(resolve));
  });

  it('attaches a runtime answering 2xx, pauses it (not detaches) while it answers 503, and detaches it once it is gone', async () => {
    let status = 200;
    server = createServer((_request, response) => response.writeHead(status).end());
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    watcher = new RuntimeWatcher(target, { origin, readyPath: '/healthz', intervalMs: 20 }, testLogger());
    watcher.start();

    await waitFor(() => target.ready, { what: 'the runtime attached' });
    status = 503; // the runtime drains or recycles itself: calls in flight must keep their connections
    await waitFor(() => !target.ready, { what: 'the app paused' });
    expect(target.origin, 'paused, still attached').toBe(origin);

    status = 200;
    await waitFor(() => target.ready, { what: 'the app taking calls again' });
    server.closeAllConnections();
    await new Promise((resolve) => server!.close(resolve));
    await waitFor(() => target.origin === null, { what: 'the gone runtime detached' });
  });

  it('detaches a runtime its connections saw die, and attaches its restart on the same port, waking the runs waiting for it', async () => {
    server = createServer((_request, response) => response.writeHead(200).end());
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const origin = `http://127.0.0.1:${port}`;
    watcher = new RuntimeWatcher(target, { origin, readyPath: '/healthz', intervalMs: 20 }, testLogger());
    watcher.start();
    await waitFor(() => target.ready, { what: 'the runtime attached' });

    server.closeAllConnections();
    await new Promise((resolve) => server!.close(resolve));
    target.runtimeGone(); // as its connections report it, before the watch's next probe
    expect(target.ready).toBe(false);
    const waiting = target.whenReady(new AbortController().signal);
    await waitFor(() => target.origin === null, { what: 'the gone runtime detached' });

    // The container restarted: the same port answers again.
    server = createServer((_request, response) => response.writeHead(200).end());
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    await waiting;
    expect(target.ready).toBe(true);
    expect(target.origin).toBe(origin);
  });
});
