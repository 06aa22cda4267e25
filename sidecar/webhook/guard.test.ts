import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { DestinationPolicy, DestinationRefusedError, LOOPBACK_CIDRS, guardedConnector, guardedLookup } from './guard.ts';
import type { Resolve } from './guard.ts';

const REFUSED_BY_DEFAULT: readonly (readonly [address: string, why: RegExp])[] = [
  ['127.0.0.1', /loopback/],
  ['127.255.0.9', /loopback/],
  ['10.1.2.3', /private/],
  ['172.16.0.1', /private/],
  ['192.168.1.1', /private/],
  ['169.254.169.254', /link-local \(includes cloud metadata/],
  ['100.64.0.1', /carrier-grade NAT/],
  ['100.127.255.254', /carrier-grade NAT/],
  ['0.0.0.0', /unspecified/],
  ['224.0.0.1', /multicast/],
  ['255.255.255.255', /broadcast/],
  ['192.0.2.1', /reserved/],
  ['240.0.0.1', /reserved/],
  ['::1', /loopback/],
  ['::', /unspecified/],
  ['fc00::1', /unique local/],
  ['fd12:3456::1', /unique local/],
  ['fe80::1', /link-local/],
  ['ff02::1', /multicast/],
  ['2001:db8::1', /reserved/],
  ['::ffff:127.0.0.1', /IPv4-mapped 127\.0\.0\.1\) is loopback/],
  ['::ffff:7f00:1', /IPv4-mapped 127\.0\.0\.1\) is loopback/],
  ['::ffff:169.254.169.254', /IPv4-mapped 169\.254\.169\.254\) is link-local/],
  ['::ffff:10.0.0.1', /private/],
  ['64:ff9b::7f00:1', /rfc6052/],
  ['::7f00:1', /outside global unicast 2000::\/3/],
  ['::a9fe:a9fe', /outside global unicast/],
  ['fec0::1', /deprecatedSiteLocal/],
  ['100::1', /discard/],
];

const PUBLIC = ['8.8.8.8', '1.1.1.1', '100.128.0.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'];

const ALLOW_ALL_INTERNAL = [
  ...LOOPBACK_CIDRS,
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '169.254.0.0/16',
  '100.64.0.0/10',
  '0.0.0.0/8',
  '224.0.0.0/4',
  '255.255.255.255/32',
  '192.0.2.0/24',
  '240.0.0.0/4',
  '::/128',
  'fc00::/7',
  'fe80::/10',
  'ff00::/8',
  '2001:db8::/32',
  '64:ff9b::/96',
  '::/96',
  'fec0::/10',
  '100::/64',
];

describe('DestinationPolicy', () => {
  const strict = new DestinationPolicy();

  it.each(REFUSED_BY_DEFAULT)('refuses %s without an allow-list', (address, why) => {
    const verdict = strict.check(address);
    expect(verdict.admitted).toBe(false);
    if (!verdict.admitted) {
      expect(verdict.reason).toMatch(why);
      expect(verdict.reason).toContain(address);
      expect(verdict.reason).toMatch(/not in the allow-list/);
    }
  });

  it.each(PUBLIC)('admits the public address %s', (address) => {
    expect(strict.check(address)).toEqual({ admitted: true });
  });

  it.each(REFUSED_BY_DEFAULT)('admits %s when the allow-list covers it', (address) => {
    expect(new DestinationPolicy(ALLOW_ALL_INTERNAL).check(address)).toEqual({ admitted: true });
  });

  it('admits only what the allow-list covers', () => {
    const local = new DestinationPolicy(LOOPBACK_CIDRS);
    expect(local.check('127.0.0.1').admitted).toBe(true);
    expect(local.check('::1').admitted).toBe(true);
    expect(local.check('::ffff:127.0.0.1').admitted).toBe(true);
    expect(local.check('10.0.0.1').admitted).toBe(false);
    expect(local.check('169.254.169.254').admitted).toBe(false);
    expect(local.check('fd00::1').admitted).toBe(false);
  });

  it('refuses what is not an IP address', () => {
    expect(strict.check('example.com')).toEqual({ admitted: false, reason: "'example.com' is not an IP address" });
  });

  it('rejects an allow-list entry that is not a CIDR, naming it', () => {
    expect(() => new DestinationPolicy(['10.0.0.0/8', '10.0.0.1'])).toThrow(/'10\.0\.0\.1' is not a CIDR/);
    expect(() => new DestinationPolicy(['cluster.local/8'])).toThrow(/'cluster\.local\/8' is not a CIDR/);
  });
});

