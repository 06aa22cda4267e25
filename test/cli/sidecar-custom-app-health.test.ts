// A custom app's probes go through its sidecar (`runlet sidecar --runtime custom`): the kubelet asks the sidecar's
// admin port, and the sidecar asks the app's ready and health paths on the loopback, where a real HTTP server
// stands for the app here. The sidecar is ready only while the app's ready path passes; its own liveness
// (/healthz) never hangs on the app (a restart of the sidecar would not mend it); the app container's liveness
// (/app-healthz) fails while the app's health path fails or nothing listens, so the kubelet restarts the app.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../support/custom-app.ts';
import { waitFor } from '../support/wait.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');

let dir: string | undefined;
let sidecar: ChildProcess | undefined;
let app: Server | undefined;

afterEach(async () => {
  if (sidecar !== undefined && sidecar.exitCode === null && sidecar.signalCode === null) {
    const exited = once(sidecar, 'exit');
    sidecar.kill('SIGKILL');
    await exited;
  }
  sidecar = undefined;
  if (app?.listening) await closed(app);
  app = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

async function closed(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolveClose) => server.close(resolveClose));
}

/** The custom app: answers its ready and health paths with the statuses the test sets, and counts what it was asked. */
class CustomApp {
  readyStatus = 503;
  healthStatus = 200;
  readonly asked = new Map<string, number>();
  readonly server: Server;

  constructor() {
    this.server = createServer((request, response) => {
      const path = request.url ?? '/';
      this.asked.set(path, (this.asked.get(path) ?? 0) + 1);
      const status = path === '/ready' ? this.readyStatus : path === '/health' ? this.healthStatus : 404;
      response.writeHead(status, { 'content-type': 'text/plain' }).end(`${path}: ${status}`);
    });
  }

  async listen(port: number): Promise<void> {
    this.server.listen(port, '127.0.0.1');
    await once(this.server, 'listening');
  }

  timesAsked(path: string): number {
    return this.asked.get(path) ?? 0;
  }
}

