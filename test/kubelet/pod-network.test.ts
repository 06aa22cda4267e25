// The test pod network: distinct addresses of a documentation range no interface of this machine is on, each a
// label for loopback ports, never an address to dial.
import { describe, expect, it } from 'vitest';
import { PodNetwork, unusedDocumentationRange } from './pod-network.ts';

const interfaceAt = (address: string) => ({ address, netmask: '255.255.255.0', family: 'IPv4' as const, mac: '00:00:00:00:00:00', internal: false, cidr: `${address}/24` });

describe('the test pod network', () => {
  it('takes the first documentation range (RFC 5737) that no interface of the machine is on', () => {
    expect(unusedDocumentationRange({ lo: [interfaceAt('127.0.0.1')] })).toBe('192.0.2.');
    // This machine's own network is TEST-NET-1: its gateway and itself are not pods.
    expect(unusedDocumentationRange({ eth0: [interfaceAt('192.0.2.2')] })).toBe('198.51.100.');
    expect(unusedDocumentationRange({ eth0: [interfaceAt('192.0.2.2')], eth1: [interfaceAt('198.51.100.7')] })).toBe('203.0.113.');
    expect(() => unusedDocumentationRange({ a: [interfaceAt('192.0.2.2')], b: [interfaceAt('198.51.100.7')], c: [interfaceAt('203.0.113.9')] })).toThrow(/every documentation range/);
    expect(new PodNetwork().cidr).toBe(`${unusedDocumentationRange()}0/24`);
  });

  it('gives each pod its own address of its range, and a released one back only after the others', () => {
    const network = new PodNetwork('198.51.100.');
    const inRange = /^198\.51\.100\.(\d+)$/;
    const first = network.assign('pod a', { localPort: () => 1 });
    const second = network.assign('pod b', { localPort: () => 2 });
    expect(first).toMatch(inRange);
    expect(second).toMatch(inRange);
    expect(second).not.toBe(first);
    network.release(first);
    const third = network.assign('pod c', { localPort: () => 3 });
    expect(third, 'an address just released is not handed out again at once').not.toBe(first);
    expect(network.nameOf(third)).toBe('pod c');
    expect(network.nameOf(first)).toBeUndefined();
  });

  it('has room for 254 pods, and says so when full', () => {
    const network = new PodNetwork('203.0.113.');
    const addresses = new Set(Array.from({ length: 254 }, (_, i) => network.assign(`pod ${i}`, { localPort: () => i })));
    expect(addresses.size).toBe(254);
    expect([...addresses].every((address) => /^203\.0\.113\.([1-9]|[1-9]\d|1\d\d|2[0-4]\d|25[0-4])$/.test(address))).toBe(true);
    expect(() => network.assign('one more', { localPort: () => 0 })).toThrow(/no address left for one more/);
  });

  it('maps an address to the loopback port standing for it; a loopback address stays; any other is refused', () => {
    const network = new PodNetwork();
    const pod = network.assign('pod a', { localPort: (port) => port + 10_000 });
    const holder = network.assignLoopbackServer('the holder');
    expect(network.dialTarget(pod, 8000)).toEqual({ host: '127.0.0.1', port: 18_000 });
    expect(network.dialTarget(holder, 41_234)).toEqual({ host: '127.0.0.1', port: 41_234 });
    expect(network.dialTarget('127.0.0.1', 8000)).toEqual({ host: '127.0.0.1', port: 8000 });
    expect(network.dialTarget('::1', 8000)).toEqual({ host: '::1', port: 8000 });
    network.release(pod);
    expect(() => network.dialTarget(pod, 8000)).toThrow(/not dialled/);
    expect(() => network.dialTarget('10.0.0.1', 80)).toThrow(/not dialled/);
  });
});