function resolvingTo(...addresses: string[]): Resolve {
  return async () => addresses.map((address): LookupAddress => ({ address, family: address.includes(':') ? 6 : 4 }));
}

function lookupAll(lookup: ReturnType<typeof guardedLookup>, hostname: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    lookup(hostname, { all: true }, (error, addresses) => {
      if (error) reject(error);
      else if (typeof addresses === 'string') reject(new Error(`all: true answered one address, ${addresses}`));
      else resolve(addresses);
    });
  });
}

function lookupOne(lookup: ReturnType<typeof guardedLookup>, hostname: string): Promise<[string, number]> {
  return new Promise((resolve, reject) => {
    lookup(hostname, {}, (error, address, family) => {
      if (error) reject(error);
      else if (typeof address !== 'string') reject(new Error('a single lookup answered a list'));
      else resolve([address, family ?? 0]);
    });
  });
}

describe('guardedLookup', () => {
  const policy = new DestinationPolicy(LOOPBACK_CIDRS);

  it('hands the socket only the admitted addresses, in resolver order', async () => {
    const lookup = guardedLookup(policy, resolvingTo('10.0.0.7', '127.0.0.1', '169.254.169.254', '8.8.8.8', 'fd00::1'));
    expect(await lookupAll(lookup, 'hooks.example.com')).toEqual([
      { address: '127.0.0.1', family: 4 },
      { address: '8.8.8.8', family: 4 },
    ]);
    expect(await lookupOne(lookup, 'hooks.example.com')).toEqual(['127.0.0.1', 4]);
  });

  it('fails with every reason when nothing is admitted', async () => {
    const lookup = guardedLookup(policy, resolvingTo('10.0.0.7', '169.254.169.254'));
    const error = await lookupAll(lookup, 'internal.example.com').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DestinationRefusedError);
    expect((error as Error).message).toBe(
      'destination refused: internal.example.com resolves to no admitted address ' +
        '(10.0.0.7 is private (RFC 1918) and not in the allow-list; ' +
        '169.254.169.254 is link-local (includes cloud metadata 169.254.169.254) and not in the allow-list)',
    );
    await expect(lookupOne(lookup, 'internal.example.com')).rejects.toBeInstanceOf(DestinationRefusedError);
  });

  it('passes resolution errors through unchanged', async () => {
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.invalid'), { code: 'ENOTFOUND' });
    const lookup = guardedLookup(policy, () => Promise.reject(notFound));
    await expect(lookupAll(lookup, 'nowhere.invalid')).rejects.toBe(notFound);
  });
});

describe('guardedConnector', () => {
  it('refuses an IP literal before any connection (net skips lookup for literals)', async () => {
    let resolved = false;
    const connect = guardedConnector({
      policy: new DestinationPolicy(),
      resolve: async () => {
        resolved = true;
        return [];
      },
      connectTimeoutMs: 1_000,
    });
    const error = await new Promise<Error | null>((resolve) => {
      const target = { hostname: '169.254.169.254', host: '169.254.169.254', protocol: 'http:', port: '80' };
      connect(target, (...args) => resolve(args[0]));
    });
    expect(error).toBeInstanceOf(DestinationRefusedError);
    expect(error?.message).toBe(
      'destination refused: 169.254.169.254 is link-local (includes cloud metadata 169.254.169.254) and not in the allow-list',
    );
    expect(resolved).toBe(false);
  });
});
