import { createHmac, timingSafeEqual } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { WebhookReceiver, type ReceivedDelivery, type ScriptedAnswer } from '../../test/support/webhook-receiver.ts';
import { WebhookDeliverer, systemClock } from './deliver.ts';
import type { AttemptReport, DelivererOptions, DeliveryClock, WebhookDelivery } from './deliver.ts';
import { LOOPBACK_CIDRS } from './guard.ts';
import { buildWebhookBody } from './payload.ts';
import { MAX_GAP_MS } from './retry-policy.ts';
import { WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER, WebhookSigner } from './sign.ts';

// Bound on any wait for an event; generous for a loaded 2-core machine.
const EVENT_BOUND_MS = 15_000;

/** A receiver answering attempt n with script[n] (200 once the script runs out), closed after the test. */
async function startReceiver(script: ScriptedAnswer[] = []): Promise<WebhookReceiver> {
  const receiver = await WebhookReceiver.start(script);
  receivers.push(receiver);
  return receiver;
}

const receivers: WebhookReceiver[] = [];
const deliverers: WebhookDeliverer[] = [];

afterEach(async () => {
  await Promise.all(deliverers.splice(0).map((deliverer) => deliverer.close()));
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});

/** Waits between attempts are recorded, not waited; jitter is always the maximum. */
function instantClock(nowMs: () => number = () => Date.now()): DeliveryClock & { sleeps: number[] } {
  const sleeps: number[] = [];
  return {
    sleeps,
    nowMs,
    random: () => 0.999_999,
    sleep: async (ms, signal) => {
      sleeps.push(ms);
      signal.throwIfAborted();
    },
  };
}

function deliverer(options: DelivererOptions = {}): WebhookDeliverer {
  const created = new WebhookDeliverer({ allowCidrs: LOOPBACK_CIDRS, clock: instantClock(), ...options });
  deliverers.push(created);
  return created;
}

const RUN_ID = '0193a7c2-3f1e-7000-8000-00000000abcd';
const BODY = buildWebhookBody({
  runId: RUN_ID,
  status: 'success',
  statusCode: 200,
  resultJson: '{"answer":42}',
  runTimeMs: 12,
  completedAt: new Date('2026-03-01T00:00:00Z'),
});

function delivery(endpoint: URL, extra: Partial<WebhookDelivery> = {}): WebhookDelivery {
  return { runId: RUN_ID, endpoint, body: BODY, signer: null, ...extra };
}

