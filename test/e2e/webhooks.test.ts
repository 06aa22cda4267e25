// Webhook forwarding end to end: every mode, signed and verified independently, never delaying the caller.
import { mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ContractChecker } from '../support/contract.ts';
import { makeCustomApp } from '../support/custom-app.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { EventReader } from '../support/sse.ts';
import { verifyWebhookSignature } from '../support/signature.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';

const SECRET = 'whsec-test-3f1c9a-never-stored';
let dev: TestDevServer;
/** Origin of the front door under test; the management API is always the dev server's. */
let runOrigin: string;
let receiver: WebhookReceiver;
const logLines: string[] = [];

beforeAll(async () => {
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  dev = await startTestDevServer({
    appDirs: [`${FIXTURE_APPS}/e2e`, await makeCustomApp('web')],
    logger: pino({ level: 'debug' }, logSink),
    webhooks: { schedule: { delaysMs: [200, 200], maxJitterMs: 50 }, attemptTimeoutMs: 1500 },
  });
});
afterAll(async () => dev?.dispose());
beforeEach(async () => {
  receiver = await WebhookReceiver.start();
});
afterEach(async () => {
  // Every delivery of every test fits the documented webhook callback body.
  for (const delivery of receiver?.deliveries ?? []) contract.expectComponent('WebhookDelivery', JSON.parse(delivery.body));
  await receiver?.close();
});
const contract = new ContractChecker('run');

/** The body of the delivery about run `runId`. */
function waitedDelivery(runId: string): { result: { headers: Record<string, string> } } {
  const delivery = receiver.deliveries.find((d) => d.headers['x-request-id'] === runId);
  expect(delivery, `a delivery for run ${runId}`).toBeDefined();
  return JSON.parse(delivery!.body) as { result: { headers: Record<string, string> } };
}

function hook(path = '/hook'): string {
  return encodeURIComponent(`${receiver.url}${path}`);
}

