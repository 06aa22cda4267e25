// The periodic scraper both load signals share, against real HTTP servers on loopback: each target asked once a
// tick and never twice at once (a slow one is skipped until it answers, and its late answer is taken), every
// outcome counted, a target that never answers or trickles its answer bounded by the timeout, one answering too
// much by the body limit, a target gone forgotten at once and its late answer dropped, a failure logged once.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/support/wait.ts';
import { PeriodicScraper, type ScrapeOutcome } from './periodic-scraper.ts';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

interface Target {
  name: string;
  port: number;
  /** Requests received so far. */
  requests: number;
  /** How the next requests are answered. */
  handle: Handler;
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function startTarget(name: string, handle: Handler): Promise<Target> {
  const server = createServer();
  const target: Target = { name, port: 0, requests: 0, handle };
  server.on('request', (request, response) => {
    target.requests += 1;
    target.handle(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  target.port = (server.address() as AddressInfo).port;
  return target;
}

const answer =
  (body: string): Handler =>
  (_request, response) =>
    response.writeHead(200, { 'content-type': 'application/json' }).end(body);

/** Answers when the test says so: `release()` sends `body` to every request held until then. */
function held(body: string): { handle: Handler; release(): void } {
  const waiting: ServerResponse[] = [];
  return {
    handle: (_request, response) => void waiting.push(response),
    release: () => {
      for (const response of waiting.splice(0)) response.writeHead(200, { 'content-type': 'application/json' }).end(body);
    },
  };
}

/** A scraper of `listed` (the test edits it between ticks), stepped by hand, recording what it says. */
function scraperOf(listed: Target[], options: { timeoutMs?: number; maxBytes?: number } = {}) {
  const outcomes: ScrapeOutcome[] = [];
  const answers: [string, number][] = [];
  const forgotten: string[] = [];
  const logs: { level: number; msg: string }[] = [];
  const scraper = new PeriodicScraper<Target, number>(
    {
      targets: () => listed,
      key: (target) => target.name,
      address: (target) => {
        if (target.port === 0) throw new Error(`no address known for ${target.name}`);
        return { host: '127.0.0.1', port: target.port };
      },
      path: '/load',
      maxBytes: options.maxBytes ?? 1024,
      parse: (body, where) => {
        const value = (JSON.parse(body) as { n?: unknown }).n;
        if (typeof value !== 'number') throw new Error(`${where} answered no n`);
        return value;
      },
      answered: (target, value) => answers.push([target.name, value]),
      forgotten: (target) => forgotten.push(target.name),
      kind: 'target',
      describe: (target) => target.name,
      failureMeans: 'its n stops counting',
    },
    {
      intervalMs: 60_000,
      timeoutMs: options.timeoutMs ?? 10_000,
      logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as { level: number; msg: string }) }),
      onScrape: (outcome) => outcomes.push(outcome),
    },
  );
  /** Waits for `count` outcomes in all. */
  const outcomesReach = (count: number, what: string) => waitFor(() => outcomes.length >= count, { what, timeoutMs: 15_000, intervalMs: 5 });
  return { scraper, outcomes, answers, forgotten, logs, outcomesReach };
}

describe('the periodic scraper', () => {
  it('asks every listed target once a tick and hands on each checked answer', async () => {
    const a = await startTarget('a', answer('{"n": 1}'));
    const b = await startTarget('b', answer('{"n": 2}'));
    const { scraper, answers, outcomes, outcomesReach } = scraperOf([a, b]);
    scraper.scrape();
    await outcomesReach(2, 'a scrape of both');
    b.handle = answer('{"n": 3}');
    scraper.scrape();
    await outcomesReach(4, 'a second scrape of both');
    expect(outcomes).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect([...answers].sort()).toEqual([
      ['a', 1],
      ['a', 1],
      ['b', 2],
      ['b', 3],
    ]);
    expect([a.requests, b.requests]).toEqual([2, 2]);
    await scraper.stop();
  });

  it('skips a target whose scrape is still under way, and takes its late answer', async () => {
    const slow = held('{"n": 7}');
    const a = await startTarget('a', slow.handle);
    const b = await startTarget('b', answer('{"n": 2}'));
    const { scraper, answers, outcomes, outcomesReach } = scraperOf([a, b]);
    scraper.scrape();
    await waitFor(() => a.requests === 1, { what: 'the slow target asked', timeoutMs: 15_000, intervalMs: 5 });
    await outcomesReach(1, 'the quick target answered');
    scraper.scrape();
    await outcomesReach(2, 'the quick target answered again');
    scraper.scrape();
    await outcomesReach(3, 'the quick target answered a third time');
    // Three ticks: the quick target was asked three times, the slow one once.
    expect([a.requests, b.requests]).toEqual([1, 3]);
    expect(answers.filter(([name]) => name === 'a')).toEqual([]);
    slow.release();
    await outcomesReach(4, 'the slow target’s late answer');
    expect(answers).toContainEqual(['a', 7]);
    expect(outcomes).toEqual(['ok', 'ok', 'ok', 'ok']);
    // Answered: asked again at the next tick.
    a.handle = answer('{"n": 8}');
    scraper.scrape();
    await outcomesReach(6, 'both asked again');
    expect(a.requests).toBe(2);
    expect(answers).toContainEqual(['a', 8]);
    await scraper.stop();
  });

  it('gives up on a target that never answers at the timeout, logs it once, and asks it again at the next tick', async () => {
    const silent = await startTarget('silent', () => {});
    const { scraper, outcomes, answers, logs, outcomesReach } = scraperOf([silent], { timeoutMs: 300 });
    scraper.scrape();
    await outcomesReach(1, 'the silent target’s scrape to time out');
    scraper.scrape();
    await outcomesReach(2, 'the second scrape to time out');
    expect(outcomes).toEqual(['failed', 'failed']);
    expect(answers).toEqual([]);
    expect(silent.requests).toBe(2);
    const warnings = logs.filter((line) => line.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toMatch(/^load scrape of 127\.0\.0\.1:\d+\/load failed: its n stops counting after a few failed scrapes/);
    // It answers again: said once.
    silent.handle = answer('{"n": 4}');
    scraper.scrape();
    await outcomesReach(3, 'the target answering again');
    expect(answers).toEqual([['silent', 4]]);
    expect(logs.filter((line) => line.level === 30).map((line) => line.msg)).toEqual([expect.stringMatching(/answered again$/)]);
    await scraper.stop();
  });

  it('gives up on a target that trickles its answer at the timeout, not at its last byte', async () => {
    // A byte every 50 ms, for ever: the socket is never idle for the timeout's length.
    const trickle = await startTarget('trickle', (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write(' ');
      const drip = setInterval(() => response.write(' '), 50);
      response.on('close', () => clearInterval(drip));
    });
    const { scraper, outcomes, answers, outcomesReach } = scraperOf([trickle], { timeoutMs: 500, maxBytes: 1024 * 1024 });
    scraper.scrape();
    await outcomesReach(1, 'the trickling target’s scrape to time out');
    expect(outcomes).toEqual(['failed']);
    expect(answers).toEqual([]);
    await scraper.stop();
  });

  it('refuses an answer past the body limit, one that never ends among them, and a non-200 or unparsable one', async () => {
    const large = await startTarget('large', answer(JSON.stringify({ n: 1, padding: 'x'.repeat(2000) })));
    const endless = await startTarget('endless', (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(16 * 1024, 0x20);
      const pour = (): void => {
        while (!response.destroyed && response.write(chunk));
      };
      response.on('drain', pour);
      pour();
    });
    const refusing = await startTarget('refusing', (_request, response) => response.writeHead(503).end('{"n": 1}'));
    const garbled = await startTarget('garbled', answer('{"m": 1}'));
    const { scraper, outcomes, answers, outcomesReach } = scraperOf([large, endless, refusing, garbled], { maxBytes: 1024 });
    scraper.scrape();
    await outcomesReach(4, 'the four scrapes to end');
    expect(outcomes).toEqual(['failed', 'failed', 'failed', 'failed']);
    expect(answers).toEqual([]);
    await scraper.stop();
  });

  it('drops the connection of a target refusing with an endless body, so its next scrape is not stuck behind it', async () => {
    const target = await startTarget('refusing', (_request, response) => {
      response.writeHead(503, { 'content-type': 'text/plain' });
      const drip = setInterval(() => response.write('busy\n'), 20);
      response.on('close', () => clearInterval(drip));
    });
    const { scraper, outcomes, answers, outcomesReach } = scraperOf([target], { timeoutMs: 2000 });
    scraper.scrape();
    await outcomesReach(1, 'the refusal');
    target.handle = answer('{"n": 9}');
    scraper.scrape();
    await outcomesReach(2, 'the next scrape');
    expect(outcomes).toEqual(['failed', 'ok']);
    expect(answers).toEqual([['refusing', 9]]);
    await scraper.stop();
  });

  it('forgets a target no longer listed at once, and drops the answer it gives after that', async () => {
    const slow = held('{"n": 5}');
    const a = await startTarget('a', answer('{"n": 1}'));
    const b = await startTarget('b', slow.handle);
    const listed = [a, b];
    const { scraper, answers, forgotten, outcomesReach } = scraperOf(listed);
    scraper.scrape();
    await waitFor(() => b.requests === 1, { what: 'b asked', timeoutMs: 15_000, intervalMs: 5 });
    await outcomesReach(1, 'a answered');
    // b leaves the list while it is asked: forgotten at the relist, before any tick.
    listed.splice(1, 1);
    scraper.relist();
    expect(forgotten).toEqual(['b']);
    slow.release();
    await outcomesReach(2, 'b’s late answer');
    expect(answers).toEqual([['a', 1]]);
    // Listed again, it is a new target: asked, and its answer taken.
    b.handle = answer('{"n": 6}');
    listed.push(b);
    scraper.scrape();
    await outcomesReach(4, 'both asked again');
    expect(answers).toContainEqual(['b', 6]);
    // Stopping forgets every target.
    await scraper.stop();
    expect(forgotten.sort()).toEqual(['a', 'b', 'b']);
  });

  it('counts a target it cannot find the address of as failed, and the others still answer', async () => {
    const a = await startTarget('a', answer('{"n": 1}'));
    const lost: Target = { name: 'lost', port: 0, requests: 0, handle: () => {} };
    const { scraper, outcomes, answers, outcomesReach } = scraperOf([a, lost]);
    // No port: finding its address throws (scraperOf).
    scraper.scrape();
    await outcomesReach(2, 'both scrapes to end');
    expect([...outcomes].sort()).toEqual(['failed', 'ok']);
    expect(answers).toEqual([['a', 1]]);
    await scraper.stop();
  });
});
