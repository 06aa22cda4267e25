// The collector holds no body it has not admitted (issue 31, finding 7): a request without a token it takes is
// answered as it arrives and its connection closed, while its sender is still sending; and the bodies of admitted
// requests, across every connection, stay within the byte budget (past it: 503 + Retry-After, body unread).
// Over raw sockets on loopback, so the test decides exactly how much of each body is sent and when.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BATCH_BYTES } from '../../results/batch-limits.ts';
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

async function startCollector(options: { maxBatchBytes?: number; budget?: ByteBudget } = {}): Promise<{ app: FastifyInstance; url: string }> {
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

/** A batch of App `limits`'s record, padded with JSON whitespace to exactly `length` bytes. */
function batchOf(length: number): Buffer {
  const text = JSON.stringify({ records: [runRecord({ projectId: 'demo', appName: 'limits' })] });
  return Buffer.from(text + ' '.repeat(length - Buffer.byteLength(text)));
}

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

  it('holds at most its byte budget of bodies across concurrent batches: the others are answered 503 + Retry-After unread, and the admitted land', async () => {
    const batchBytes = 4 * 1024 * 1024;
    const budget = new ByteBudget(3 * batchBytes, 3 * batchBytes);
    const collector = await startCollector({ maxBatchBytes: batchBytes, budget });
    const senders = await Promise.all(Array.from({ length: 20 }, () => RawConnection.open(collector.url)));
    try {
      const answers = new Map<RawConnection, RawAnswer>();
      // Every sender starts a batch of the largest size and sends one byte of it: the admitted ones wait for the rest.
      for (const sender of senders) {
        sender.write(head(batchBytes, `Bearer ${resultsTokenOf('limits')}`));
        sender.write('{');
        void sender.next().then((answer) => answers.set(sender, answer), () => undefined);
      }
      await waitFor(() => answers.size === senders.length - 3, { what: '17 of the 20 batches refused', timeoutMs: ANSWER_TIMEOUT_MS });
      expect(budget.inUse).toBe(3 * batchBytes);
      expect(budget.peak).toBeLessThanOrEqual(budget.limit);
      for (const answer of answers.values()) {
        expect(answer.status).toBe(503);
        expect(answer.headers['retry-after']).toBe('1');
      }
      // The admitted three send the rest of their batches, and are written.
      const admitted = senders.filter((sender) => !answers.has(sender));
      for (const sender of admitted) sender.write(batchOf(batchBytes).subarray(1));
      await waitFor(() => answers.size === senders.length, { what: 'the admitted batches answered', timeoutMs: 60_000 });
      for (const sender of admitted) expect(answers.get(sender)).toMatchObject({ status: 200 });
      await waitFor(() => budget.inUse === 0, { what: 'the budget given back' });
      expect(budget.peak).toBe(3 * batchBytes);
    } finally {
      for (const sender of senders) sender.close();
      await collector.app.close();
    }
  }, 90_000);

  it('lets one namespace hold no more than its share: another namespace\'s batch is admitted while the first is refused', async () => {
    const batchBytes = 1024 * 1024;
    const budget = new ByteBudget(4 * batchBytes, 2 * batchBytes);
    const collector = await startCollector({ maxBatchBytes: batchBytes, budget });
    const start = async (namespace: string): Promise<RawConnection> => {
      const sender = await RawConnection.open(collector.url);
      sender.write(head(batchBytes, `Bearer ${resultsTokenOf('limits', 'test-host', namespace)}`, `/v1/results/${namespace}/runs`));
      sender.write('{');
      return sender;
    };
    const senders: RawConnection[] = [];
    try {
      // team-a's pods start three batches: two are admitted, the third refused though the budget has room.
      for (let i = 0; i < 3; i += 1) senders.push(await start('team-a'));
      expect(await answerWithin(senders[2]!)).toMatchObject({ status: 503, headers: { 'retry-after': '1' } });
      await waitFor(() => budget.heldBy('team-a') === 2 * batchBytes, { what: 'team-a holding its share' });
      // team-b's is admitted: it waits for its body, unanswered, holding its bytes.
      senders.push(await start('team-b'));
      await waitFor(() => budget.heldBy('team-b') === batchBytes, { what: 'team-b admitted' });
      expect(budget.inUse).toBe(3 * batchBytes);
    } finally {
      for (const sender of senders) sender.close();
      await collector.app.close();
    }
  });
});