describe('delivery and the retry table', () => {
  it('retries a 404 and is delivered by the 2nd attempt', async () => {
    const receiver = await startReceiver([{ status: 404 }, { status: 200 }]);
    const outcome = await deliverer().deliver(delivery(receiver.at('/hooks/in?token=abc')));

    expect(outcome).toEqual({ state: 'delivered', attempts: 2, lastStatusCode: 200, lastError: null });
    expect(receiver.deliveries).toHaveLength(2);
    for (const request of receiver.deliveries) {
      expect(request.method).toBe('POST');
      expect(request.path).toBe('/hooks/in?token=abc');
      expect(request.headers['content-type']).toBe('application/json');
      expect(request.headers['x-request-id']).toBe(RUN_ID);
      expect(request.headers[WEBHOOK_SIGNATURE_HEADER]).toBeUndefined();
      expect(request.headers[WEBHOOK_TIMESTAMP_HEADER]).toBeUndefined();
      expect(request.body).toBe(BODY);
    }
  });

  it.each([
    [500, 1],
    [503, 1],
    [400, 1],
    [410, 1],
    [404, 3],
  ])('HTTP %i every time: failed after %i attempt(s)', async (status, attempts) => {
    const receiver = await startReceiver([{ status }, { status }, { status }]);
    const outcome = await deliverer().deliver(delivery(receiver.at()));

    expect(outcome).toEqual({ state: 'failed', attempts, lastStatusCode: status, lastError: `receiver answered HTTP ${status}` });
    expect(receiver.deliveries).toHaveLength(attempts);
  });

  it('retries a 302 three times and never follows it', async () => {
    const redirectTarget = await startReceiver();
    const redirect = { status: 302, headers: { location: redirectTarget.at('/elsewhere').href } };
    const receiver = await startReceiver([redirect, redirect, redirect]);
    const outcome = await deliverer().deliver(delivery(receiver.at()));

    expect(outcome).toEqual({ state: 'failed', attempts: 3, lastStatusCode: 302, lastError: 'receiver answered HTTP 302' });
    expect(receiver.deliveries).toHaveLength(3);
    expect(redirectTarget.connections).toBe(0);
  });

  it('retries a reset connection', async () => {
    const receiver = await startReceiver(['reset', 'reset', { status: 204 }]);
    const outcome = await deliverer().deliver(delivery(receiver.at()));

    expect(outcome).toEqual({ state: 'delivered', attempts: 3, lastStatusCode: 204, lastError: null });
    expect(receiver.deliveries).toHaveLength(3);
  });

  it('reports a connection failure on the last attempt', async () => {
    const receiver = await startReceiver(['reset', 'reset', 'reset']);
    const outcome = await deliverer().deliver(delivery(receiver.at()));

    expect(outcome.state).toBe('failed');
    expect(outcome.attempts).toBe(3);
    expect(outcome.lastStatusCode).toBeNull();
    expect(outcome.lastError).toMatch(/UND_ERR_SOCKET|ECONNRESET/);
  });

  it('times out a hanging receiver and retries it', async () => {
    const receiver = await startReceiver(['hang', 'hang', 'hang']);
    const outcome = await deliverer({ attemptTimeoutMs: 300 }).deliver(delivery(receiver.at()));

    expect(outcome).toEqual({ state: 'failed', attempts: 3, lastStatusCode: null, lastError: 'no answer within 300 ms' });
    expect(receiver.deliveries).toHaveLength(3);
  });

  it('is delivered when a hanging attempt is followed by an answer', async () => {
    const receiver = await startReceiver(['hang', { status: 200 }]);
    // Long enough for the answering attempt to complete on a loaded machine.
    const outcome = await deliverer({ attemptTimeoutMs: 2_000 }).deliver(delivery(receiver.at()));

    expect(outcome).toEqual({ state: 'delivered', attempts: 2, lastStatusCode: 200, lastError: null });
  });

  it('reads a large answer body only up to the cap and stays usable', async () => {
    const receiver = await startReceiver([{ status: 200, body: 'x'.repeat(1024 * 1024) }, { status: 200 }]);
    const webhooks = deliverer({ responseBodyLimitBytes: 1024 });

    expect((await webhooks.deliver(delivery(receiver.at()))).state).toBe('delivered');
    expect((await webhooks.deliver(delivery(receiver.at()))).state).toBe('delivered');
  });

  it('reuses one keep-alive connection across deliveries to the same receiver', async () => {
    const receiver = await startReceiver();
    const webhooks = deliverer();
    for (let run = 0; run < 10; run += 1) {
      expect((await webhooks.deliver(delivery(receiver.at()))).state).toBe('delivered');
    }
    // undici's pool may open a second socket while the first is still being marked free; never one per delivery.
    expect(receiver.connections).toBeLessThanOrEqual(2);
  });

  it('sends userinfo of the endpoint as Basic authorization', async () => {
    const receiver = await startReceiver();
    await deliverer().deliver(delivery(new URL(`http://hook-user:p%40ss@127.0.0.1:${receiver.port}/in`)));

    expect(receiver.deliveries[0]?.headers.authorization).toBe(`Basic ${Buffer.from('hook-user:p@ss').toString('base64')}`);
  });
});

