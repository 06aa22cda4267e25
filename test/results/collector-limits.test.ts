// The collector holds no body it has not admitted (issue 31, finding 7): a request without a token it takes is
// answered as it arrives and its connection closed, while its sender is still sending; the bodies of admitted
// requests, across every connection, stay within the byte budget, counted as they arrive (not as declared); a body
// that stops arriving is cut (408); and namespaces that fill the budget with batches they never finish cannot keep
// another namespace's batch out: the budget is shared fairly, cutting the largest holder's unfinished batch.
// Over raw sockets on loopback, so the test decides exactly how much of each body is sent and when.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BATCH_BYTES } from '../../results/batch-limits.ts';
import type { BodyPace } from '../../results/body-intake.ts';
import { ByteBudget } from '../../results/byte-budget.ts';
import { resultsCollector } from '../../results/collector.ts';
import { openResults, type OpenResults } from '../../results/open.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { RawConnection, type RawAnswer } from '../support/raw-http.ts';
import { identifyTestToken, resultsTokenOf } from '../support/results-tokens.ts';
import { runRecord } from '../support/sqlite-run-records.ts';
import { waitFor } from '../support/wait.ts';

const PATH = '/v1/results/demo/runs';
/** Long enough for an answer on a loaded machine; an answer that waits for the whole body never comes in it. */
const ANSWER_TIMEOUT_MS = 10_000;

let postgres: PostgresServer;
let results: OpenResults;

beforeAll(async () => {
  postgres = await startPostgres();
  results = await openResults({ dsn: postgres.dsn(await postgres.createDatabase('limits')), logger: testLogger() });
});

afterAll(async () => {
  await results?.close();
  await postgres?.stop();
});

async function startCollector(options: { maxBatchBytes?: number; budget?: ByteBudget; pace?: BodyPace } = {}): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  await app.register(resultsCollector, { store: results.store, identify: identifyTestToken, ...options });
  return { app, url: await app.listen({ host: '127.0.0.1', port: 0 }) };
}

function head(length: number, authorization?: string, path = PATH): string {
  return `POST ${path} HTTP/1.1\r\nHost: collector\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${authorization === undefined ? '' : `Authorization: ${authorization}\r\n`}\r\n`;
}

