// The test pod network: distinct TEST-NET-1 addresses, each a label for loopback ports, never an address to dial.
import { describe, expect, it } from 'vitest';
import { PodNetwork } from './pod-network.ts';

const inTestNet1 = /^192\.0\.2\.(\d+)$/;

describe('the test pod network', () => {
  it('gives each pod its own TEST-NET-1 address, and a released one back only after the others', () => {
    const network = new PodNetwork();
    const first = network.assign('pod a', { localPort: () => 1 });
    const second = network.assign('pod b', { localPort: () => 2 });
    expect(first).toMatch(inTestNet1);
    expect(second).toMatch(inTestNet1);
    expect(second).not.toBe(first);
    network.release(first);
    const third = network.assign('pod c', { localPort: () => 3 });
    expect(third, 'an address just released is not handed out again at once').not.toBe(first);
    expect(network.nameOf(third)).toBe('pod c');
    expect(network.nameOf(first)).toBeUndefined();
  });

  it('has room for 254 pods, and says so when full', () => {
    const network = new PodNetwork();
    const addresses = new Set(Array.from({ length: 254 }, (_, i) => network.assign(`pod ${i}`, { localPort: () => i })));
    expect(addresses.size).toBe(254);
    for (const address of addresses) expect(Number(inTestNet1.exec(address)?.[1])).toBeGreaterThanOrEqual(1);
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