describe('signed deliveries', () => {
  const SECRET = 'whsec_test-secret';

  // What a receiver does (spec 6.2): strip `v1,`, HMAC over `id.timestamp.body`, hex, constant-time compare.
  function verifies(request: ReceivedDelivery, body = request.body): boolean {
    const header = String(request.headers[WEBHOOK_SIGNATURE_HEADER] ?? '');
    const received = Buffer.from(header.slice(header.indexOf(',') + 1));
    const signedContent = `${String(request.headers['x-request-id'])}.${String(request.headers[WEBHOOK_TIMESTAMP_HEADER])}.${body}`;
    const expected = Buffer.from(createHmac('sha256', SECRET).update(signedContent).digest('hex'));
    return received.length === expected.length && timingSafeEqual(received, expected);
  }

  it('signs every attempt afresh with its own sending time, verifiable by the receiver', async () => {
    const receiver = await startReceiver([{ status: 404 }, 'reset', { status: 200 }]);
    let now = 1_700_000_000_000;
    const clock = instantClock(() => (now += 7_000));
    const outcome = await deliverer({ clock }).deliver(delivery(receiver.at(), { signer: new WebhookSigner(SECRET) }));

    expect(outcome.state).toBe('delivered');
    expect(receiver.deliveries).toHaveLength(3);
    expect(receiver.deliveries.map((request) => request.headers[WEBHOOK_TIMESTAMP_HEADER])).toEqual(['1700000007', '1700000014', '1700000021']);
    for (const request of receiver.deliveries) {
      expect(request.headers[WEBHOOK_SIGNATURE_HEADER]).toMatch(/^v1,[0-9a-f]{64}$/);
      expect(verifies(request)).toBe(true);
      expect(verifies(request, request.body.replace('42', '43'))).toBe(false);
    }
    expect(new Set(receiver.deliveries.map((request) => request.headers[WEBHOOK_SIGNATURE_HEADER])).size).toBe(3);
  });

  it('keeps the secret out of what a log line of the delivery or its outcome would show', async () => {
    const receiver = await startReceiver([{ status: 500 }]);
    const signed = delivery(receiver.at(), { signer: new WebhookSigner(SECRET) });
    const reports: AttemptReport[] = [];
    const outcome = await deliverer().deliver({ ...signed, onAttempt: (report) => reports.push(report) });

    for (const shown of [JSON.stringify(signed), inspect(signed, { depth: 10 }), JSON.stringify(outcome), JSON.stringify(reports)]) {
      expect(shown).not.toContain(SECRET);
    }
  });
});

describe('waiting between attempts', () => {
  it('waits about 1 s then about 2 s with the default schedule, never more than 5 s', async () => {
    const receiver = await startReceiver([{ status: 404 }, { status: 404 }, { status: 404 }]);
    const outcome = await deliverer({ clock: systemClock }).deliver(delivery(receiver.at()));

    expect(outcome.attempts).toBe(3);
    const [first, second, third] = receiver.deliveries.map((request) => request.receivedAt);
    const gaps = [second! - first!, third! - second!];
    // Lower bounds show the wait happens; the upper bound is the spec's, with the loaded-machine margin
    // coming from the schedule (at most 2.5 s) being half of it.
    expect(gaps[0]).toBeGreaterThanOrEqual(950);
    expect(gaps[1]).toBeGreaterThanOrEqual(1_950);
    for (const gap of gaps) expect(gap).toBeLessThanOrEqual(MAX_GAP_MS);
  });

  it('never asks to wait more than 5 s, even when configured to', async () => {
    const receiver = await startReceiver(['reset', 'reset', 'reset']);
    const clock = instantClock();
    await deliverer({ clock, schedule: { delaysMs: [4_900, 60_000], maxJitterMs: 1_000 } }).deliver(delivery(receiver.at()));

    expect(clock.sleeps).toEqual([MAX_GAP_MS, MAX_GAP_MS]);
  });

  it('reports each attempt with the state to record and the wait that follows', async () => {
    const receiver = await startReceiver([{ status: 404 }, { status: 200 }]);
    const reports: AttemptReport[] = [];
    const schedule = { delaysMs: [1_000, 2_000] as const, maxJitterMs: 0 };
    await deliverer({ schedule }).deliver(delivery(receiver.at(), { onAttempt: (report) => reports.push(report) }));

    expect(reports.map(({ durationMs, connectionWaitMs, ...rest }) => rest)).toEqual([
      {
        runId: RUN_ID,
        attempt: 1,
        outcome: { kind: 'response', statusCode: 404 },
        nextDelayMs: 1_000,
        progress: { state: 'pending', attempts: 1, lastStatusCode: 404, lastError: 'receiver answered HTTP 404' },
      },
      {
        runId: RUN_ID,
        attempt: 2,
        outcome: { kind: 'response', statusCode: 200 },
        nextDelayMs: null,
        progress: { state: 'delivered', attempts: 2, lastStatusCode: 200, lastError: null },
      },
    ]);
    for (const report of reports) expect(report.durationMs).toBeGreaterThanOrEqual(0);
    for (const report of reports) expect(report.connectionWaitMs).toBeGreaterThanOrEqual(0);
  });
});