/** The next answer on the connection, or a failure once ANSWER_TIMEOUT_MS pass without one. */
function answerWithin(connection: RawConnection): Promise<RawAnswer> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms while the body was still being sent`)), ANSWER_TIMEOUT_MS);
  });
  return Promise.race([connection.next(), timeout]).finally(() => clearTimeout(timer));
}

const batches = new Map<string, Buffer>();
/** A batch of App `limits`'s record run by `pod` in `namespace`, padded with JSON whitespace to exactly `length` bytes (the same for the same arguments). */
function batchOf(length: number, pod = 'test-host', namespace = 'demo'): Buffer {
  const key = `${length}/${pod}/${namespace}`;
  let batch = batches.get(key);
  if (batch === undefined) {
    const text = JSON.stringify({ records: [runRecord({ projectId: namespace, appName: 'limits', replica: pod })] });
    batches.set(key, (batch = Buffer.from(text + ' '.repeat(length - Buffer.byteLength(text)))));
  }
  return batch;
}

/** A pace no test waits out: only what the test is about cuts a body. */
const UNHURRIED: BodyPace = { minBytesPerSecond: 1, graceMs: 10 * 60_000, windowMs: 60_000 };

describe('the results collector before it reads a body', () => {
  it.each([
    ['no token', undefined],
    ['a token it does not take', 'Bearer stolen-or-expired'],
    ['another scheme', `Basic ${Buffer.from('demo:x').toString('base64')}`],
  ])('answers a batch of the largest size with %s at once, while its sender is still sending, and closes the connection', async (_case, authorization) => {
    const collector = await startCollector();
    const connection = await RawConnection.open(collector.url);
    try {
      // The head and the first 64 KiB of a body of the largest size taken: the rest is never sent.
      connection.write(head(MAX_BATCH_BYTES, authorization));
      connection.write(Buffer.alloc(64 * 1024, 0x20));
      const answer = await answerWithin(connection);
      expect(answer.status).toBe(401);
      expect(answer.headers.connection).toBe('close');
      await connection.closedByServer();
    } finally {
      connection.close();
      await collector.app.close();
    }
  });

  it('refuses a body larger than a batch by its declared length, unread, even with a valid token', async () => {
    const collector = await startCollector();
    const connection = await RawConnection.open(collector.url);
    try {
      connection.write(head(MAX_BATCH_BYTES + 1, `Bearer ${resultsTokenOf('limits')}`));
      const answer = await answerWithin(connection);
      expect(answer.status).toBe(413);
      await connection.closedByServer();
    } finally {
      connection.close();
      await collector.app.close();
    }
  });

  it.each([
    ['text/plain', 'text/plain'],
    ['text/plain with a charset', 'text/plain; charset=utf-8'],
    ['a type it has no parser for', 'application/octet-stream'],
  ])('refuses a body of %s at once, unread and uncounted, while its sender is still sending, even with a valid token', async (_case, contentType) => {
    // Fastify reads a text/plain body whole into memory with its own parser, outside the byte budget and the pace:
    // an admitted sender could hold a batch's size per connection, as many connections as it likes.
    const collector = await startCollector();
    const connection = await RawConnection.open(collector.url);
    try {
      connection.write(head(MAX_BATCH_BYTES, `Bearer ${resultsTokenOf('limits')}`).replace('Content-Type: application/json', `Content-Type: ${contentType}`));
      connection.write(Buffer.alloc(64 * 1024, 0x20));
      const answer = await answerWithin(connection);
      expect(answer.status).toBe(415);
      expect(answer.headers.connection).toBe('close');
      await connection.closedByServer();
    } finally {
      connection.close();
      await collector.app.close();
    }
  });

  it('counts the bytes that arrived, not those declared: twenty batches of the largest size that have sent a byte hold twenty bytes, and another pod\'s batch is taken at once', async () => {
    const batchBytes = 1024 * 1024;
    const budget = new ByteBudget(3 * batchBytes, batchBytes);
    const collector = await startCollector({ maxBatchBytes: batchBytes, budget, pace: UNHURRIED });
    const senders = await Promise.all(Array.from({ length: 20 }, () => RawConnection.open(collector.url)));
    try {
      const answered: RawConnection[] = [];
      for (const sender of senders) {
        sender.write(head(batchBytes, `Bearer ${resultsTokenOf('limits')}`));
        sender.write('{');
        void sender.next().then(() => answered.push(sender), () => undefined);
      }
      await waitFor(() => budget.inUse === senders.length, { what: 'one byte of each batch held', timeoutMs: ANSWER_TIMEOUT_MS });
      expect(answered).toEqual([]);
      // A whole batch of the same namespace's: taken, though twenty batches of the largest size are under way.
      const whole = await RawConnection.open(collector.url);
      try {
        whole.write(head(batchBytes, `Bearer ${resultsTokenOf('limits', 'other-pod')}`));
        whole.write(batchOf(batchBytes, 'other-pod'));
        expect(await answerWithin(whole)).toMatchObject({ status: 200 });
      } finally {
        whole.close();
      }
      expect(budget.peak).toBeLessThanOrEqual(senders.length + batchBytes);
    } finally {
      for (const sender of senders) sender.close();
      await collector.app.close();
    }
  });

  it('holds at most its byte budget of bodies however many pods send whole batches at once: the others are answered 503 + Retry-After, and the taken land', async () => {
    const batchBytes = 1024 * 1024;
    const budget = new ByteBudget(3 * batchBytes, batchBytes);
    const collector = await startCollector({ maxBatchBytes: batchBytes, budget });
    const senders = await Promise.all(Array.from({ length: 12 }, () => RawConnection.open(collector.url)));
    try {
      const answers = await Promise.all(senders.map((sender, index) => {
        sender.write(head(batchBytes, `Bearer ${resultsTokenOf('limits', `pod-${index}`)}`));
        sender.write(batchOf(batchBytes, `pod-${index}`));
        return answerWithin(sender);
      }));
      for (const answer of answers) {
        expect([200, 503]).toContain(answer.status);
        if (answer.status === 503) expect(answer.headers['retry-after']).toBe('1');
      }
      expect(answers.some((answer) => answer.status === 200)).toBe(true);
      expect(budget.peak).toBeLessThanOrEqual(budget.limit);
      await waitFor(() => budget.inUse === 0, { what: 'the budget given back' });
    } finally {
      for (const sender of senders) sender.close();
      await collector.app.close();
    }
  }, 60_000);

  it('counts a chunked body (no length) as it arrives, and refuses it 413 at the first chunk past the largest batch', async () => {
    const batchBytes = 256 * 1024;
    const budget = new ByteBudget(4 * batchBytes, batchBytes);
    const collector = await startCollector({ maxBatchBytes: batchBytes, budget, pace: UNHURRIED });
    const connection = await RawConnection.open(collector.url);
    try {
      connection.write(`POST ${PATH} HTTP/1.1\r\nHost: collector\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer ${resultsTokenOf('limits')}\r\n\r\n`);
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      connection.write(`${chunk.length.toString(16)}\r\n`);
      connection.write(chunk);
      connection.write('\r\n');
      await waitFor(() => budget.inUse === chunk.length, { what: 'the first chunk held', timeoutMs: ANSWER_TIMEOUT_MS });
      for (let sent = chunk.length; sent <= batchBytes; sent += chunk.length) connection.write(`${chunk.length.toString(16)}\r\n${chunk.toString('latin1')}\r\n`);
      const answer = await answerWithin(connection);
      expect(answer.status).toBe(413);
      expect(answer.headers.connection).toBe('close');
      await waitFor(() => budget.inUse === 0, { what: 'its bytes given back' });
      expect(budget.peak).toBeLessThanOrEqual(batchBytes);
    } finally {
      connection.close();
      await collector.app.close();
    }
  });

  it('answers 408 to a body that stops arriving after its grace, closes the connection and gives its bytes back', async () => {
    const budget = new ByteBudget(4 * 1024 * 1024, 1024 * 1024);
    const collector = await startCollector({ maxBatchBytes: 1024 * 1024, budget, pace: { minBytesPerSecond: 1024, graceMs: 200, windowMs: 200 } });
    const connection = await RawConnection.open(collector.url);
    try {
      connection.write(head(1024 * 1024, `Bearer ${resultsTokenOf('limits')}`));
      connection.write(Buffer.alloc(10, 0x20));
      const answer = await answerWithin(connection);
      expect(answer.status).toBe(408);
      expect(answer.headers.connection).toBe('close');
      await connection.closedByServer();
      await waitFor(() => budget.inUse === 0, { what: 'its bytes given back' });
    } finally {
      connection.close();
      await collector.app.close();
    }
  });

  it('cuts hostile namespaces\' batches that trickle below the least rate (408, bytes given back), while a third namespace\'s batch is taken at once', async () => {
    const batchBytes = 1024 * 1024;
    const budget = new ByteBudget(4 * batchBytes, batchBytes);
    const collector = await startCollector({ maxBatchBytes: batchBytes, budget, pace: { minBytesPerSecond: 4096, graceMs: 300, windowMs: 300 } });
    const tricklers: RawConnection[] = [];
    const answers: RawAnswer[] = [];
    // Each trickler sends a byte every 20 ms: 50 bytes a second, far below the least rate.
    const trickle = setInterval(() => {
      for (const sender of tricklers) sender.write(' ');
    }, 20);
    try {
      for (const namespace of ['team-a', 'team-b']) {
        for (let i = 0; i < 5; i += 1) {
          const sender = await RawConnection.open(collector.url);
          sender.write(head(batchBytes, `Bearer ${resultsTokenOf('limits', `trickle-${i}`, namespace)}`, `/v1/results/${namespace}/runs`));
          sender.write('{"records":[');
          void sender.next().then((answer) => answers.push(answer), () => undefined);
          tricklers.push(sender);
        }
      }
      const third = await RawConnection.open(collector.url);
      try {
        third.write(head(batchBytes, `Bearer ${resultsTokenOf('limits', 'p1', 'team-c')}`, '/v1/results/team-c/runs'));
        third.write(batchOf(batchBytes, 'p1', 'team-c'));
        expect(await answerWithin(third)).toMatchObject({ status: 200 });
      } finally {
        third.close();
      }
      await waitFor(() => answers.length === tricklers.length, { what: 'every trickler cut', timeoutMs: ANSWER_TIMEOUT_MS });
      for (const answer of answers) expect(answer).toMatchObject({ status: 408, headers: { connection: 'close' } });
      await waitFor(() => budget.inUse === 0, { what: 'their bytes given back' });
      expect(budget.peak).toBeLessThanOrEqual(budget.limit);
    } finally {
      clearInterval(trickle);
      for (const sender of tricklers) sender.close();
      await collector.app.close();
    }
  });

  it('takes a third namespace\'s batch at once while two hostile namespaces hold the whole budget with batches they stopped sending, and trickle others of the largest size', async () => {
    const batchBytes = 1024 * 1024;
    /** What each stalled batch leaves unsent: room for the trickled bytes, none for a third namespace's batch. */
    const SLACK = 8;
    const budget = new ByteBudget(4 * batchBytes, batchBytes);
    // No pace: only fairness may make the room.
    const collector = await startCollector({ maxBatchBytes: batchBytes, budget, pace: UNHURRIED });
    const hostile: RawConnection[] = [];
    const cut: RawAnswer[] = [];
    const open = async (namespace: string, pod: string): Promise<RawConnection> => {
      const sender = await RawConnection.open(collector.url);
      sender.write(head(batchBytes, `Bearer ${resultsTokenOf('limits', pod, namespace)}`, `/v1/results/${namespace}/runs`));
      return sender;
    };
    try {
      for (const namespace of ['team-a', 'team-b']) {
        // Two pods each send all of a batch of the largest size but its last bytes, and stop: half the budget each.
        for (const pod of ['p1', 'p2']) {
          const sender = await open(namespace, pod);
          sender.write(batchOf(batchBytes, pod, namespace).subarray(0, batchBytes - SLACK));
          void sender.next().then((answer) => cut.push(answer), () => undefined);
          hostile.push(sender);
        }
        await waitFor(() => budget.heldBy(namespace) === 2 * (batchBytes - SLACK), { what: `${namespace} holding half the budget`, timeoutMs: ANSWER_TIMEOUT_MS });
      }
      // And five more each, declaring the largest size and sending a byte.
      for (const namespace of ['team-a', 'team-b']) {
        for (let i = 0; i < 5; i += 1) {
          const sender = await open(namespace, `trickle-${i}`);
          sender.write('{');
          void sender.next().then((answer) => cut.push(answer), () => undefined);
          hostile.push(sender);
        }
      }
      await waitFor(() => budget.inUse === budget.limit - 4 * SLACK + 10, { what: 'the trickled bytes held', timeoutMs: ANSWER_TIMEOUT_MS });
      expect(cut).toEqual([]);
      // team-c's batch, of the largest size: taken at once, each hostile sender's connection still open.
      const third = await open('team-c', 'p1');
      try {
        third.write(batchOf(batchBytes, 'p1', 'team-c'));
        expect(await answerWithin(third)).toMatchObject({ status: 200 });
      } finally {
        third.close();
      }
      expect(await results.store.getRun('team-c', 'limits', JSON.parse(batchOf(batchBytes, 'p1', 'team-c').toString()).records[0].id)).toBeDefined();
      expect(budget.peak).toBeLessThanOrEqual(budget.limit);
      // What made the room: one of the stalled hostile batches, cut and told to come again.
      await waitFor(() => cut.length >= 1, { what: 'a hostile batch cut', timeoutMs: ANSWER_TIMEOUT_MS });
      for (const answer of cut) expect(answer).toMatchObject({ status: 503, headers: { 'retry-after': '1', connection: 'close' } });
      expect(budget.preemptions).toBeGreaterThanOrEqual(1);
    } finally {
      for (const sender of hostile) sender.close();
      await collector.app.close();
    }
  }, 60_000);
});
