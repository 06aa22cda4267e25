// The leader's count of the calls waiting at the activators: real HTTP servers on loopback stand for the
// activators' admin ports, answering `/load` as `runlet activator` does. Summed over the activators, per App;
// an activator gone from the holder Service's addresses stops counting at once, one that stops answering after
// its last answer is stale; an answer that is no report, or too large, changes nothing and is counted failed.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { testLogger } from '../../test/support/logger.ts';
import { waitFor } from '../../test/support/wait.ts';
import { ActivatorLoads, parseHeldReport } from './activator-loads.ts';
import type { HolderAddress } from './endpoints.ts';
import type { ScrapeOutcome } from './periodic-scraper.ts';

interface FakeActivator {
  server: Server;
  port: number;
  /** What `/load` answers. */
  body: string;
  /** The holder address its Endpoints would list (never dialled: the admin port is mapped below). */
  address: HolderAddress;
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function startActivator(holderIp: string, body: string): Promise<FakeActivator> {
  const server = createServer();
  const activator: FakeActivator = { server, port: 0, body, address: { ip: holderIp, port: 8090 } };
  server.on('request', (request, response) => {
    if (request.url !== '/load') {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' }).end(activator.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  activator.port = (server.address() as AddressInfo).port;
  return activator;
}

/** ActivatorLoads asking the fake activators, stepped by hand (`scrape`), with a clock the test moves. */
function loadsOf(activators: FakeActivator[], clock: { now: number }) {
  const outcomes: ScrapeOutcome[] = [];
  const byIp = new Map(activators.map((activator) => [activator.address.ip, activator]));
  const loads = new ActivatorLoads({
    address: (address) => ({ host: '127.0.0.1', port: byIp.get(address.ip)!.port }),
    intervalMs: 60_000,
    logger: testLogger(),
    now: () => clock.now,
    onScrape: (outcome) => outcomes.push(outcome),
  });
  loads.setActivators(activators.map((activator) => activator.address));
  /** One round, waited for: every activator answered or failed. */
  const round = async () => {
    const before = outcomes.length;
    loads.scrape();
    await waitFor(() => outcomes.length >= before + activators.length, { what: 'a scrape of every activator', timeoutMs: 10_000, intervalMs: 5 });
  };
  return { loads, outcomes, round };
}

const report = (...apps: [string, string, number][]) => JSON.stringify({ apps: apps.map(([namespace, app, held]) => ({ namespace, app, held })) });

describe('the calls waiting at the activators', () => {
  it('sums each App’s waiting calls over the activators, and forgets an activator gone from the Service at once', async () => {
    const a = await startActivator('192.0.2.10', report(['shop', 'checkout', 3], ['shop', 'search', 1]));
    const b = await startActivator('192.0.2.11', report(['shop', 'checkout', 4]));
    const clock = { now: 1_000_000 };
    const { loads, round } = loadsOf([a, b], clock);
    expect(loads.held('shop', 'checkout')).toBe(0);
    await round();
    expect(loads.held('shop', 'checkout')).toBe(7);
    expect(loads.held('shop', 'search')).toBe(1);
    expect(loads.held('other', 'checkout')).toBe(0);
    // The calls at b went to replicas: its next answer lists none.
    b.body = report();
    await round();
    expect(loads.held('shop', 'checkout')).toBe(3);
    loads.setActivators([b.address]);
    expect(loads.held('shop', 'checkout')).toBe(0);
    await loads.stop();
  });

  it('stops counting an activator whose answers stop, after a few missed scrapes (3 s)', async () => {
    const a = await startActivator('192.0.2.20', report(['shop', 'checkout', 5]));
    const clock = { now: 1_000_000 };
    const { loads, round, outcomes } = loadsOf([a], clock);
    await round();
    a.server.closeAllConnections();
    await new Promise((resolve) => a.server.close(resolve));
    clock.now += 1000;
    await round();
    expect(outcomes).toEqual(['ok', 'failed']);
    expect(loads.held('shop', 'checkout')).toBe(5);
    clock.now += 2500;
    expect(loads.held('shop', 'checkout')).toBe(0);
    await loads.stop();
  });

  it('takes no answer that is not a report of waiting calls: the last good one stands, and the scrape counts as failed', async () => {
    const a = await startActivator('192.0.2.30', report(['shop', 'checkout', 2]));
    const clock = { now: 1_000_000 };
    const { loads, round, outcomes } = loadsOf([a], clock);
    await round();
    const hostile = [
      'not json',
      '{"apps": "all of them"}',
      report(['shop', 'checkout', -1000]),
      report(['shop', 'checkout', 1e300]),
      report(['shop', 'checkout', 2.5]),
      JSON.stringify({ apps: [{ namespace: 'shop', held: 9 }] }),
      JSON.stringify({ apps: [null] }),
      report(['a/b', 'checkout', 9]),
      // Past the body limit (512 KiB).
      JSON.stringify({ apps: [], padding: 'x'.repeat(600 * 1024) }),
    ];
    for (const body of hostile) {
      a.body = body;
      await round();
    }
    expect(outcomes).toEqual(['ok', ...hostile.map(() => 'failed')]);
    expect(loads.held('shop', 'checkout')).toBe(2);
    await loads.stop();
  });

  it('counts an activator it cannot find an address for as a failed scrape, and the others still count', async () => {
    const a = await startActivator('192.0.2.40', report(['shop', 'checkout', 2]));
    const clock = { now: 1_000_000 };
    const { loads, outcomes } = loadsOf([a], clock);
    // Listed in the Endpoints, but no admin address is known for it (loadsOf maps only the fake activators).
    loads.setActivators([a.address, { ip: '192.0.2.41', port: 8090 }]);
    loads.scrape();
    await waitFor(() => outcomes.length === 2, { what: 'both scrapes ended', timeoutMs: 10_000, intervalMs: 5 });
    expect([...outcomes].sort()).toEqual(['failed', 'ok']);
    expect(loads.held('shop', 'checkout')).toBe(2);
    await loads.stop();
  });

  it('reads the report `runlet activator` answers: the same App twice is summed', () => {
    const held = parseHeldReport(report(['shop', 'checkout', 2], ['shop', 'checkout', 1], ['shop', 'search', 0]), 'activator');
    expect([...held]).toEqual([
      ['shop/checkout', 3],
      ['shop/search', 0],
    ]);
    expect(() => parseHeldReport('{"apps": [{"namespace": "", "app": "x", "held": 1}]}', '192.0.2.1:8081/load')).toThrow(/192\.0\.2\.1:8081\/load: an entry names no App/);
  });
});
