// Streaming runs: SSE framing, progressive delivery (plain and gzip), errors mid-stream, the caller leaving.
import { request as httpRequest } from 'node:http';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGunzip } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ContractChecker } from '../support/contract.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';

let dev: TestDevServer;
/** Origin of the front door under test. */
let runOrigin: string;
let base: string;
let gates: string;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`] });
  gates = await mkdtemp(join(tmpdir(), 'runlet-gates-'));
});
afterAll(async () => dev?.dispose());

const SSE = { accept: 'text/event-stream' };

async function runRecord(runId: string, until: (record: RunRecord) => boolean): Promise<RunRecord> {
  return waitFor(
    async () => {
      const response = await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${runId}`);
      if (response.status !== 200) return null;
      const { item } = (await response.json()) as { item: RunRecord };
      return until(item) ? item : null;
    },
    { what: `run ${runId} to reach the expected state` },
  );
}

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    runOrigin = front.origin;
    base = `${runOrigin}/v4/dev/e2e`;
    return front.close;
  });

  describe('streaming runs', () => {
    it('sends one event per item with the SSE headers, strings as text and other items as JSON', async () => {
      const response = await postJson(`${base}/texts`, {}, SSE);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      expect(response.headers.get('cache-control')).toBe('no-cache');
      expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      await new ContractChecker('run').expectDescribed('POST', '/v4/{project_id}/{app_name}/{function}', response);
      const events = await new EventReader(response.body!).rest();
      expect(events.map((event) => event.data)).toEqual(['plain', 'line one\nline two\nline three', '', '42', '["a",{"b":null}]']);
      expect(events.every((event) => event.event === undefined)).toBe(true);
    });

    it('frames a multi-line item as several data: lines of one event, on the wire', async () => {
      const response = await postJson(`${base}/texts`, {}, SSE);
      const text = await response.text();
      expect(text).toContain('data: line one\ndata: line two\ndata: line three\n\n');
      expect(text.startsWith('data: plain\n\n')).toBe(true);
    });

    it('uses chunked transfer encoding', async () => {
      const headers = await new Promise<Record<string, string | string[] | undefined>>((resolve, reject) => {
        const url = new URL(`${base}/items`);
        const request = httpRequest(url, { method: 'POST', headers: { ...SSE, 'content-type': 'application/json' } }, (response) => {
          resolve(response.headers);
          response.resume();
        });
        request.on('error', reject);
        request.end('{"n":2}');
      });
      expect(headers['transfer-encoding']).toBe('chunked');
    });

    it('delivers the first event before the second item is produced', async () => {
      const gate = join(gates, `${door.replaceAll(' ', '-')}-plain-gate`);
      const response = await postJson(`${base}/stepped`, { gate }, SSE);
      const reader = new EventReader(response.body!);
      expect((await reader.next())?.data).toBe('first');
      await writeFile(gate, '');
      expect((await reader.next())?.data).toBe('second');
      expect(await reader.next()).toBeNull();
    });

    it('compresses with gzip when accepted, flushing each event as it is yielded', async () => {
      const gate = join(gates, `${door.replaceAll(' ', '-')}-gzip-gate`);
      const response = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
        const request = httpRequest(new URL(`${base}/stepped`), {
          method: 'POST',
          headers: { ...SSE, 'accept-encoding': 'gzip', 'content-type': 'application/json' },
        }, resolve);
        request.on('error', reject);
        request.end(JSON.stringify({ gate }));
      });
      expect(response.headers['content-encoding']).toBe('gzip');
      const gunzip = response.pipe(createGunzip());
      gunzip.setEncoding('utf8');
      const chunks = gunzip[Symbol.asyncIterator]();
      let text = '';
      while (!text.includes('\n\n')) text += (await chunks.next()).value;
      expect(text).toBe('data: first\n\n');
      await writeFile(gate, '');
      for (let chunk = await chunks.next(); !chunk.done; chunk = await chunks.next()) text += chunk.value;
      expect(text).toBe('data: first\n\ndata: second\n\n');
    });

    it('ends with an error event when the generator raises, and records the run as failure', async () => {
      const response = await postJson(`${base}/fails_midway`, {}, SSE);
      const runId = response.headers.get('x-request-id')!;
      const events = await new EventReader(response.body!).rest();
      expect(events[0]?.data).toBe('before');
      expect(events[1]?.event).toBe('error');
      expect(JSON.parse(events[1]!.data)).toEqual({ type: 'RuntimeError', message: 'generator failed' });
      expect(events).toHaveLength(2);
      const record = await runRecord(runId, (r) => r.status === 'failure');
      expect(record).toMatchObject({ mode: 'stream', statusCode: 500, error: { type: 'RuntimeError', message: 'generator failed' } });
    });

    it('answers a function that returns a plain value like a sync call', async () => {
      const response = await postJson(`${base}/plain_value_for_stream`, {}, SSE);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await response.json()).toMatchObject({ result: { not: 'a generator' } });
    });

    it('records a stream the caller abandons as cancelled', async () => {
      const gate = join(gates, `${door.replaceAll(' ', '-')}-never-opened`);
      const response = await postJson(`${base}/stepped`, { gate }, SSE);
      const runId = response.headers.get('x-request-id')!;
      const reader = new EventReader(response.body!);
      expect((await reader.next())?.data).toBe('first');
      await reader.cancel();
      const record = await runRecord(runId, (r) => r.status !== 'running');
      expect(record).toMatchObject({ status: 'cancelled', reason: 'client_closed' });
      await writeFile(gate, ''); // let the runtime's generator thread finish
    });
  });
});
