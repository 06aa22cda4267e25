// Streams and callers that read slowly, late, or never: a stream waits for its caller (backpressure) and goes
// on once the caller reads again, at any speed, on both doors of either server (the front reads a sized
// POST, node:http a chunked one); a caller that reads nothing for the stall bound is cut and its slot freed.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FIXTURE_APPS, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { SlowReader } from '../support/slow-reader.ts';

let dev: TestDevServer;
let origin: string;
const readers: SlowReader[] = [];

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`] });
});
afterAll(async () => dev?.dispose());

/** How the request reaches the run interface: read whole by the front, or by node:http as it comes. */
const REQUEST_DOORS = ['the front (sized body)', 'node:http (chunked body)'] as const;

function streamRequest(door: (typeof REQUEST_DOORS)[number], path: string, body: string, extraHeaders = ''): string {
  const head = `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\n${extraHeaders}`;
  if (door === 'the front (sized body)') return `${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  return `${head}Transfer-Encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
}

async function startReader(request: string): Promise<SlowReader> {
  const reader = await SlowReader.start(origin, request);
  readers.push(reader);
  return reader;
}

describe.each(FRONT_DOORS)('through %s', (server) => {
  beforeEach(async () => {
    const front = await openFrontDoor(server, dev);
    origin = front.origin;
    return async () => {
      await Promise.all(readers.splice(0).map((reader) => reader.close()));
      await front.close();
    };
  });

  describe.each(REQUEST_DOORS)('a stream read by %s', (door) => {
    it('goes on to its end however slowly its caller reads (4 MiB, a few KiB at a time)', async () => {
      const items = 64;
      const reader = await startReader(streamRequest(door, '/v4/dev/e2e/blobs', JSON.stringify({ n: items, size: 64 * 1024 })));
      const answer = await reader.read(4096, 1);
      expect(answer).toMatchObject({ status: '200', events: items, complete: true });
      expect(answer.bytes).toBeGreaterThan(items * 64 * 1024);
    });

    it('goes on to its end when gzipped, however slowly its caller reads', async () => {
      // Random items: what is written is about three quarters of what is yielded, or more.
      const request = streamRequest(door, '/v4/dev/e2e/random_blobs', JSON.stringify({ n: 64, size: 64 * 1024 }), 'Accept-Encoding: gzip\r\n');
      const answer = await (await startReader(request)).read(4096, 1);
      expect(answer).toMatchObject({ status: '200', complete: true });
      expect(answer.bytes).toBeGreaterThan(0.7 * 64 * 64 * 1024);
    });
  });
});