async function startSidecar(appPort: number): Promise<{ admin: string; output: () => string }> {
  dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-custom-health-'));
  const [port, adminPort] = [await freePort(), await freePort()];
  // As the operator renders it for a custom App with healthcheckEndpoint /health and readycheckEndpoint /ready.
  sidecar = spawn(
    process.execPath,
    [CLI, 'sidecar', '--project', 'team-b', '--app', 'web', '--replica', 'web-1', '--run-store', 'sqlite', '--data-dir', join(dir, 'data'),
      '--auth', 'off', '--runtime', 'custom', '--app-port', String(appPort), '--ready-path', '/ready', '--health-path', '/health',
      '--port', String(port), '--admin-port', String(adminPort), '--log-level', 'warn'],
    { env: process.env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let output = '';
  sidecar.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const admin = `http://127.0.0.1:${adminPort}`;
  await waitFor(async () => (await fetch(`${admin}/healthz`).then((response) => response.ok, () => false)), { what: `the sidecar to listen; its output: ${output}` });
  return { admin, output: () => output };
}

async function probe(url: string): Promise<{ status: number; body: { status: string; detail?: string } }> {
  const response = await fetch(url);
  return { status: response.status, body: (await response.json()) as { status: string; detail?: string } };
}

describe('runlet sidecar --runtime custom: the app probed on the loopback, through the admin port', () => {
  it("is ready only while the app's ready path passes; /app-healthz follows the app's health path; its own liveness stays up", async () => {
    const customApp = new CustomApp();
    app = customApp.server;
    const appPort = await freePort();
    await customApp.listen(appPort);
    const { admin, output } = await startSidecar(appPort);

    // The app answers, but its ready path 503: the sidecar has asked it, and is not ready.
    await waitFor(() => customApp.timesAsked('/ready') >= 2, { what: `the sidecar to ask the app's ready path; its output: ${output()}` });
    expect((await probe(`${admin}/ready`)).status).toBe(503);

    customApp.readyStatus = 200;
    await waitFor(async () => (await probe(`${admin}/ready`)).status === 200, { what: 'the sidecar ready once the app is' });

    // The app container's liveness: the app's health path, asked by the sidecar.
    expect(await probe(`${admin}/app-healthz`)).toEqual({ status: 200, body: { status: 'ok', detail: "the app's health path answered 200" } });
    customApp.healthStatus = 500;
    expect(await probe(`${admin}/app-healthz`)).toEqual({ status: 503, body: { status: 'failing', detail: "the app's health path answered 500" } });
    // The sidecar's own liveness knows nothing of the app's health.
    expect((await probe(`${admin}/healthz`)).status).toBe(200);

    // The app's ready path fails again: the sidecar takes no new calls for it.
    customApp.readyStatus = 503;
    await waitFor(async () => (await probe(`${admin}/ready`)).status === 503, { what: 'the sidecar not ready while the app is not' });
  });

  it('with the app dead (connection refused): not ready, the app container\'s liveness failing, the sidecar\'s own liveness passing', async () => {
    const customApp = new CustomApp();
    customApp.readyStatus = 200;
    app = customApp.server;
    const appPort = await freePort();
    await customApp.listen(appPort);
    const { admin } = await startSidecar(appPort);
    await waitFor(async () => (await probe(`${admin}/ready`)).status === 200, { what: 'the sidecar ready' });

    await closed(customApp.server);
    await waitFor(async () => (await probe(`${admin}/ready`)).status === 503, { what: 'the sidecar not ready once nothing listens' });
    expect(await probe(`${admin}/app-healthz`)).toEqual({ status: 503, body: { status: 'failing', detail: "the app's health path did not answer: connection refused: nothing listens" } });
    // Restarting the sidecar would not bring the app back: its liveness stays up, the kubelet restarts the app container.
    expect(await probe(`${admin}/healthz`)).toEqual({ status: 200, body: { status: 'ok' } });

    // The app container restarted: the same port answers again, and the sidecar is ready again.
    const restarted = new CustomApp();
    restarted.readyStatus = 200;
    app = restarted.server;
    await restarted.listen(appPort);
    await waitFor(async () => (await probe(`${admin}/ready`)).status === 200, { what: 'the sidecar ready again with the app back' });
    expect((await probe(`${admin}/app-healthz`)).status).toBe(200);
  });

  it('has no /app-healthz without a health path (a Python app, or a custom one without healthcheckEndpoint)', async () => {
    const customApp = new CustomApp();
    app = customApp.server;
    const appPort = await freePort();
    await customApp.listen(appPort);
    dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-custom-health-'));
    const adminPort = await freePort();
    sidecar = spawn(
      process.execPath,
      [CLI, 'sidecar', '--project', 'team-b', '--app', 'web', '--run-store', 'sqlite', '--data-dir', join(dir, 'data'), '--auth', 'off',
        '--runtime', 'custom', '--app-port', String(appPort), '--port', String(await freePort()), '--admin-port', String(adminPort), '--log-level', 'warn'],
      { env: process.env, stdio: 'ignore' },
    );
    const admin = `http://127.0.0.1:${adminPort}`;
    await waitFor(async () => (await fetch(`${admin}/healthz`).then((response) => response.ok, () => false)), { what: 'the sidecar to listen' });
    expect((await fetch(`${admin}/app-healthz`)).status).toBe(404);
    expect(customApp.timesAsked('/health')).toBe(0);
  });

  it('refuses a health path that is not a path: appended to the loopback origin, it could name another host', async () => {
    const child = spawn(process.execPath, [CLI, 'sidecar', '--project', 'team-b', '--app', 'web', '--runtime', 'custom', '--app-port', '9000', '--health-path', '@example.com/'], {
      env: process.env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(2);
    expect(stderr).toContain('--health-path must be an HTTP path starting with "/", got "@example.com/"');
  });
});
