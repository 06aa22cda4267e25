// A held async call the replica refuses becomes a failed run — unless the refusal is of its caller (401, 403) or
// of the hand-over itself (a run id taken, another body) — through the pod sidecar's run server (its front for
// small POSTs, node:http for the rest), in front of real runtimes (`runlet dev`'s, whose SQLite store and
// management API record and list the runs), with a real webhook receiver. The replica has its namespace's holder
// key and verifies tokens, as in a pod. Last, the attacks of issue #21 on hand-overs, each refused.
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
import { RunAuthenticator } from '../../run-request/auth/authenticator.ts';
import { HELD_RUN_HEADER, heldRunHeader, verifiedHeldRunHeader } from '../../run-request/auth/held-run.ts';
import { signLocalToken } from '../../run-request/auth/local-key.ts';
import { Replica } from '../replica.ts';
import { newRunId } from '../../run-request/run-id.ts';
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
  /** Default a valid token for project dev; null: no Authorization header. */
  token?: string | null;
  /**
   * The held-run header: signed with the replica's key for this call (default), with another key (another
   * namespace's), absent, or a valid header of another call (another webhook address).
   */
  held?: 'valid' | 'forged' | 'replayed' | 'absent';
  /** The header as it is, instead: one seen on the network, sent again. */
  header?: string;
  /** The run id the header names. Default a new one. */
  runId?: string;
  /** Default: the receiver, signed with SECRET. */
  query?: string;
}

const validToken = () => signLocalToken({ projectId: 'dev', key: PROJECT_KEYS.dev });
const webhookQuery = () => `async=true&webhookEndpoint=${encodeURIComponent(receiver.at().href)}`;

/** A call as the holder hands it over (hold-proxy.ts `postWholeCall`); returns the answer and the held run id. */
async function handOver(path: string, options: HeldCallOptions = {}): Promise<{ answer: Response; runId: string; header: string | undefined }> {
  const { url, method, body, authorization, runId, header } = await heldCall(path, options);
  const answer = await fetch(`${sidecar.url}${url}`, {
    method,
    headers: {
      'content-type': 'application/json',
      ...(authorization === undefined ? {} : { authorization }),
      'x-webhook-secret': SECRET,
      ...(header === undefined ? {} : { [HELD_RUN_HEADER]: header }),
    },
    body,
  });
  return { answer, runId, header };
}

