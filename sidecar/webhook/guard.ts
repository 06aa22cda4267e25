// SSRF guard for webhook deliveries. A caller-chosen URL must not become a way into the cluster's own network
// (pods, the API server, the cloud metadata service). The verdict is made on the address actually connected
// to: the guarded connector resolves the name, drops every address the policy refuses and lets the socket
// connect only to what is left, so a name that resolves differently between validation and connection
// (DNS rebinding) cannot slip through.

import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { buildConnector } from 'undici';
import { undici } from '../lazy-undici.ts';

/** The allow-list `runlet dev` uses: receivers on the developer's own machine. */
export const LOOPBACK_CIDRS: readonly string[] = ['127.0.0.0/8', '::1/128'];

export type AddressVerdict = { readonly admitted: true } | { readonly admitted: false; readonly reason: string };

// ipaddr.js range names → why an address there is refused. Only public unicast addresses pass; any range not
// named here (6to4, teredo, NAT64 rfc6052, discard, …) is refused under its ipaddr.js name.
const RANGE_REASONS: Readonly<Record<string, string>> = {
  unspecified: 'unspecified',
  loopback: 'loopback',
  private: 'private (RFC 1918)',
  linkLocal: 'link-local (includes cloud metadata 169.254.169.254)',
  carrierGradeNat: 'carrier-grade NAT (100.64.0.0/10)',
  multicast: 'multicast',
  broadcast: 'broadcast',
  reserved: 'reserved',
  uniqueLocal: 'unique local (fc00::/7)',
};

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

// IANA's global unicast block. ipaddr.js calls every IPv6 address outside its named ranges `unicast`, including
// the deprecated IPv4-compatible ::a.b.c.d (::7f00:1 is 127.0.0.1 on stacks that still honour it), so IPv6
// must also fall inside this block.
const IPV6_GLOBAL_UNICAST: Cidr = ipaddr.parseCIDR('2000::/3');

/** Decides which destination addresses webhook deliveries may connect to. */
export class DestinationPolicy {
  readonly #allowed: readonly Cidr[];

  /** `allowCidrs` admit addresses the policy would otherwise refuse, e.g. LOOPBACK_CIDRS in local mode. */
  constructor(allowCidrs: readonly string[] = []) {
    this.#allowed = allowCidrs.map((cidr) => {
      try {
        return ipaddr.parseCIDR(cidr);
      } catch (error) {
        throw new RangeError(`webhook allow-list entry '${cidr}' is not a CIDR (e.g. 10.0.0.0/8, fd00::/8)`, { cause: error });
      }
    });
  }

  check(address: string): AddressVerdict {
    if (!ipaddr.isValid(address)) return { admitted: false, reason: `'${address}' is not an IP address` };
    // process() turns ::ffff:a.b.c.d into a.b.c.d: that is the host it reaches, so it is judged, and
    // allow-listed, as that IPv4 address.
    const effective = ipaddr.process(address);
    if (this.#allowed.some((cidr) => cidr[0].kind() === effective.kind() && effective.match(cidr))) {
      return { admitted: true };
    }
    const range = effective.range();
    const global = effective.kind() === 'ipv4' || effective.match(IPV6_GLOBAL_UNICAST);
    if (range === 'unicast' && global) return { admitted: true };
    const why = range === 'unicast' ? 'outside global unicast 2000::/3' : (RANGE_REASONS[range] ?? range);
    const mapped = effective.kind() === 'ipv4' && isIP(address) === 6 ? ` (IPv4-mapped ${effective.toString()})` : '';
    return { admitted: false, reason: `${address}${mapped} is ${why} and not in the allow-list` };
  }
}

export class DestinationRefusedError extends Error {
  readonly code = 'ERR_WEBHOOK_DESTINATION_REFUSED';
  readonly host: string;

  constructor(host: string, refusals: readonly string[]) {
    const why = refusals.join('; ');
    super(isIP(host) !== 0 ? `destination refused: ${why}` : `destination refused: ${host} resolves to no admitted address (${why})`);
    this.name = 'DestinationRefusedError';
    this.host = host;
  }
}

/** Name resolution, injectable so tests can make a name resolve to any address. */
export type Resolve = (hostname: string) => Promise<readonly LookupAddress[]>;

export const systemResolve: Resolve = (hostname) => dnsLookup(hostname, { all: true, order: 'verbatim' });

/**
 * A `lookup` for net/tls.connect that hands the socket only admitted addresses, or fails with
 * DestinationRefusedError when none is left. Serves both calling conventions: `all: true` (Node's
 * happy-eyeballs path, the default) and a single address.
 */
export function guardedLookup(policy: DestinationPolicy, resolve: Resolve): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const refusals: string[] = [];
        const admitted = addresses.filter(({ address }) => {
          const verdict = policy.check(address);
          if (!verdict.admitted) refusals.push(verdict.reason);
          return verdict.admitted;
        });
        const first = admitted[0];
        if (first === undefined) {
          const reasons = refusals.length > 0 ? refusals : ['no address at all'];
          callback(new DestinationRefusedError(hostname, reasons), '');
        } else if (options.all === true) {
          callback(null, admitted);
        } else {
          callback(null, first.address, first.family);
        }
      },
      // Resolution errors (ENOTFOUND, EAI_AGAIN) pass through unchanged: they are network errors, retried.
      (error: unknown) => callback(error as NodeJS.ErrnoException, ''),
    );
  };
}

export interface GuardedConnectorOptions {
  policy: DestinationPolicy;
  resolve: Resolve;
  connectTimeoutMs: number;
}

/**
 * An undici `connect` function: undici's own connector (TLS, SNI, session cache, connect timeout) with the
 * guarded lookup. net.connect skips `lookup` for an IP literal, so literals are checked here first.
 */
export function guardedConnector(options: GuardedConnectorOptions): buildConnector.connector {
  const connect = undici().buildConnector({
    timeout: options.connectTimeoutMs,
    lookup: guardedLookup(options.policy, options.resolve),
  });
  return (target, callback) => {
    if (isIP(target.hostname) !== 0) {
      const verdict = options.policy.check(target.hostname);
      if (!verdict.admitted) {
        callback(new DestinationRefusedError(target.hostname, [verdict.reason]), null);
        return;
      }
    }
    connect(target, callback);
  };
}
