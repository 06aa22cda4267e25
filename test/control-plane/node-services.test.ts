// The real Node's cluster DNS and the API server's egress proxy (node-services.ts runs both inside the Node's
// network namespace), here on the loopback: the DNS asked by node:dns's own resolver as a pod's libc would ask
// it, the proxy by a CONNECT over its Unix socket as kube-apiserver's egress dialer sends one.
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { Resolver } from 'node:dns/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startClusterDns, type ClusterDns } from './cluster-dns.ts';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

describe('the real Node’s cluster DNS', () => {
  const services: Record<string, string> = { 'default/kubernetes': '10.0.0.1', 'demo/hello': '10.0.0.17', 'demo/headless': 'None' };
  const errors: Error[] = [];

  async function start(lookup = async (namespace: string, name: string) => services[`${namespace}/${name}`]): Promise<{ dns: ClusterDns; resolver: Resolver }> {
    const dns = await startClusterDns({ address: '127.0.0.1', port: 0, clusterDomain: 'cluster.local', lookup, onError: (error) => errors.push(error) });
    closers.push(() => dns.close());
    // One try, no retries: a question left unanswered fails the test at once rather than after the back-off.
    const resolver = new Resolver({ timeout: 5_000, tries: 1 });
    resolver.setServers([`127.0.0.1:${dns.port}`]);
    return { dns, resolver };
  }

  it('answers a Service’s cluster IP for <service>.<namespace>.svc.cluster.local, in any case, with or without the root dot', async () => {
    const { resolver } = await start();
    expect(await resolver.resolve4('kubernetes.default.svc.cluster.local')).toEqual(['10.0.0.1']);
    expect(await resolver.resolve4('Hello.Demo.SVC.cluster.local.')).toEqual(['10.0.0.17']);
  });

  it('says NXDOMAIN for names it does not serve, so a resolver walks on down its search list; no address for AAAA or a headless Service', async () => {
    const { resolver } = await start();
    for (const name of ['absent.demo.svc.cluster.local', 'kubernetes.default.svc.demo.svc.cluster.local', 'demo.svc.cluster.local', 'pypi.org', 'a.hello.demo.svc.cluster.local']) {
      await expect(resolver.resolve4(name), name).rejects.toMatchObject({ code: 'ENOTFOUND' });
    }
    await expect(resolver.resolve6('hello.demo.svc.cluster.local')).rejects.toMatchObject({ code: 'ENODATA' });
    await expect(resolver.resolve4('headless.demo.svc.cluster.local')).rejects.toMatchObject({ code: 'ENODATA' });
  });

  it('answers SERVFAIL, and says why, when the API server cannot tell', async () => {
    const { resolver } = await start(async () => {
      throw new Error('connect ECONNREFUSED 127.0.0.1:6443');
    });
    await expect(resolver.resolve4('hello.demo.svc.cluster.local')).rejects.toMatchObject({ code: 'ESERVFAIL' });
    expect(errors.at(-1)?.message).toMatch(/^looking up hello\.demo\.svc\.cluster\.local for 127\.0\.0\.1:\d+: connect ECONNREFUSED/);
  });

  it('drops datagrams that are not DNS, and goes on answering', async () => {
    const { dns, resolver } = await start();
    const client = createSocket('udp4');
    closers.push(() => new Promise<void>((resolve) => client.close(() => resolve())));
    for (const junk of [Buffer.alloc(0), Buffer.from('GET / HTTP/1.1\r\n\r\n'), Buffer.alloc(12, 0xff)]) {
      client.send(junk, dns.port, '127.0.0.1');
    }
    expect(await resolver.resolve4('hello.demo.svc.cluster.local')).toEqual(['10.0.0.17']);
  });
});

describe('the API server’s egress proxy into the real Node', () => {
  let dir: string;

  async function start(): Promise<{ proxy: EgressProxy; socketPath: string; target: Server }> {
    dir = mkdtempSync(join(tmpdir(), 'runlet-egress-'));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    const socketPath = join(dir, 'cluster-egress.sock');
    const proxy = await startEgressProxy({ socketPath, onError: () => undefined });
    closers.push(() => proxy.close());
    const target = createServer((request, response) => response.end(`hello from ${request.url}`));
    target.listen(0, '127.0.0.1');
    await once(target, 'listening');
    closers.push(() => new Promise((resolve) => target.close(resolve)));
    return { proxy, socketPath, target };
  }

  /** Sends `request` over a new connection to the proxy; everything it answers until it closes. */
  async function exchange(socketPath: string, request: string, then?: string): Promise<string> {
    const socket = connect(socketPath);
    let received = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => {
      received += chunk;
      if (then !== undefined && received.includes('\r\n\r\n')) {
        socket.write(then);
        then = undefined;
      }
    });
    socket.write(request);
    // The target closes after answering an HTTP/1.0 request; the proxy passes the end on.
    await once(socket, 'end');
    socket.destroy();
    return received;
  }

  it('tunnels a CONNECT to host:port, its answer nothing but the 200 head before the stream', async () => {
    const { socketPath, target } = await start();
    const { port } = target.address() as AddressInfo;
    const answer = await exchange(socketPath, `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, 'GET /containerLogs HTTP/1.0\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nhello from \/containerLogs$/);
  });

  it('answers 502 with the reason when the target refuses, 400 for a target without a port', async () => {
    const { socketPath } = await start();
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    expect(await exchange(socketPath, `CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n`)).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n[\s\S]*ECONNREFUSED/);
    expect(await exchange(socketPath, 'CONNECT runlet-node HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*CONNECT wants host:port, got "runlet-node"/);
  });
});