/** A call as the holder hands it over: its request line, body, Authorization header and held-run header. */
async function heldCall(path: string, options: HeldCallOptions) {
  const runId = options.runId ?? newRunId();
  const held = options.held ?? 'valid';
  const key = held === 'forged' ? randomBytes(32) : HOLDER_KEY;
  const method = options.method ?? 'POST';
  const url = `/v4/dev/${path}?${options.query ?? webhookQuery()}`;
  const body = options.body ?? '{}';
  const authorization = options.token === null ? undefined : `Bearer ${options.token ?? (await validToken())}`;
  const signedUrl = held === 'replayed' ? `${url}x` : url;
  const header = options.header ?? (held === 'absent' ? undefined : heldRunHeader(key, { runId, coldStartMs: COLD_START_MS }, { method, url: signedUrl, authorization }, Buffer.from(body)));
  return { url, method, body, authorization, runId, header };
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

  /** A held call's head and the first byte of its `{}` body: the front has the head whole, the body not. */
  function writeHeadAndFirstByte(connection: RawConnection, url: string, authorization: string, held: string): void {
    connection.write(
      `POST ${url} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAuthorization: ${authorization}\r\n` +
        `X-Webhook-Secret: ${SECRET}\r\n${HELD_RUN_HEADER}: ${held}\r\nContent-Length: 2\r\n\r\n{`,
    );
  }

  it("a held call whose body comes after its head is not refused on its head for an unknown app: the front reads its body, and its refusal becomes its failure", async () => {
    const runId = newRunId();
    const url = `/v4/dev/gone/echo?${webhookQuery()}`;
    const authorization = `Bearer ${await validToken()}`;
    const held = heldRunHeader(HOLDER_KEY, { runId, coldStartMs: COLD_START_MS }, { method: 'POST', url, authorization }, Buffer.from('{}'));
    const connection = await RawConnection.open(sidecar.url);
    try {
      writeHeadAndFirstByte(connection, url, authorization, held);
      // The front holds the head and the body's first byte: it was screened and let through.
      await waitFor(() => replica.requestBudget.usedBytes > 0, { what: 'the front to hold the call' });
      connection.write('}');
      const answer = await connection.next();
      expect(answer.status, answer.body).toBe(202);
      expect(JSON.parse(answer.body)).toEqual({ run_id: runId });
    } finally {
      connection.close();
    }
    const record = await deliveryOf(runId);
    expect(JSON.parse(record.body)).toMatchObject({ run_id: runId, status: 'failure', status_code: 404 });
  });

  it('a held call whose token expired while it waited is refused on its head (401), before the front holds its body', async () => {
    const runId = newRunId();
    const url = `/v4/dev/e2e/echo?${webhookQuery()}`;
    const authorization = `Bearer ${await signLocalToken({ projectId: 'dev', key: PROJECT_KEYS.dev, expiresIn: -60 })}`;
    const held = heldRunHeader(HOLDER_KEY, { runId, coldStartMs: COLD_START_MS }, { method: 'POST', url, authorization }, Buffer.from('{}'));
    const connection = await RawConnection.open(sidecar.url);
    try {
      writeHeadAndFirstByte(connection, url, authorization, held);
      const answer = await connection.next();
      expect(answer.status, answer.body).toBe(401);
    } finally {
      connection.close();
    }
    expect(await listed('e2e', runId)).toBeNull();
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

describe('the attacks of issue #21 on hand-overs, each refused', () => {
  /** A victim's held async call, accepted and run: its record, listed as a success, and its header. */
  async function victimRun(): Promise<{ runId: string; header: string; token: string }> {
    const token = await validToken();
    const { answer, runId, header } = await handOver('e2e/greet', { body: '{"name":"Victim"}', token });
    expect(answer.status).toBe(202);
    await waitFor(async () => (await listed('e2e', runId))?.status === 'success', { what: "the victim's run to succeed" });
    await deliveryOf(runId);
    return { runId, header: header!, token };
  }

  /** The victim's run, still as it was, and no second webhook for it. */
  async function expectUntouched(runId: string): Promise<void> {
    expect(await listed('e2e', runId)).toMatchObject({ status: 'success', statusCode: 200, error: null });
    expect(receiver.deliveries.filter((delivery) => (JSON.parse(delivery.body) as { run_id: string }).run_id === runId)).toHaveLength(1);
  }

  it.each(['forged', 'valid'] as const)("no Authorization header and a %s header naming a victim's run: 401, the victim's run not overwritten", async (held) => {
    const victim = await victimRun();
    const { answer } = await handOver('e2e/nope', { held, runId: victim.runId, token: null });
    expect(answer.status).toBe(401);
    await expectUntouched(victim.runId);
  });

  it('no Authorization header and a header naming an id the caller chose: 401, no run under it, no webhook to the URL it named', async () => {
    const chosen = newRunId();
    const hooked = await WebhookReceiver.start();
    try {
      const query = `async=true&webhookEndpoint=${encodeURIComponent(hooked.at().href)}`;
      for (const held of ['forged', 'valid'] as const) {
        const { answer } = await handOver('e2e/nope', { held, runId: chosen, token: null, query });
        expect(answer.status).toBe(401);
      }
      expect(await listed('e2e', chosen)).toBeNull();
      // A run that succeeds reaches its webhook: had the refusals been posted, they would be there before it.
      const { answer } = await handOver('e2e/echo', { held: 'absent', query });
      expect(answer.status).toBe(202);
      const { run_id: runId } = (await answer.json()) as { run_id: string };
      await waitFor(() => hooked.deliveries.some((delivery) => delivery.body.includes(runId)), { what: 'the webhook of a genuine run' });
      expect(hooked.deliveries).toHaveLength(1);
    } finally {
      await hooked.close();
    }
  });

  it("a header signed with another namespace's key names no run: with a token, the call runs under a new id", async () => {
    const chosen = newRunId();
    const { answer } = await handOver('e2e/echo', { held: 'forged', runId: chosen });
    expect(answer.status).toBe(202);
    expect(((await answer.json()) as { run_id: string }).run_id).not.toBe(chosen);
    expect(await listed('e2e', chosen)).toBeNull();
  });

  it("a genuine header replayed with another body: refused (403), nothing recorded under its run id", async () => {
    const runId = newRunId();
    const token = await validToken();
    const { header } = await heldCall('e2e/greet', { runId, body: '{"name":"Genuine"}', token });
    // The caller's own token, so that only the body differs from what the header was signed for.
    const { answer } = await handOver('e2e/greet', { header, body: '{"name":"Replayed"}', token });
    expect(answer.status).toBe(403);
    expect(((await answer.json()) as { type: string }).type).toBe('https://runlet.dev/problems#held-body-mismatch');
    expect(await listed('e2e', runId)).toBeNull();
    // The genuine hand-over still gets through under it.
    const genuine = await handOver('e2e/greet', { header, body: '{"name":"Genuine"}', token });
    expect(genuine.answer.status).toBe(202);
    await waitFor(async () => (await listed('e2e', runId))?.status === 'success', { what: 'the genuine run' });
  });

  it("a genuine header replayed without a token, or with another caller's: 401, the run not overwritten", async () => {
    const victim = await victimRun();
    expect((await handOver('e2e/greet', { header: victim.header, body: '{"name":"Victim"}', token: null })).answer.status).toBe(401);
    const other = await signLocalToken({ projectId: 'dev', key: PROJECT_KEYS.dev, expiresIn: '2h' });
    const replayed = await handOver('e2e/greet', { header: victim.header, body: '{"name":"Victim"}', token: other });
    // Another caller's token: the header vouches for nothing, and the call is an ordinary one under a new id.
    expect(replayed.answer.headers.get('x-request-id')).not.toBe(victim.runId);
    await expectUntouched(victim.runId);
  });

  it('a genuine header replayed as it was, after its hand-over: 409, the run not overwritten', async () => {
    const victim = await victimRun();
    const { answer } = await handOver('e2e/greet', { header: victim.header, body: '{"name":"Victim"}', token: victim.token });
    expect(answer.status).toBe(409);
    expect(((await answer.json()) as { type: string }).type).toBe('https://runlet.dev/problems#held-run-taken');
    await expectUntouched(victim.runId);
  });

  it('two copies of one hand-over arriving together: one is accepted, the other refused (409)', async () => {
    const runId = newRunId();
    const options = { runId, body: '{"name":"Twice"}', token: await validToken() };
    const { header } = await heldCall('e2e/greet', options);
    const answers = await Promise.all([handOver('e2e/greet', { ...options, header }), handOver('e2e/greet', { ...options, header })]);
    expect(answers.map(({ answer }) => answer.status).sort()).toEqual([202, 409]);
    await waitFor(async () => (await listed('e2e', runId))?.status === 'success', { what: 'the run' });
    await deliveryOf(runId);
    expect(receiver.deliveries.filter((delivery) => delivery.body.includes(runId))).toHaveLength(1);
  });

  it('a hand-over refused with nothing recorded (503) gives its run id back: the next attempt is accepted', async () => {
    const runId = newRunId();
    expect((await handOver('idle/echo', { runId })).answer.status).toBe(503);
    // Another app's call under the same id stands for the holder's next attempt, with a replica that can run it.
    expect((await handOver('e2e/echo', { runId })).answer.status).toBe(202);
  });
});

describe('an async call the holder kept without its token (it authenticated the caller when it took the call)', () => {
  /** The hand-over as the holder makes it from its record: no Authorization header; the header signed with `key`. */
  async function verifiedHandOver(path: string, options: { runId?: string; body?: string; key?: Uint8Array; header?: string } = {}) {
    const runId = options.runId ?? newRunId();
    const url = `/v4/dev/${path}?${webhookQuery()}`;
    const body = options.body ?? '{}';
    const header = options.header ?? verifiedHeldRunHeader(options.key ?? HOLDER_KEY, { runId, coldStartMs: COLD_START_MS }, { method: 'POST', url }, Buffer.from(body));
    const answer = await fetch(`${sidecar.url}${url}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-webhook-secret': SECRET, [HELD_RUN_HEADER]: header }, body });
    return { answer, runId, header };
  }

  it('runs under its run id with no token asked for, its webhook signed', async () => {
    const { answer, runId } = await verifiedHandOver('e2e/greet', { body: '{"name":"Kept"}' });
    expect(answer.status, await answer.clone().text()).toBe(202);
    expect(await answer.json()).toEqual({ run_id: runId });
    const delivery = await deliveryOf(runId);
    expect(verifyWebhookSignature(SECRET, delivery.headers, delivery.body)).toBe(true);
    expect(JSON.parse(delivery.body)).toMatchObject({ status: 'success', result: { greeting: 'Hello, Kept!' } });
    expect(await listed('e2e', runId)).toMatchObject({ status: 'success', coldStartMs: COLD_START_MS });
  });

  it('a refusal of the call itself becomes its failed run, as for a hand-over with a token', async () => {
    const { answer, runId } = await verifiedHandOver('e2e/nope');
    expect(answer.status).toBe(202);
    expect(await listed('e2e', runId)).toMatchObject({ status: 'failure', statusCode: 404, coldStartMs: COLD_START_MS });
  });

  it("signed with another namespace's key: vouches for nothing, and with no token the call is refused (401), nothing recorded", async () => {
    const { answer, runId } = await verifiedHandOver('e2e/nope', { key: randomBytes(32) });
    expect(answer.status).toBe(401);
    expect(await listed('e2e', runId)).toBeNull();
  });

  it("a header bound to a caller's token, made to say `verified`: vouches for nothing (401), nothing recorded", async () => {
    const runId = newRunId();
    const { header } = await heldCall('e2e/nope', { runId });
    const [id, ms, issued, digest, signature] = header!.split(';');
    const { answer } = await verifiedHandOver('e2e/nope', { runId, header: `${id};${ms};${issued};${digest};verified;${signature}` });
    expect(answer.status).toBe(401);
    expect(await listed('e2e', runId)).toBeNull();
  });

  it('replayed with another body: refused (403), nothing recorded; replayed as it was after its hand-over: 409, the run not overwritten', async () => {
    const runId = newRunId();
    const url = `/v4/dev/e2e/greet?${webhookQuery()}`;
    const header = verifiedHeldRunHeader(HOLDER_KEY, { runId, coldStartMs: COLD_START_MS }, { method: 'POST', url }, Buffer.from('{"name":"Once"}'));
    const otherBody = await verifiedHandOver('e2e/greet', { header, body: '{"name":"Twice"}' });
    expect(otherBody.answer.status).toBe(403);
    expect(await listed('e2e', runId)).toBeNull();
    expect((await verifiedHandOver('e2e/greet', { header, body: '{"name":"Once"}' })).answer.status).toBe(202);
    await waitFor(async () => (await listed('e2e', runId))?.status === 'success', { what: 'the run' });
    const again = await verifiedHandOver('e2e/greet', { header, body: '{"name":"Once"}' });
    expect(again.answer.status).toBe(409);
    expect(await listed('e2e', runId)).toMatchObject({ status: 'success', statusCode: 200 });
    expect(JSON.parse((await deliveryOf(runId)).body)).toMatchObject({ status: 'success', result: { greeting: 'Hello, Once!' } });
    expect(receiver.deliveries.filter((delivery) => delivery.body.includes(runId))).toHaveLength(1);
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