async function runRecord(app: string, runId: string, until: (r: RunRecord) => boolean): Promise<RunRecord> {
  return waitFor(async () => {
    const response = await fetch(`${dev.url}/v2/projects/dev/apps/${app}/runs/${runId}`);
    if (response.status !== 200) return null;
    const { item } = (await response.json()) as { item: RunRecord };
    return until(item) ? item : null;
  }, { what: `run ${runId} webhook state` });
}

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    runOrigin = front.origin;
    return front.close;
  });

  describe('webhook forwarding', () => {
    it('POSTs the outcome of a sync run, signed, with the documented members', async () => {
      const response = await postJson(`${runOrigin}/v4/dev/e2e/greet?webhookEndpoint=${hook('/hook?token=abc')}`, { name: 'Ada' }, { 'x-webhook-secret': SECRET });
      expect(response.status).toBe(200);
      const runId = response.headers.get('x-request-id')!;
      await receiver.received(1);
      const [delivery] = receiver.deliveries;
      expect(delivery!.path).toBe('/hook?token=abc');
      expect(delivery!.headers['content-type']).toBe('application/json');
      expect(delivery!.headers['x-request-id']).toBe(runId);
      const body = JSON.parse(delivery!.body) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['run_id', 'status', 'status_code', 'result', 'run_time_ms', 'timestamp']);
      expect(body).toMatchObject({ run_id: runId, status: 'success', status_code: 200, result: { greeting: 'Hello, Ada!' } });
      expect(Date.parse(body.timestamp as string)).not.toBeNaN();

      const timestamp = Number(delivery!.headers['x-service-webhook-timestamp']);
      expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(60);
      expect(delivery!.headers['x-service-webhook-signature']).toMatch(/^v1,[0-9a-f]{64}$/);
      expect(verifyWebhookSignature(SECRET, delivery!.headers, delivery!.body)).toBe(true);
      expect(verifyWebhookSignature(SECRET, delivery!.headers, delivery!.body.replace('Ada', 'Eve'))).toBe(false);
      expect(verifyWebhookSignature('other-secret', delivery!.headers, delivery!.body)).toBe(false);

      const record = await runRecord('e2e', runId, (r) => r.webhook?.state === 'delivered');
      expect(record.webhook).toEqual({ endpoint: `${receiver.url}/hook`, state: 'delivered', attempts: 1, lastStatusCode: 200, lastError: null });
    });

    it('sends no signature headers without X-Webhook-Secret', async () => {
      await postJson(`${runOrigin}/v4/dev/e2e/echo?webhookEndpoint=${hook()}`, { a: 1 });
      await receiver.received(1);
      expect(receiver.deliveries[0]!.headers['x-service-webhook-signature']).toBeUndefined();
      expect(receiver.deliveries[0]!.headers['x-service-webhook-timestamp']).toBeUndefined();
    });

    it('forwards an async run, and a failing one with status failure and its error', async () => {
      const ok = await postJson(`${runOrigin}/v4/dev/e2e/echo?async=true&webhookEndpoint=${hook()}`, { x: 1 });
      const failing = await postJson(`${runOrigin}/v4/dev/e2e/boom?async=true&webhookEndpoint=${hook()}`, { message: 'nope' });
      const okId = ((await ok.json()) as { run_id: string }).run_id;
      const failId = ((await failing.json()) as { run_id: string }).run_id;
      await receiver.received(2);
      const bodies = new Map(receiver.deliveries.map((d) => [d.headers['x-request-id'], JSON.parse(d.body) as Record<string, unknown>]));
      expect(bodies.get(okId)).toMatchObject({ status: 'success', status_code: 200, result: { x: 1 } });
      const failure = bodies.get(failId)!;
      expect(failure).toMatchObject({ status: 'failure', status_code: 500, error: { type: 'ValueError', message: 'nope' } });
      expect(failure).not.toHaveProperty('result');
    });

    it('forwards the list of items of a streaming run', async () => {
      const response = await postJson(`${runOrigin}/v4/dev/e2e/texts?webhookEndpoint=${hook()}`, {}, { accept: 'text/event-stream' });
      await new EventReader(response.body!).rest();
      await receiver.received(1);
      expect(JSON.parse(receiver.deliveries[0]!.body)).toMatchObject({
        status: 'success',
        result: ['plain', 'line one\nline two\r\nline three', '', 42, ['a', { b: null }]],
      });
    });

    it('forwards a stream the caller abandons as a failure of type Cancelled', async () => {
      const gate = join(await mkdtemp(join(tmpdir(), 'runlet-hook-gate-')), 'gate');
      const response = await postJson(`${runOrigin}/v4/dev/e2e/stepped?webhookEndpoint=${hook()}`, { gate }, { accept: 'text/event-stream' });
      const reader = new EventReader(response.body!);
      expect((await reader.next())?.data).toBe('first');
      await reader.cancel();
      await receiver.received(1);
      expect(JSON.parse(receiver.deliveries[0]!.body)).toMatchObject({ status: 'failure', error: { type: 'Cancelled' } });
      await writeFile(gate, ''); // lets the runtime's generator finish
    });

    it("forwards a custom app's response, parsed when it is JSON", async () => {
      const response = await fetch(`${runOrigin}/v4/dev/web/things?webhookEndpoint=${hook()}`, { method: 'POST', body: 'payload' });
      const answer = await response.json();
      await receiver.received(1);
      expect(JSON.parse(receiver.deliveries[0]!.body)).toMatchObject({ status: 'success', status_code: 200, result: answer });
      await fetch(`${runOrigin}/v4/dev/web/stream?webhookEndpoint=${hook()}`).then((r) => r.text());
      await receiver.received(2);
      expect(JSON.parse(receiver.deliveries[1]!.body)).toMatchObject({ result: 'part 0\npart 1\npart 2\n' });
    });

    it("never shows a custom app the caller's X-Webhook-Secret nor X-Runlet-* headers, sync or async", async () => {
      const headers = { 'x-webhook-secret': SECRET, 'x-runlet-held-run': 'forged', 'x-runlet-stream': '1', 'x-caller': 'kept' };
      const sync = await fetch(`${runOrigin}/v4/dev/web/headers?webhookEndpoint=${hook()}`, { headers });
      expect(sync.status).toBe(200);
      const seenSync = ((await sync.json()) as { headers: Record<string, string> }).headers;
      const accepted = await fetch(`${runOrigin}/v4/dev/web/headers?async=true&webhookEndpoint=${hook()}`, { method: 'POST', headers });
      expect(accepted.status).toBe(202);
      await receiver.received(2);
      const seenAsync = waitedDelivery(accepted.headers.get('x-request-id')!).result.headers;
      for (const seen of [seenSync, seenAsync]) {
        expect(seen['x-caller']).toBe('kept');
        expect(Object.keys(seen).filter((name) => name === 'x-webhook-secret' || name.startsWith('x-runlet-'))).toEqual([]);
        expect(JSON.stringify(seen)).not.toContain(SECRET);
      }
      // The secret still signs both deliveries.
      for (const delivery of receiver.deliveries) expect(delivery.headers['x-service-webhook-signature']).toMatch(/^v1,[0-9a-f]{64}$/);
    });

    it('answers the caller without waiting for a receiver that hangs, then retries it', async () => {
      receiver.answer = (_delivery, index) => (index === 0 ? 'hang' : 200);
      const started = performance.now();
      const response = await postJson(`${runOrigin}/v4/dev/e2e/echo?webhookEndpoint=${hook()}`, {});
      expect(response.status).toBe(200);
      const runId = response.headers.get('x-request-id')!;
      await receiver.received(1);
      expect(performance.now() - started).toBeLessThan(1500); // the attempt timeout: the answer did not wait for it
      const record = await runRecord('e2e', runId, (r) => r.webhook?.state === 'delivered');
      expect(record.webhook).toMatchObject({ attempts: 2, lastStatusCode: 200 });
    });

    it('retries 404 and records delivered after two attempts; does not retry 500', async () => {
      receiver.answer = (delivery, index) => (delivery.path === '/flaky' ? (index === 0 ? 404 : 200) : 500);
      const flaky = await postJson(`${runOrigin}/v4/dev/e2e/echo?webhookEndpoint=${hook('/flaky')}`, {});
      const flakyId = flaky.headers.get('x-request-id')!;
      expect((await runRecord('e2e', flakyId, (r) => r.webhook?.state === 'delivered')).webhook).toMatchObject({ attempts: 2, lastStatusCode: 200 });
      const broken = await postJson(`${runOrigin}/v4/dev/e2e/echo?webhookEndpoint=${hook('/broken')}`, {});
      const brokenId = broken.headers.get('x-request-id')!;
      expect((await runRecord('e2e', brokenId, (r) => r.webhook?.state === 'failed')).webhook).toMatchObject({ attempts: 1, lastStatusCode: 500 });
      expect(logLines.some((line) => line.includes(brokenId) && line.includes('webhook delivery failed'))).toBe(true);
    });

    it('never stores nor logs the secret', async () => {
      const response = await postJson(`${runOrigin}/v4/dev/e2e/echo?webhookEndpoint=${hook()}`, {}, { 'x-webhook-secret': SECRET });
      const runId = response.headers.get('x-request-id')!;
      await runRecord('e2e', runId, (r) => r.webhook?.state === 'delivered');
      await dev.store.flush();
      for (const file of await readdir(dev.dataDir)) {
        expect((await readFile(join(dev.dataDir, file))).includes(SECRET)).toBe(false);
      }
      expect(logLines.some((line) => line.includes(runId))).toBe(true);
      expect(logLines.some((line) => line.includes(SECRET))).toBe(false);
    });
  });
});
