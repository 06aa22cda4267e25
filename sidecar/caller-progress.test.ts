// What counts as a caller reading: measured on real loopback sockets, with the clock given by the test.
import { once } from 'node:events';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../test/support/wait.ts';
import { CallerProgress } from './caller-progress.ts';

/** More than loopback's kernel buffers take: most of it waits in the sender until the caller reads. */
const LARGE_WRITE = 64 * 1024 * 1024;

let server: Server | null = null;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  server?.close();
  server = null;
});

/** A loopback connection: the sidecar's end, and the caller's (paused: it reads nothing until told). */
async function connection(): Promise<{ sidecar: Socket; caller: Socket }> {
  server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const caller = connect((server.address() as { port: number }).port, '127.0.0.1');
  caller.pause();
  const [sidecar] = await accepted;
  sockets.push(sidecar, caller);
  return { sidecar, caller };
}

/** Lets the caller read `bytes`, then pauses it again. */
async function read(caller: Socket, bytes: number): Promise<void> {
  let got = 0;
  await new Promise<void>((resolve) => {
    const onData = (chunk: Buffer): void => {
      got += chunk.length;
      if (got < bytes) return;
      caller.off('data', onData);
      caller.pause();
      resolve();
    };
    caller.on('data', onData);
    caller.resume();
  });
}

describe('CallerProgress', () => {
  it('counts the time a caller reads nothing of what waits for it', async () => {
    const { sidecar } = await connection();
    sidecar.write(Buffer.alloc(LARGE_WRITE));
    const progress = new CallerProgress(sidecar, 0);
    expect(progress.stalledFor(5_000)).toBe(5_000);
    expect(progress.stalledFor(9_000)).toBe(9_000);
  });

  it('sees a caller that reads part of one large write as reading, before the write is out', async () => {
    const { sidecar, caller } = await connection();
    sidecar.write(Buffer.alloc(LARGE_WRITE));
    const progress = new CallerProgress(sidecar, 0);
    expect(progress.stalledFor(5_000)).toBe(5_000);
    await read(caller, 4 * 1024 * 1024);
    await waitFor(() => progress.stalledFor(10_000) === 0, { what: 'the read to show as progress' });
    // Node's own count has not moved: the write is not out yet.
    expect(sidecar.writableLength).toBe(LARGE_WRITE);
    expect(progress.stalledFor(12_000)).toBe(2_000);
  });

  it('never counts a caller that has everything it was sent as stalled, however long nothing is sent', async () => {
    const { sidecar, caller } = await connection();
    caller.resume();
    sidecar.write('a little');
    await waitFor(() => sidecar.writableLength === 0, { what: 'the write to be out' });
    const progress = new CallerProgress(sidecar, 0);
    expect(progress.stalledFor(3_600_000)).toBe(0);
  });

  it("takes a 'drain' as the caller reading, though a new write fills the buffer again at once", async () => {
    const { sidecar, caller } = await connection();
    // Not stalled since long before: only the drain can show the caller read.
    const progress = new CallerProgress(sidecar, -1_000_000);
    sidecar.write(Buffer.alloc(LARGE_WRITE));
    progress.stalledFor(0);
    let drainedAt = 0;
    // What a stream does on 'drain': writes more, here more than was waiting before.
    sidecar.once('drain', () => {
      drainedAt = performance.now();
      caller.pause();
      sidecar.write(Buffer.alloc(2 * LARGE_WRITE));
    });
    caller.resume();
    await waitFor(() => drainedAt > 0, { what: "the sidecar's socket to drain" });
    expect(progress.stalledFor(drainedAt + 1_000)).toBeLessThan(2_000);
  });
});