/** Rejects when `promise` has not settled within EVENT_BOUND_MS, so a broken expectation fails instead of hanging. */
async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`not within ${EVENT_BOUND_MS} ms: ${what}`)), EVENT_BOUND_MS);
  });
  try {
    return await Promise.race([promise, bound]);
  } finally {
    clearTimeout(timer);
  }
}

/** A clock whose waits between attempts last until the test releases them. */
function heldClock(): DeliveryClock & { waiting: Promise<void>; release: () => void } {
  let markWaiting!: () => void;
  let release!: () => void;
  const waiting = new Promise<void>((resolve) => (markWaiting = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    waiting,
    release,
    nowMs: () => Date.now(),
    random: () => 0,
    sleep: (_ms, signal) => {
      markWaiting();
      return new Promise<void>((resolve, reject) => {
        void released.then(resolve);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    },
  };
}

describe('pending deliveries, idle and close', () => {
  it('counts a delivery as pending until its last attempt, and idle() resolves after it', async () => {
    const receiver = await startReceiver([{ status: 404 }, { status: 200 }]);
    const clock = heldClock();
    const webhooks = deliverer({ clock });
    await webhooks.idle();

    const delivered = webhooks.deliver(delivery(receiver.at()));
    await within(clock.waiting, 'the deliverer waits to retry');
    expect(webhooks.pendingCount).toBe(1);
    let idle = false;
    const idled = webhooks.idle().then(() => (idle = true));
    await Promise.resolve();
    expect(idle).toBe(false);

    clock.release();
    await within(idled, 'idle() resolves');
    expect(webhooks.pendingCount).toBe(0);
    expect((await delivered).state).toBe('delivered');
  });

  it('close() abandons a delivery waiting to retry and records why', async () => {
    const receiver = await startReceiver([{ status: 404 }]);
    const clock = heldClock();
    const webhooks = new WebhookDeliverer({ allowCidrs: LOOPBACK_CIDRS, clock });

    const abandoned = webhooks.deliver(delivery(receiver.at()));
    await within(clock.waiting, 'the deliverer waits to retry');
    await webhooks.close();

    expect(await abandoned).toEqual({
      state: 'failed',
      attempts: 1,
      lastStatusCode: 404,
      lastError: 'delivery abandoned: the sidecar is shutting down (after: receiver answered HTTP 404)',
    });
    expect(webhooks.pendingCount).toBe(0);
    expect(await webhooks.deliver(delivery(receiver.at()))).toEqual({
      state: 'failed',
      attempts: 0,
      lastStatusCode: null,
      lastError: 'delivery abandoned: the sidecar is shutting down',
    });
  });

  it('close() ends an attempt in flight without retrying it', async () => {
    const receiver = await startReceiver(['hang']);
    const webhooks = new WebhookDeliverer({ allowCidrs: LOOPBACK_CIDRS, clock: instantClock() });

    const abandoned = webhooks.deliver(delivery(receiver.at()));
    await receiver.received(1);
    await webhooks.close();

    const outcome = await abandoned;
    expect(outcome.state).toBe('failed');
    expect(outcome.attempts).toBe(1);
    expect(outcome.lastError).toMatch(/^delivery abandoned: the sidecar is shutting down \(attempt: /);
    expect(receiver.deliveries).toHaveLength(1);
  });
});

describe('SSRF guard on delivery', () => {
  it('refuses a loopback receiver without an allow-list: failed, not retried, nothing connected', async () => {
    const receiver = await startReceiver();
    const outcome = await deliverer({ allowCidrs: [] }).deliver(delivery(receiver.at()));

    expect(outcome).toEqual({
      state: 'failed',
      attempts: 1,
      lastStatusCode: null,
      lastError: 'destination refused: 127.0.0.1 is loopback and not in the allow-list',
    });
    expect(receiver.connections).toBe(0);
  });

  it('refuses a name that resolves to a private address', async () => {
    const resolve = async () => [{ address: '10.20.30.40', family: 4 }];
    const outcome = await deliverer({ resolve }).deliver(delivery(new URL('http://hooks.internal.test:8080/in')));

    expect(outcome).toEqual({
      state: 'failed',
      attempts: 1,
      lastStatusCode: null,
      lastError:
        'destination refused: hooks.internal.test resolves to no admitted address (10.20.30.40 is private (RFC 1918) and not in the allow-list)',
    });
  });

  it('guards https destinations the same way (the lookup reaches tls.connect too)', async () => {
    const resolve = async () => [{ address: '169.254.169.254', family: 4 }];
    const outcome = await deliverer({ resolve }).deliver(delivery(new URL('https://metadata.internal.test/latest')));

    expect(outcome.attempts).toBe(1);
    expect(outcome.lastError).toMatch(/^destination refused: metadata\.internal\.test resolves to no admitted address \(169\.254\.169\.254 is link-local/);
  });

  it('connects only to the admitted address of a name that resolves to several', async () => {
    const receiver = await startReceiver();
    const resolve = async () => [
      { address: '10.0.0.7', family: 4 },
      { address: '169.254.169.254', family: 4 },
      { address: '127.0.0.1', family: 4 },
      { address: 'fd00::7', family: 6 },
    ];
    const sockets: Socket[] = [];
    const onConnected = (message: unknown): void => void sockets.push((message as { socket: Socket }).socket);
    diagnostics.subscribe('undici:client:connected', onConnected);
    try {
      const outcome = await deliverer({ resolve }).deliver(delivery(new URL(`http://hooks.example.test:${receiver.port}/in`)));
      expect(outcome).toEqual({ state: 'delivered', attempts: 1, lastStatusCode: 200, lastError: null });
    } finally {
      diagnostics.unsubscribe('undici:client:connected', onConnected);
    }

    expect(sockets.map((socket) => socket.remoteAddress)).toEqual(['127.0.0.1']);
    for (const socket of sockets) {
      for (const attempted of socket.autoSelectFamilyAttemptedAddresses ?? []) expect(attempted).toMatch(/^127\.0\.0\.1:/);
    }
    expect(receiver.deliveries[0]?.headers.host).toBe(`hooks.example.test:${receiver.port}`);
  });
});

/**
 * A receiver that answers 204 `delayMs` after each request arrived: slow, never failing. It counts requests per
 * run id and the most it was answering at once.
 */
async function startSlowReceiver(delayMs: number): Promise<{ url: URL; perRun: Map<string, number>; timestampLag: number[]; peak: () => number; close: () => Promise<void> }> {
  const perRun = new Map<string, number>();
  const timestampLag: number[] = [];
  let open = 0;
  let peak = 0;
  const server = createServer((request, response) => {
    const runId = String(request.headers['x-request-id']);
    perRun.set(runId, (perRun.get(runId) ?? 0) + 1);
    timestampLag.push(Date.now() / 1000 - Number(request.headers[WEBHOOK_TIMESTAMP_HEADER]));
    open += 1;
    peak = Math.max(peak, open);
    request.resume();
    setTimeout(() => {
      open -= 1;
      response.writeHead(204).end();
    }, delayMs);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/in`),
    perRun,
    timestampLag,
    peak: () => peak,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

describe('a receiver slower than the connection pool drains (issue 32)', () => {
  // Scaled down from the 2,000 deliveries, 128 connections and 8 s answers within a 10 s timeout: each
  // answer takes a tenth of the attempt timeout, and the last of the backlog waits about twice that timeout
  // for a connection.
  const POOL = 2;
  const ANSWER_DELAY_MS = 150;
  const ATTEMPT_TIMEOUT_MS = 1_500;
  const BACKLOG = 40;

  it('delivers each of a backlog well past the pool size exactly once, late but never failed', async () => {
    const receiver = await startSlowReceiver(ANSWER_DELAY_MS);
    try {
      const webhooks = deliverer({ connectionsPerOrigin: POOL, attemptTimeoutMs: ATTEMPT_TIMEOUT_MS });
      const reports: AttemptReport[] = [];
      const signer = new WebhookSigner('whsec_slow');
      const runIds = Array.from({ length: BACKLOG }, (_, index) => `run-${index}`);
      const outcomes = await Promise.all(
        runIds.map((runId) => webhooks.deliver({ runId, endpoint: receiver.url, body: BODY, signer, onAttempt: (report) => reports.push(report) })),
      );

      expect(outcomes.filter((outcome) => outcome.state === 'failed')).toEqual([]);
      expect(outcomes.every((outcome) => outcome.attempts === 1)).toBe(true);
      expect(runIds.map((runId) => receiver.perRun.get(runId))).toEqual(runIds.map(() => 1));
      expect(receiver.peak()).toBeLessThanOrEqual(POOL);
      // The queue wait was real (the last ones waited past the attempt timeout) and was not the attempt's time.
      expect(Math.max(...reports.map((report) => report.connectionWaitMs))).toBeGreaterThan(ATTEMPT_TIMEOUT_MS);
      for (const report of reports) expect(report.durationMs).toBeLessThan(ATTEMPT_TIMEOUT_MS);
      // Signed when sent, not when queued: a receiver's timestamp window sees the sending time.
      for (const lag of receiver.timestampLag) expect(lag).toBeLessThan(2);
    } finally {
      await receiver.close();
    }
  });

  it('bounds the wait for a connection separately: past it the attempt is a timeout, nothing sent', async () => {
    const receiver = await startReceiver(['hang']);
    const webhooks = deliverer({ connectionsPerOrigin: 1, connectionWaitLimitMs: 100, attemptTimeoutMs: 60_000 });
    // Hangs until afterEach closes the deliverer.
    void webhooks.deliver(delivery(receiver.at(), { runId: 'holds-the-connection' }));
    await receiver.received(1);

    const reports: AttemptReport[] = [];
    const outcome = await webhooks.deliver(delivery(receiver.at(), { runId: 'waits', onAttempt: (report) => reports.push(report) }));
    expect(outcome).toEqual({
      state: 'failed',
      attempts: 3,
      lastStatusCode: null,
      lastError: 'not sent: no connection to the receiver came free within 100 ms',
    });
    for (const report of reports) expect(report.connectionWaitMs).toBeGreaterThanOrEqual(90);
    expect(receiver.deliveries.map((request) => request.headers['x-request-id'])).toEqual(['holds-the-connection']);
  });

  it('close() abandons an attempt waiting for a connection without sending it', async () => {
    const receiver = await startReceiver(['hang']);
    const webhooks = new WebhookDeliverer({ allowCidrs: LOOPBACK_CIDRS, clock: instantClock(), connectionsPerOrigin: 1 });
    const holding = webhooks.deliver(delivery(receiver.at(), { runId: 'holds-the-connection' }));
    await receiver.received(1);
    const waiting = webhooks.deliver(delivery(receiver.at(), { runId: 'waits' }));

    await webhooks.close();
    expect(await waiting).toEqual({
      state: 'failed',
      attempts: 1,
      lastStatusCode: null,
      lastError: 'delivery abandoned: the sidecar is shutting down (attempt: not sent: it was waiting for a connection to the receiver)',
    });
    expect((await holding).state).toBe('failed');
    expect(receiver.deliveries).toHaveLength(1);
  });
});
