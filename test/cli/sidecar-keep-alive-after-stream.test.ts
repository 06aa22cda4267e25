// EXPERIMENT
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { APP_NAME, NAMESPACE, POD_NAME, startCluster, type Cluster } from '../support/runlog-store-kit.ts';
import { freePort } from '../support/custom-app.ts';
import { RawConnection, jsonPost } from '../support/raw-http.ts';
import { waitFor } from '../support/wait.ts';
import { REPO } from '../operator/e2e-cluster.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');
const PYTHON_RUNTIME = resolve(import.meta.dirname, '../../runtime/python');
let dir: string | undefined;
let cluster: Cluster | undefined;
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
  await cluster?.server.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

async function startRuntime(port: number, portFile: string): Promise<void> {
  const runtime = spawn(process.env.RUNLET_PYTHON ?? 'python3', ['-m', 'runlet_runtime', '--app-dir', join(REPO, 'examples/hello'), '--port', String(port), '--port-file', portFile, '--concurrency', '4'], {
    cwd: PYTHON_RUNTIME, env: { ...process.env, PYTHONPATH: PYTHON_RUNTIME }, stdio: 'ignore',
  });
  children.push(runtime);
  await waitFor(() => { try { return Number(readFileSync(portFile, 'utf8')) > 0; } catch { return false; } }, { what: 'runtime' });
}

describe('exp', () => {
  it('stream then async POST on one connection (runlog)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runlet-ka-'));
    cluster = await startCluster();
    const sa = join(dir, 'sa');
    await cluster.server.writeServiceAccount(sa);
    const [appPort, port, adminPort] = [await freePort(), await freePort(), await freePort()];
    await startRuntime(appPort, join(dir, 'port'));
    const sidecar = spawn(process.execPath, [CLI, 'sidecar', '--project', NAMESPACE, '--app', APP_NAME, '--replica', POD_NAME, '--run-store', 'runlog', '--auth', 'off',
      '--runtime', 'python', '--app-port', String(appPort), '--port', String(port), '--admin-port', String(adminPort), '--data-dir', join(dir, 'data')], {
      env: { ...process.env, ...cluster.server.inClusterEnv, RUNLET_SERVICE_ACCOUNT_DIR: sa, KUBECONFIG: '', HOME: dir }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(sidecar);
    let output = '';
    sidecar.stdout!.on('data', (c: Buffer) => (output += c)); sidecar.stderr!.on('data', (c: Buffer) => (output += c));
    await waitFor(async () => (await fetch(`http://127.0.0.1:${adminPort}/ready`).then((r) => r.ok, () => false)), { what: 'ready' });
    const { createServer, connect } = await import('node:net');
    const { Agent, fetch: ufetch } = await import('undici');
    const conns: (() => number[])[] = [];
    const relay = createServer((down) => {
      const up = connect(port, '127.0.0.1');
      let read = 0, written = 0; conns.push(() => [written, read]);
      const id = conns.length;
      down.on('data', (c) => { written += c.length; console.log('C', id, 'REQ', c.length, c.toString().split('\r\n')[0]); up.write(c); });
      up.on('data', (c) => { read += c.length; console.log('C', id, 'ANS', c.length, c.toString().split('\r\n')[0]); down.write(c); });
      up.on('end', () => { console.log('UP END', written, read); down.end(); });
      down.on('end', () => { console.log('DOWN END', written, read); up.end(); });
      up.on('error', (e) => console.log('UP ERR', e.message)); down.on('error', (e) => console.log('DOWN ERR', e.message));
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const relayPort = (relay.address() as { port: number }).port;
    const agent = new Agent();
    const base = `http://127.0.0.1:${relayPort}/v4/${NAMESPACE}/${APP_NAME}`;
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) => ufetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), dispatcher: agent });
    for (let round = 0; round < 2; round++) {
      const sync = await post('/run', { name: 'Ada' });
      const st = await sync.text();
      console.log('sync', st.length);
      const stream = await post('/count', { n: 3, pause: 0.05 }, { accept: 'text/event-stream' });
      const t = await stream.text();
      console.log('stream', t.length);
      const acc = await post(`/run?async=true&webhookEndpoint=${encodeURIComponent('http://127.0.0.1:9/hooks/in')}`, { name: 'Bo' });
      console.log('async', acc.status, await acc.text());
    }
    console.log('CONNS', JSON.stringify(conns.map((f) => f())));
    for (let round = 0; round < 5; round++) {
      const connection = await RawConnection.open(`http://127.0.0.1:${port}`);
      connection.write(jsonPost(`/v4/${NAMESPACE}/${APP_NAME}/count`, { n: 3, pause: 0.05 }, 'Accept: text/event-stream\r\n'));
      const stream = await connection.next();
      console.log(round, stream.head, JSON.stringify(stream.body));
      connection.write(jsonPost(`/v4/${NAMESPACE}/${APP_NAME}/run?async=true`, { name: 'Bo' }));
      const accepted = await connection.next().catch((e: Error) => { console.log('FAIL', e.message, output); throw e; });
      console.log(accepted.status, accepted.body);
      expect(accepted.status).toBe(202);
      connection.close();
    }
  }, 60_000);
});
