// What callers with no token cost a `runlet sidecar` (auth on, HS256, SQLite store, no app container needed:
// every call measured here is refused or answered before the runtime):
//   flood   — 1,000 connections with no token, each sending a head for a 256 KiB body and then all of it but
//             its last byte, held open: the sidecar's RSS before, at its peak, and once all are sent;
//   trickle — one caller sending a 256 KiB body in 8-byte writes (Nagle off), with no token and with a valid
//             one: the sidecar's CPU time for it;
//   warm    — wrk, 8 connections for 5 s, a small call with a valid (cached) token, answered 503 (no app
//             container): the sidecar's CPU per call on the front's common path, up to the runtime.
// Run: `node bench/micro/front-flood.ts [--cli path/to/cli/runlet.ts]` (another tree's CLI measures that tree,
// e.g. an untouched main for a before/after).
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { freePort, ProcessGroup, type BenchProcess } from '../processes.ts';

const PROJECT = 'bench';
const APP = 'flood';
const BODY_BYTES = 256 * 1024;
const FLOOD_CONNECTIONS = 1000;
const TRICKLE_WRITE_BYTES = 8;
/** Busy-waited, not slept: a timer's 1 ms floor would make the 32,768 writes take over half a minute. */
const TRICKLE_PAUSE_MS = 0.05;

const { values } = parseArgs({ options: { cli: { type: 'string', default: resolve(import.meta.dirname, '../../cli/runlet.ts') } } });
const group = new ProcessGroup();
const workDir = await mkdtemp(join(tmpdir(), 'runlet-front-flood-'));
try {
  const key = 'k'.repeat(32);
  const keyFile = join(workDir, 'key');
  await writeFile(keyFile, key);
  const port = await freePort();
  const sidecar = group.start({
    name: 'sidecar',
    command: process.execPath,
    args: [
      values.cli, 'sidecar', '--project', PROJECT, '--app', APP, '--app-port', String(await freePort()), '--port', String(port),
      '--admin-port', String(await freePort()), '--run-store', 'sqlite', '--data-dir', join(workDir, 'data'), '--log-level', 'warn',
      '--auth', 'on', '--auth-key-file', keyFile,
    ],
  });
  await waitForAnswer(port, sidecar);
  const token = hs256Token(key);

  // First, on a fresh sidecar: the flood's garbage would weigh on it.
  const script = join(workDir, 'call.lua');
  await writeFile(script, `wrk.method = "POST"\nwrk.body = "{}"\nwrk.headers["Content-Type"] = "application/json"\nwrk.headers["Authorization"] = "Bearer ${token}"\n`);
  const wrk = (seconds: number) => promisify(execFile)('wrk', ['-t1', '-c8', `-d${seconds}s`, '-s', script, `http://127.0.0.1:${port}/v4/${PROJECT}/${APP}/main`]);
  // Its first calls verify the token and warm the JIT: not measured.
  await wrk(2);
  const before = sidecar.cpuMs();
  const { stdout } = await wrk(5);
  const calls = Number(/(\d+) requests in/.exec(stdout)?.[1]);
  console.log(`warm: ${calls} calls in 5 s; sidecar CPU ${(((sidecar.cpuMs() - before) * 1000) / calls).toFixed(1)} µs per call`);

  const idleMb = sidecar.rssMb();
  const flood = await floodWithoutToken(port, sidecar);
  console.log(`flood: ${FLOOD_CONNECTIONS} connections, no token, 256 KiB body less one byte each`);
  console.log(`  RSS before ${idleMb.toFixed(1)} MiB, once all sent ${flood.afterMb.toFixed(1)} MiB, peak ${sidecar.peakRssMb().toFixed(1)} MiB`);
  console.log(`  answers: ${JSON.stringify(flood.answers)}; body bytes the caller could send: ${(flood.sentBytes / 2 ** 20).toFixed(1)} MiB`);

  for (const [label, authorization] of [['no token', null], ['valid token', `Bearer ${token}`]] as const) {
    const before = sidecar.cpuMs();
    const status = await trickle(port, authorization);
    console.log(`trickle (${label}): 256 KiB in ${TRICKLE_WRITE_BYTES}-byte writes → ${status}; sidecar CPU ${sidecar.cpuMs() - before} ms`);
  }

} finally {
  await group.stopAll();
  await rm(workDir, { recursive: true, force: true });
}

