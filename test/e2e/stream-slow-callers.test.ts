// Streams and callers that read slowly, late, or never: a stream waits for its caller (backpressure) and goes
// on once the caller reads again, at any speed, on both doors of either server (the front reads a sized
// POST, node:http a chunked one); a caller that reads nothing for the stall bound is cut and its slot freed.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { makeCustomApp } from '../support/custom-app.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor, type FrontDoor } from '../support/run-server.ts';
import { SlowReader } from '../support/slow-reader.ts';
import { waitFor } from '../support/wait.ts';

let dev: TestDevServer;
let origin: string;
const readers: SlowReader[] = [];
/** Short, so a stalled caller is cut within the test; the slow readers above read far more often than this. */
const CLIENT_STALL_MS = 2000;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`, await makeCustomApp('web')], clientStallTimeoutMs: CLIENT_STALL_MS });
});
afterAll(async () => dev?.dispose());

async function runsOf(app: string): Promise<RunRecord[]> {
  const response = await fetch(`${dev.url}/v2/projects/dev/apps/${app}/runs?pageSize=100`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: RunRecord[] }).items;
}

/** The runs of `app` not in `before`, once there are `count` of them and each satisfies `until`. */
async function newRuns(app: string, before: Set<string>, count: number, until: (record: RunRecord) => boolean, what: string): Promise<RunRecord[]> {
  return waitFor(
    async () => {
      const runs = (await runsOf(app)).filter((record) => !before.has(record.id));
      return runs.length === count && runs.every(until) ? runs : null;
    },
    { what, timeoutMs: 30_000 },
  );
}

async function runIds(app: string): Promise<Set<string>> {
  return new Set((await runsOf(app)).map((record) => record.id));
}

/** How the request reaches the run interface: read whole by the front, or by node:http as it comes. */
const REQUEST_DOORS = ['the front (sized body)', 'node:http (chunked body)'] as const;

function callRequest(door: (typeof REQUEST_DOORS)[number], path: string, body: string, extraHeaders = ''): string {
  const head = `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extraHeaders}`;
  if (door === 'the front (sized body)') return `${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  return `${head}Transfer-Encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
}

function streamRequest(door: (typeof REQUEST_DOORS)[number], path: string, body: string, extraHeaders = ''): string {
  return callRequest(door, path, body, `Accept: text/event-stream\r\n${extraHeaders}`);
}

async function startReader(request: string): Promise<SlowReader> {
  const reader = await SlowReader.start(origin, request);
  readers.push(reader);
  return reader;
}

/** Opens `server`'s door for one test; the returned teardown closes the test's readers, then the door. */
async function openDoor(server: FrontDoor): Promise<() => Promise<void>> {
  const front = await openFrontDoor(server, dev);
  origin = front.origin;
  return async () => {
    await Promise.all(readers.splice(0).map((reader) => reader.close()));
    await front.close();
  };
}

describe.each(FRONT_DOORS)('through %s', (server) => {
  beforeEach(() => openDoor(server));

  describe.each(REQUEST_DOORS)('a stream read by %s', (door) => {
    it('goes on to its end however slowly its caller reads (4 MiB, a few KiB at a time)', async () => {
      const items = 64;
      const reader = await startReader(streamRequest(door, '/v4/dev/e2e/blobs', JSON.stringify({ n: items, size: 64 * 1024 })));
      const answer = await reader.read(4096, 1);
      expect(answer).toMatchObject({ status: '200', events: items, complete: true });
      expect(answer.bytes).toBeGreaterThan(items * 64 * 1024);
    });

    it('is cut when gzipped once its caller has read nothing for the stall timeout', async () => {
      const before = await runIds('e2e');
      const request = streamRequest(door, '/v4/dev/e2e/random_blobs', JSON.stringify({ n: 400, size: 64 * 1024 }), 'Accept-Encoding: gzip\r\n');
      const reader = await startReader(request);
      const [record] = await newRuns('e2e', before, 1, (run) => run.status === 'cancelled', 'the stalled gzip stream to be cut');
      expect(record).toMatchObject({ mode: 'stream', reason: 'client_stalled' });
      expect(await reader.read(65536, 0)).toMatchObject({ status: '200', complete: false });
    });

    it('is not cut while its caller is caught up, however long the function is quiet', async () => {
      const gate = join(await mkdtemp(join(tmpdir(), 'runlet-quiet-')), 'gate');
      const before = await runIds('e2e');
      const quiet = await startReader(streamRequest(door, '/v4/dev/e2e/stepped', JSON.stringify({ gate })));
      const [quietRun] = await newRuns('e2e', before, 1, (record) => record.status === 'running', 'the quiet stream to be running');
      // A stalled stream started after it is the clock: once it is cut, the quiet one has been quiet longer.
      const witness = await startReader(streamRequest(door, '/v4/dev/e2e/blobs', JSON.stringify({ n: 400, size: 64 * 1024 })));
      await newRuns('e2e', new Set([...before, quietRun!.id]), 1, (record) => record.reason === 'client_stalled', 'the witness stream to be cut');
      await witness.close();
      expect((await runsOf('e2e')).find((record) => record.id === quietRun!.id)?.status).toBe('running');
      await writeFile(gate, '');
      expect(await quiet.read(4096, 0)).toMatchObject({ status: '200', events: 2, complete: true });
    });

    it('goes on to its end when gzipped, however slowly its caller reads', async () => {
      // Random items: what is written is about three quarters of what is yielded, or more.
      const request = streamRequest(door, '/v4/dev/e2e/random_blobs', JSON.stringify({ n: 64, size: 64 * 1024 }), 'Accept-Encoding: gzip\r\n');
      const answer = await (await startReader(request)).read(4096, 1);
      expect(answer).toMatchObject({ status: '200', complete: true });
      expect(answer.bytes).toBeGreaterThan(0.7 * 64 * 64 * 1024);
    });

    it('is cut once its caller has read nothing for the stall timeout (cancelled, client_stalled), freeing every slot', async () => {
      const before = await runIds('e2e');
      // As many stalled callers as the app has slots (replica_concurrency 4).
      const stalled = await Promise.all(
        [0, 1, 2, 3].map(() => startReader(streamRequest(door, '/v4/dev/e2e/blobs', JSON.stringify({ n: 400, size: 64 * 1024 })))),
      );
      // Started: running, or cut already on a machine slow to look.
      await newRuns('e2e', before, 4, (record) => record.startedAt !== null, 'the four stalled streams to start');
      // A fifth call waits for a slot: it is served once the stalled ones are cut, not at their time limit.
      const fifth = await postJson(`${origin}/v4/dev/e2e/greet`, { name: 'fifth' });
      expect(fifth.status).toBe(200);
      const fifthId = fifth.headers.get('x-request-id')!;
      const records = await newRuns('e2e', new Set([...before, fifthId]), 4, (record) => record.status === 'cancelled', 'the four stalled streams to be cut');
      for (const record of records) {
        expect(record).toMatchObject({ mode: 'stream', status: 'cancelled', reason: 'client_stalled', statusCode: 200 });
      }
      const fifthRecord = (await runsOf('e2e')).find((record) => record.id === fifthId);
      expect(fifthRecord).toMatchObject({ status: 'success', statusCode: 200 });
      // What the stalled callers get when they read at last: the stream as far as it went, cut.
      const late = await stalled[0]!.read(65536, 0);
      expect(late).toMatchObject({ status: '200', complete: false });
      expect(late.events).toBeLessThan(400);
    });
  });
});

describe.each(FRONT_DOORS)('a large sync result through %s', (server) => {
  beforeEach(() => openDoor(server));

  it.each(REQUEST_DOORS)('read slowly by %s arrives whole', async (door) => {
    const size = 4 * 1024 * 1024;
    const answer = await (await startReader(callRequest(door, '/v4/dev/e2e/big', JSON.stringify({ size })))).read(4096, 1);
    expect(answer).toMatchObject({ status: '200', complete: true });
    expect(answer.bytes).toBeGreaterThan(size);
  });

  it.each(REQUEST_DOORS)('read by %s is cut once its caller has read nothing for the stall timeout', async (door) => {
    const before = await runIds('e2e');
    // Over 1 MiB: relayed to the caller as it arrives, so it waits for the caller to read.
    const reader = await startReader(callRequest(door, '/v4/dev/e2e/big', JSON.stringify({ size: 16 * 1024 * 1024 })));
    const [record] = await newRuns('e2e', before, 1, (run) => run.status === 'cancelled', 'the stalled sync run to be cut');
    expect(record).toMatchObject({ mode: 'sync', status: 'cancelled', reason: 'client_stalled', statusCode: 200 });
    expect(await reader.read(65536, 0)).toMatchObject({ status: '200', complete: false });
  });
});

describe.each(FRONT_DOORS)('a custom app through %s', (server) => {
  beforeEach(() => openDoor(server));

  it("has its run cut when the caller reads nothing of the app's streamed answer for the stall timeout", async () => {
    const before = await runIds('web');
    const reader = await startReader('GET /v4/dev/web/flood HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    const [record] = await newRuns('web', before, 1, (run) => run.status === 'cancelled', "the stalled custom app's run to be cut");
    expect(record).toMatchObject({ status: 'cancelled', reason: 'client_stalled', statusCode: 200 });
    expect(await reader.read(65536, 0)).toMatchObject({ status: '200', complete: false });
  });
});
