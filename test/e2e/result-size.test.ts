// A function's result has a limit (502 result-too-large, the run recorded failure); a large result within it is
// passed on as it arrives. A stream has no limit for its caller, but the list of its items a webhook receives
// does: past it, the webhook gets a result-too-large failure, and nothing of the list is kept.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

const LIMIT = 4 * 1024 * 1024;
let dev: TestDevServer;
let base: string;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`], resultLimitBytes: LIMIT });
});
afterAll(async () => dev?.dispose());

async function recordOf(response: Response, until = (item: Record<string, unknown>) => item.status !== 'running' && item.status !== 'pending'): Promise<Record<string, unknown>> {
  const id = response.headers.get('x-request-id');
  return waitFor(async () => {
    const answer = await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${id}`);
    const { item } = (await answer.json()) as { item?: Record<string, unknown> };
    return item && until(item) ? item : null;
  }, { what: `run ${id} to be recorded as finished` });
}

const ITEM_BYTES = 64 * 1024;

/** A stream of `items` items of about ITEM_BYTES each, read whole, with its outcome POSTed to `receiver`. */
async function streamToWebhook(base: string, receiver: WebhookReceiver, items: number): Promise<{ response: Response; data: string[] }> {
  const response = await postJson(`${base}/blobs?webhookEndpoint=${encodeURIComponent(receiver.at().href)}`, { n: items, size: ITEM_BYTES }, { accept: 'text/event-stream' });
  expect(response.status).toBe(200);
  const events = await new EventReader(response.body!).rest();
  return { response, data: events.map((event) => event.data) };
}

describe.each(FRONT_DOORS)('through %s', (door) => {
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    base = `${front.origin}/v4/dev/e2e`;
    return front.close;
  });

  it('a result over the limit is refused: 502 result-too-large, recorded failure', async () => {
    const response = await postJson(`${base}/big`, { size: LIMIT + 1 });
    expect(response.status).toBe(502);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await response.json()) as { type: string; detail: string };
    expect(problem.type).toBe('https://runlet.dev/problems#result-too-large');
    expect(problem.detail).toMatch(new RegExp(`over the limit of ${LIMIT} bytes`));
    expect(await recordOf(response)).toMatchObject({ status: 'failure', statusCode: 502, error: { type: 'ResultTooLarge' } });
    // The runtime is fine: the next call is served.
    expect((await postJson(`${base}/greet`, { name: 'after' })).status).toBe(200);
  });

  it('a large result within the limit arrives whole, and the connection serves the next call', async () => {
    const size = LIMIT - 1024;
    const response = await postJson(`${base}/big`, { size });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { run_id: string; result: string; run_time_ms: number };
    expect(answer.result.length).toBe(size);
    expect(answer.run_id).toBe(response.headers.get('x-request-id'));
    expect(answer.run_time_ms).toBeGreaterThanOrEqual(0);
    expect(await recordOf(response)).toMatchObject({ status: 'success', statusCode: 200 });
    expect(await (await postJson(`${base}/greet`, { name: 'next' })).json()).toMatchObject({ result: { greeting: 'Hello, next!' } });
  });

  describe('a stream with a webhook', () => {
    let receiver: WebhookReceiver;
    beforeEach(async () => {
      receiver = await WebhookReceiver.start();
      return () => receiver.close();
    });

    it('forwards the list of its items when it is within the limit', async () => {
      const items = Math.floor(LIMIT / ITEM_BYTES) - 8;
      const { data } = await streamToWebhook(base, receiver, items);
      expect(data).toHaveLength(items);
      await receiver.received(1);
      const delivery = JSON.parse(receiver.deliveries[0]!.body) as { status: string; result: Array<{ i: number }> };
      expect(delivery.status).toBe('success');
      expect(delivery.result.map((item) => item.i)).toEqual([...Array(items).keys()]);
    });

    it('over the limit: the caller gets every item, the webhook a result-too-large failure, nothing of the list kept', async () => {
      const items = 2 * Math.ceil(LIMIT / ITEM_BYTES);
      const { response, data } = await streamToWebhook(base, receiver, items);
      expect(data).toHaveLength(items);
      expect(JSON.parse(data.at(-1)!)).toMatchObject({ i: items - 1 });
      await receiver.received(1);
      const body = receiver.deliveries[0]!.body;
      const delivery = JSON.parse(body) as { status: string; status_code: number; error: { type: string; message: string } };
      expect(delivery).toMatchObject({ status: 'failure', status_code: 502, error: { type: 'ResultTooLarge' } });
      expect(delivery.error.message).toMatch(new RegExp(`the stream's ${items} items make a list of \\d+ bytes, over the result limit of ${LIMIT} bytes`));
      expect(body.length).toBeLessThan(1024);
      // The run itself succeeded: its caller had it all.
      const record = await recordOf(response, (item) => (item.webhook as { state: string } | null)?.state === 'delivered');
      expect(record).toMatchObject({ mode: 'stream', status: 'success', statusCode: 200 });
    });
  });
});