/** Waits until the run port answers a call (401: no token). */
async function waitForAnswer(port: number, owner: BenchProcess): Promise<void> {
  for (let tries = 0; tries < 300; tries++) {
    if (!owner.running) throw new Error(`the sidecar exited: ${owner.output()}`);
    try {
      const response = await fetch(`http://127.0.0.1:${port}/v4/${PROJECT}/${APP}/main`, { method: 'POST', body: '{}' });
      await response.arrayBuffer();
      return;
    } catch {
      await new Promise((done) => setTimeout(done, 100));
    }
  }
  throw new Error(`the sidecar did not answer: ${owner.output()}`);
}

function hs256Token(key: string): string {
  const part = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ project_id: PROJECT, aud: 'runlet', exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${unsigned}.${createHmac('sha256', key).update(unsigned).digest('base64url')}`;
}

function head(authorization: string | null, bodyBytes: number): string {
  const auth = authorization === null ? '' : `Authorization: ${authorization}\r\n`;
  return `POST /v4/${PROJECT}/${APP}/main HTTP/1.1\r\nHost: bench\r\n${auth}Content-Type: application/json\r\nContent-Length: ${bodyBytes}\r\n\r\n`;
}

interface FloodResult {
  afterMb: number;
  /** Status lines (or how the connection ended) by count. */
  answers: Record<string, number>;
  sentBytes: number;
}

async function floodWithoutToken(port: number, sidecar: BenchProcess): Promise<FloodResult> {
  const body = Buffer.alloc(BODY_BYTES - 1, 0x20);
  let sentBytes = 0;
  const callers: Array<{ socket: Socket; answer: string; ended: string }> = [];
  const sent: Array<Promise<void>> = [];
  for (let i = 0; i < FLOOD_CONNECTIONS; i++) {
    const caller = { socket: connect(port, '127.0.0.1'), answer: '', ended: '' };
    callers.push(caller);
    caller.socket.on('data', (chunk: Buffer) => {
      if (caller.answer === '') caller.answer = chunk.toString('latin1').split('\r\n', 1)[0]!;
    });
    sent.push(
      new Promise<void>((done) => {
        caller.socket.on('error', (err: NodeJS.ErrnoException) => {
          caller.ended = err.code ?? 'error';
          done();
        });
        caller.socket.write(head(null, BODY_BYTES));
        // All but the last byte; counted once the kernel took it (the sidecar may have stopped reading).
        caller.socket.write(body, (err) => {
          if (!err) sentBytes += body.length;
          done();
        });
      }),
    );
  }
  // Sent, refused or cut: by then the sidecar holds whatever it is going to hold.
  await Promise.race([Promise.all(sent), new Promise((done) => setTimeout(done, 60_000))]);
  await new Promise((done) => setTimeout(done, 2_000));
  const afterMb = sidecar.rssMb();
  const answers: Record<string, number> = {};
  for (const caller of callers) {
    const key = caller.answer || caller.ended || 'no answer yet';
    answers[key] = (answers[key] ?? 0) + 1;
    caller.socket.destroy();
  }
  return { afterMb, answers, sentBytes };
}

/** The status line answered to a 256 KiB body sent in 8-byte writes. */
async function trickle(port: number, authorization: string | null): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  let received = '';
  const answered = new Promise<string>((done) => {
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (received.includes('\r\n')) done(received.split('\r\n', 1)[0]!);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => done(received.split('\r\n', 1)[0] || (err.code ?? 'error')));
    socket.on('close', () => done(received.split('\r\n', 1)[0] || 'closed without an answer'));
  });
  await new Promise<void>((done) => socket.once('connect', done));
  socket.write(head(authorization, BODY_BYTES));
  for (let sent = 0; sent < BODY_BYTES && !socket.destroyed; sent += TRICKLE_WRITE_BYTES) {
    const last = sent + TRICKLE_WRITE_BYTES >= BODY_BYTES;
    const chunk = Buffer.alloc(TRICKLE_WRITE_BYTES, 0x20);
    // The body is `{`, spaces and `}`: a JSON object, were it read whole.
    if (sent === 0) chunk[0] = 0x7b;
    if (last) chunk[TRICKLE_WRITE_BYTES - 1] = 0x7d;
    // Each write handed to the kernel, then a pause the sidecar's read outpaces: each arrives on its own.
    await new Promise<void>((done) => socket.write(chunk, () => done()));
    for (const until = performance.now() + TRICKLE_PAUSE_MS; performance.now() < until; );
  }
  const status = await answered;
  socket.destroy();
  return status;
}
