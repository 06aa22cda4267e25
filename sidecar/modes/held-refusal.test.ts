// A held async call the replica refuses becomes a failed run: through the pod sidecar's run server (its front for
// small POSTs, node:http for the rest), in front of real runtimes (`runlet dev`'s, whose SQLite store and
// management API record and list the runs), with a real webhook receiver. The replica has the holder's key and
// verifies tokens, as in a pod.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { makeCustomApp } from '../../test/support/custom-app.ts';
import { FIXTURE_APPS, startTestDevServer, type TestDevServer } from '../../test/support/dev-server.ts';
import { testLogger } from '../../test/support/logger.ts';
import { RawConnection } from '../../test/support/raw-http.ts';
import { startRunServer, type TestRunServer } from '../../test/support/run-server.ts';
import { verifyWebhookSignature } from '../../test/support/signature.ts';
import { waitFor } from '../../test/support/wait.ts';
import { WebhookReceiver, type ReceivedDelivery } from '../../test/support/webhook-receiver.ts';
import { AppRegistry, AppTarget } from '../apps.ts';
import { RunAuthenticator } from '../auth/authenticator.ts';
import { HELD_RUN_HEADER, heldRunHeader } from '../auth/held-run.ts';
import { signLocalToken } from '../auth/local-key.ts';
import { Replica } from '../replica.ts';
import { newRunId } from '../runs/recorder.ts';
import { LOOPBACK_CIDRS } from '../webhook/guard.ts';

const HOLDER_KEY = randomBytes(32);
const PROJECT_KEYS = { dev: randomBytes(32), other: randomBytes(32) };
const COLD_START_MS = 1234;
const SECRET = 'held-secret';
/** Small, so that a body over it is cheap to send; the front still reads it whole. */
const BODY_LIMIT_BYTES = 1024;

let dev: TestDevServer;
let replica: Replica;
let sidecar: TestRunServer;
let receiver: WebhookReceiver;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`, await makeCustomApp('web')] });
  const apps = new AppRegistry();
  for (const app of dev.apps) apps.add(app.target);
  // Never attached: its runtime is not ready.
  apps.add(new AppTarget({ projectId: 'dev', appName: 'idle', runtime: 'python', replicaConcurrency: 1, responseGracePeriodSeconds: 5 }));
  replica = new Replica({
    apps,
    store: dev.store,
    replicaName: 'held-refusal-test',
    logger: testLogger(),
    bodyLimitBytes: BODY_LIMIT_BYTES,
    webhooks: { allowCidrs: LOOPBACK_CIDRS },
    auth: new RunAuthenticator({ audience: 'runlet', hs256Keys: PROJECT_KEYS }),
    holderKey: HOLDER_KEY,
  });
  sidecar = await startRunServer(replica);
  receiver = await WebhookReceiver.start();
}, 60_000);

afterAll(async () => {
  await replica?.drain();
  await sidecar?.close();
  await receiver?.close();
  await dev?.dispose();
});

interface HeldCallOptions {
  /** Default POST. */
  method?: string;
  /** JSON text; default `{}`. */
  body?: string;
  /** Default a valid token for project dev. */
  token?: string;
  /** The held-run header: signed with the holder's key (default), with another key, or absent. */
  /** forged: signed with another key; replayed: a valid header of another call (another webhook address). */
  held?: 'valid' | 'forged' | 'replayed' | 'absent';
  /** Default: the receiver, signed with SECRET. */
  query?: string;
}

const validToken = () => signLocalToken({ projectId: 'dev', key: PROJECT_KEYS.dev });
const webhookQuery = () => `async=true&webhookEndpoint=${encodeURIComponent(receiver.at().href)}`;

/** A call as the holder hands it over (hold-proxy.ts `postWholeCall`); returns the answer and the held run id. */
async function handOver(path: string, options: HeldCallOptions = {}): Promise<{ answer: Response; runId: string }> {
  const runId = newRunId();
  const held = options.held ?? 'valid';
  const key = held === 'forged' ? randomBytes(32) : HOLDER_KEY;
  const method = options.method ?? 'POST';
  const url = `/v4/dev/${path}?${options.query ?? webhookQuery()}`;
  const answer = await fetch(`${sidecar.url}${url}`, {
    method,
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${options.token ?? (await validToken())}`,
      'x-webhook-secret': SECRET,
      ...(held === 'absent' ? {} : { [HELD_RUN_HEADER]: heldRunHeader(key, { runId, coldStartMs: COLD_START_MS }, { method, url: held === 'replayed' ? `${url}x` : url }) }),
    },
    body: options.body ?? '{}',
  });
  return { answer, runId };
}

