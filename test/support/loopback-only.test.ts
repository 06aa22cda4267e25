// The loopback-only guard. Nothing here may reach the network even if the guard were broken: the refusals are
// checked against a recorder standing for Socket#connect (net.connect's real argument handling in front of it,
// here and in a child process), and the only real connections go to a server on 127.0.0.1.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { connect, Socket, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { connectDestination, guardConnect, installLoopbackGuard, isLoopbackAddress } from './loopback-only.ts';

const run = promisify(execFile);
type Connect = Parameters<typeof guardConnect>[0]['connect'];

describe('the loopback-only guard', () => {
  const undo: (() => void)[] = [];
  afterEach(() => {
    for (const step of undo.splice(0).reverse()) step();
  });

  /** Socket#connect replaced by a recorder (nothing connects), then guarded: what reached the recorder, and what was refused. */
  function guardedRecorder(): { reached: unknown[][]; refused: string[] } {
    const reached: unknown[][] = [];
    const refused: string[] = [];
    const real = Socket.prototype.connect;
    undo.push(() => (Socket.prototype.connect = real));
    Socket.prototype.connect = function (this: Socket, ...args: unknown[]) {
      reached.push(args);
      return this;
    } as typeof real;
    undo.push(guardConnect(Socket.prototype as unknown as { connect: Connect }, (where) => refused.push(where)));
    return { reached, refused };
  }

  it('knows loopback addresses', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', '::ffff:127.0.0.1']) expect(isLoopbackAddress(host), host).toBe(true);
    for (const host of ['192.0.2.1', '10.0.0.1', '0.0.0.0', '::', '::ffff:192.0.2.1', 'localhost']) expect(isLoopbackAddress(host), host).toBe(false);
  });

  it('reads the destination of every form of connect: options, port and host, normalized arguments, a Unix socket', () => {
    expect(connectDestination([{ host: '192.0.2.7', port: 80 }])).toEqual({ host: '192.0.2.7', port: 80 });
    expect(connectDestination([80, '192.0.2.7'])).toEqual({ host: '192.0.2.7', port: 80 });
    expect(connectDestination(['80'])).toEqual({ host: 'localhost', port: '80' });
    expect(connectDestination([[{ host: '192.0.2.7', port: 80 }, null]])).toEqual({ host: '192.0.2.7', port: 80 });
    expect(connectDestination([{ port: 80 }])).toEqual({ host: 'localhost', port: 80 });
    expect(connectDestination([{ path: '/tmp/socket' }])).toBeUndefined();
    expect(connectDestination(['/tmp/socket'])).toBeUndefined();
  });

  it('refuses, through net.connect, any destination but loopback or localhost, before the connection is attempted', () => {
    const { reached, refused } = guardedRecorder();
    for (const host of ['192.0.2.1', '10.1.2.3', '2001:db8::1', 'example.com']) {
      expect(() => connect({ host, port: 8000 }), host).toThrow(/tests may only connect to 127\.0\.0\.0\/8 or ::1/);
    }
    expect(refused).toEqual(['192.0.2.1:8000', '10.1.2.3:8000', '2001:db8::1:8000', 'example.com:8000']);
    expect(reached).toEqual([]);

    for (const host of ['127.0.0.1', '::1', 'localhost']) connect({ host, port: 8000 }).destroy();
    connect(8000).destroy();
    connect({ path: join(tmpdir(), 'no-such.sock') }).destroy();
    expect(reached).toHaveLength(5);
    expect(refused).toHaveLength(4);
  });

  it('lets loopback connections through in this process once installed, and records nothing for them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'loopback-only-'));
    const guard = installLoopbackGuard(join(dir, 'refused.log'));
    undo.push(() => guard.uninstall());
    const server = createHttpServer((_request, response) => response.end('hello'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('hello');
      expect(guard.refused()).toEqual([]);
      expect(() => guard.assertNoneRefused()).not.toThrow();
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('guards a child Node process started with its argv prefix and environment, whose refusals the test process sees', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'loopback-only-'));
    const guard = installLoopbackGuard(join(dir, 'refused.log'));
    undo.push(() => guard.uninstall());
    // Beneath the guard, the child's Socket#connect is a recorder: even a broken guard would connect nothing.
    const recorder = join(dir, 'connect-recorder.mjs');
    await writeFile(recorder, "import net from 'node:net';\nnet.Socket.prototype.connect = function () { console.log('reached'); return this; };\n");
    const script = "try { require('node:net').connect({ host: '192.0.2.9', port: 8000 }); console.log('connected'); } catch (e) { console.log(e.code); }";
    const [node, ...prefix] = guard.node;
    const { stdout } = await run(node!, ['--import', recorder, ...prefix, '--input-type=commonjs', '-e', script], { env: { ...process.env, ...guard.env } });
    expect(stdout.trim()).toBe('ERR_LOOPBACK_ONLY');
    expect(await readFile(join(dir, 'refused.log'), 'utf8')).toMatch(/^192\.0\.2\.9:8000 \(pid \d+/);
    expect(() => guard.assertNoneRefused()).toThrow(/192\.0\.2\.9:8000/);
  });
});
