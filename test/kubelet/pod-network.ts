// Pod IPs on a machine without a pod network. Every pod's processes listen on 127.0.0.1 (each pod port has a
// local port standing for it, ports.ts), but an API server refuses loopback addresses in Endpoints — a Service's
// endpoints must be addresses other nodes could reach — so a pod reported at 127.0.0.1 could never be a
// Service's endpoint. Each pod is reported instead at an address of its own from a documentation range
// (RFC 5737's TEST-NET-1, -2 or -3: the first that no interface of this machine is on — a machine's own LAN
// may well be TEST-NET-1, this one's is). Such an address is a label, never dialled: whoever wants to reach it
// asks `dialTarget`, which maps it to the loopback port standing for it on this machine. It is not unroutable
// (a default route would carry it off the machine), which is why test/support/loopback-only.ts makes sure
// nothing in the tests dials it anyway.
import { networkInterfaces } from 'node:os';
import { isLoopbackAddress } from '../support/loopback-only.ts';

/** The documentation ranges (RFC 5737), each a /24: 254 pods at once, as a Node holds at most 250. */
const DOCUMENTATION_RANGES = ['192.0.2.', '198.51.100.', '203.0.113.'];
const FIRST_HOST = 1;
const LAST_HOST = 254;

/** The first documentation /24 that no local interface has an address in. */
export function unusedDocumentationRange(interfaces = networkInterfaces()): string {
  const local = Object.values(interfaces).flatMap((addresses) => (addresses ?? []).filter((a) => a.family === 'IPv4').map((a) => a.address));
  const free = DOCUMENTATION_RANGES.find((prefix) => !local.some((address) => address.startsWith(prefix)));
  if (free === undefined) throw new Error(`every documentation range (${DOCUMENTATION_RANGES.map((p) => `${p}0/24`).join(', ')}) is on an interface of this machine`);
  return free;
}

/** What is listening behind an address of the network: a pod's port map, or a server on 127.0.0.1. */
export interface AddressHolder {
  /** The local port standing for `port` at this address. */
  localPort(port: number): number;
}

export interface DialTarget {
  host: string;
  port: number;
}

export class PodNetwork {
  /** `a.b.c.`: the /24 the addresses come from. */
  readonly prefix: string;
  /** Address → what stands behind it. */
  readonly #holders = new Map<string, AddressHolder>();
  /** What each address is, for messages. */
  readonly #names = new Map<string, string>();
  /** The host part handed out last: addresses are handed out in turn, so a released one is reused last. */
  #last = LAST_HOST;

  constructor(prefix = unusedDocumentationRange()) {
    this.prefix = prefix;
  }

  get cidr(): string {
    return `${this.prefix}0/24`;
  }

  /** A free address of the network for `holder` (a pod: its port map), named `name` in messages. */
  assign(name: string, holder: AddressHolder): string {
    for (let step = 1; step <= LAST_HOST - FIRST_HOST + 1; step += 1) {
      const host = ((this.#last - FIRST_HOST + step) % (LAST_HOST - FIRST_HOST + 1)) + FIRST_HOST;
      const ip = `${this.prefix}${host}`;
      if (this.#holders.has(ip)) continue;
      this.#last = host;
      this.#holders.set(ip, holder);
      this.#names.set(ip, name);
      return ip;
    }
    throw new Error(`the pod network ${this.cidr} has no address left for ${name}: ${this.#holders.size} in use`);
  }

  /**
   * An address for a server of this machine that stands for a pod elsewhere (the operator's holder, which
   * in a cluster listens in the operator's pods): dialled, it is 127.0.0.1 on the same port.
   */
  assignLoopbackServer(name: string): string {
    return this.assign(name, { localPort: (port) => port });
  }

  release(ip: string): void {
    this.#holders.delete(ip);
    this.#names.delete(ip);
  }

  /** What `ip` was assigned to, if anything now. */
  nameOf(ip: string): string | undefined {
    return this.#names.get(ip);
  }

  /**
   * Where a connection to `ip:port` really goes: a loopback address as it is; an address of this network to
   * the loopback port standing for it. Anything else would leave the machine: it throws.
   */
  dialTarget(ip: string, port: number): DialTarget {
    if (isLoopbackAddress(ip)) return { host: ip, port };
    const holder = this.#holders.get(ip);
    if (holder === undefined) {
      throw new Error(`${ip}:${port} is neither loopback nor an address of the test pod network ${this.cidr} in use: it is not dialled`);
    }
    return { host: '127.0.0.1', port: holder.localPort(port) };
  }
}