/** The run as the management API lists it; null when it has none with that id. */
async function listed(app: string, runId: string): Promise<RunRecord | null> {
  const response = await fetch(`${dev.url}/v2/projects/dev/apps/${app}/runs/${runId}`);
  return response.status === 200 ? ((await response.json()) as { item: RunRecord }).item : null;
}

function deliveryOf(runId: string): Promise<ReceivedDelivery> {
  return waitFor(() => receiver.deliveries.find((delivery) => (JSON.parse(delivery.body) as { run_id: string }).run_id === runId), { what: `the webhook of run ${runId}` });
}

describe('a held async call the replica refuses becomes a failed run', () => {
  const refusals: Array<{ what: string; path: string; options: () => Promise<HeldCallOptions>; statusCode: number; type: string }> = [
    { what: 'a token that expired while the call was held (401)', path: 'e2e/echo', options: async () => ({ token: await signLocalToken({ projectId: 'dev', key: PROJECT_KEYS.dev, expiresIn: -60 }) }), statusCode: 401, type: 'Authentication required' },
    { what: 'a token of another project (403)', path: 'e2e/echo', options: async () => ({ token: await signLocalToken({ projectId: 'other', key: PROJECT_KEYS.other }) }), statusCode: 403, type: 'Not allowed' },
    { what: 'a function the app does not have (404, from the runtime)', path: 'e2e/nope', options: async () => ({}), statusCode: 404, type: 'Function not found' },
    { what: 'a private function (404, from the sidecar)', path: 'e2e/_wait_for', options: async () => ({}), statusCode: 404, type: 'Function not found' },
    { what: 'arguments that do not match the function (422)', path: 'e2e/greet', options: async () => ({ body: '{"nom":"x"}' }), statusCode: 422, type: 'Arguments do not match the function' },
    { what: 'a body that is not JSON (400)', path: 'e2e/echo', options: async () => ({ body: '{' }), statusCode: 400, type: 'Request body is not valid JSON' },
    { what: 'a body that is not a JSON object (400)', path: 'e2e/echo', options: async () => ({ body: '[1]' }), statusCode: 400, type: 'Request body is not a JSON object' },
    { what: 'a body over the limit, read whole by the front (413)', path: 'e2e/echo', options: async () => ({ body: JSON.stringify({ pad: 'x'.repeat(BODY_LIMIT_BYTES) }) }), statusCode: 413, type: 'Request body too large' },
    { what: 'a method other than POST, through node:http (405)', path: 'e2e/echo', options: async () => ({ method: 'PUT' }), statusCode: 405, type: 'Method not allowed' },
    { what: "a custom app's body over the limit, through node:http (413)", path: 'web/echo', options: async () => ({ body: JSON.stringify({ pad: 'x'.repeat(BODY_LIMIT_BYTES) }) }), statusCode: 413, type: 'Request body too large' },
  ];

  it.each(refusals)('$what: 202 with the held run id, recorded failure with its cold start, its webhook signed', async ({ path, options, statusCode, type }) => {
    const { answer, runId } = await handOver(path, await options());
    expect(answer.status, await answer.clone().text()).toBe(202);
    expect(await answer.json()).toEqual({ run_id: runId });
    expect(answer.headers.get('x-request-id')).toBe(runId);

    // Listed at once: the record was durable before the 202.
    const app = path.split('/')[0]!;
    const record = await listed(app, runId);
    expect(record).toMatchObject({ id: runId, async: true, mode: 'async', status: 'failure', statusCode, reason: null, coldStartMs: COLD_START_MS, startedAt: null });
    expect(record!.error).toMatchObject({ type });
    expect(record!.error!.message).not.toBe('');

    const delivery = await deliveryOf(runId);
    expect(verifyWebhookSignature(SECRET, delivery.headers, delivery.body)).toBe(true);
    expect(JSON.parse(delivery.body)).toMatchObject({ run_id: runId, status: 'failure', status_code: statusCode, error: record!.error });
    await waitFor(async () => (await listed(app, runId))?.webhook?.state === 'delivered', { what: 'the delivery on the record' });
  });

  it("a held call whose body comes after its head is not refused on its head, as other calls are: the front reads its body, and its refusal becomes its failure", async () => {
    const runId = newRunId();
    const url = `/v4/dev/e2e/echo?${webhookQuery()}`;
    const expired = await signLocalToken({ projectId: 'dev', key: PROJECT_KEYS.dev, expiresIn: -60 });
    const held = heldRunHeader(HOLDER_KEY, { runId, coldStartMs: COLD_START_MS }, { method: 'POST', url });
    const connection = await RawConnection.open(sidecar.url);
    try {
      connection.write(
        `POST ${url} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nAuthorization: Bearer ${expired}\r\n` +
          `X-Webhook-Secret: ${SECRET}\r\n${HELD_RUN_HEADER}: ${held}\r\nContent-Length: 2\r\n\r\n{`,
      );
      // The front holds the head and the body's first byte: it was screened and let through.
      await waitFor(() => replica.requestBudget.usedBytes > 0, { what: 'the front to hold the call' });
      connection.write('}');
      const answer = await connection.next();
      expect(answer.status, answer.body).toBe(202);
      expect(JSON.parse(answer.body)).toEqual({ run_id: runId });
    } finally {
      connection.close();
    }
    expect(await listed('e2e', runId)).toMatchObject({ id: runId, status: 'failure', statusCode: 401, coldStartMs: COLD_START_MS });
  });

  it('a webhookEndpoint that is itself refused (400): recorded failure, with no webhook to deliver to', async () => {
    const { answer, runId } = await handOver('e2e/echo', { query: 'async=true&webhookEndpoint=not-a-url' });
    expect(answer.status).toBe(202);
    expect(await listed('e2e', runId)).toMatchObject({ status: 'failure', statusCode: 400, error: { type: 'Invalid webhookEndpoint' }, webhook: null, coldStartMs: COLD_START_MS });
  });

  it('a held call the replica accepts runs as before, under the held run id', async () => {
    const { answer, runId } = await handOver('e2e/greet', { body: '{"name":"Held"}' });
    expect(await answer.json()).toEqual({ run_id: runId });
    const delivery = await deliveryOf(runId);
    expect(JSON.parse(delivery.body)).toMatchObject({ status: 'success', result: { greeting: 'Hello, Held!' } });
    expect(await listed('e2e', runId)).toMatchObject({ status: 'success', coldStartMs: COLD_START_MS });
  });
});

describe('refused as before', () => {
  /** A refusal answered as a problem, with nothing recorded under its run id. */
  async function expectRefused(answer: Response, status: number, code: string): Promise<void> {
    expect(answer.status).toBe(status);
    expect(((await answer.json()) as { type: string }).type).toBe(`https://runlet.dev/problems#${code}`);
    expect(await listed('e2e', answer.headers.get('x-request-id')!)).toBeNull();
  }

  it.each(['absent', 'forged', 'replayed'] as const)('an async call whose held-run header is %s', async (held) => {
    await expectRefused((await handOver('e2e/nope', { held })).answer, 404, 'function-not-found');
    await expectRefused((await handOver('e2e/greet', { held, body: '{"nom":"x"}' })).answer, 422, 'invalid-arguments');
    await expectRefused((await handOver('e2e/echo', { held, body: '{' })).answer, 400, 'invalid-json');
    await expectRefused((await handOver('e2e/echo', { held, token: await signLocalToken({ projectId: 'dev', key: PROJECT_KEYS.dev, expiresIn: -60 }) })).answer, 401, 'unauthorized');
  });

  it('a held sync call: its caller waits for the answer, so it gets the refusal', async () => {
    const { answer, runId } = await handOver('e2e/nope', { query: '' });
    expect(answer.status).toBe(404);
    expect(answer.headers.get('x-request-id')).toBe(runId);
    expect(((await answer.json()) as { type: string }).type).toBe('https://runlet.dev/problems#function-not-found');
    // Recorded as any sync call the runtime refuses is.
    expect(await listed('e2e', runId)).toMatchObject({ async: false, mode: 'sync', status: 'failure', statusCode: 404 });
  });

  it('503 stays 503, so the holder tries again: a runtime not ready', async () => {
    const { answer, runId } = await handOver('idle/echo');
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('1');
    expect(((await answer.json()) as { type: string }).type).toBe('https://runlet.dev/problems#app-unavailable');
    expect(receiver.deliveries.some((delivery) => delivery.body.includes(runId))).toBe(false);
  });

  // Last: the replica stays drained.
  it('503 stays 503: a draining replica, even for a call it would refuse', async () => {
    await replica.drain();
    const { answer } = await handOver('e2e/nope');
    expect(answer.status).toBe(503);
    expect(((await answer.json()) as { type: string }).type).toBe('https://runlet.dev/problems#draining');
  });
});
