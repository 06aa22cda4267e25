import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { hasOpenssl } from '../test/support/openssl.ts';
import { KubeApi } from './client.ts';
import { loadKubeconfig } from './kubeconfig.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'runlet-kubeconfig-'));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

interface Parts {
  cluster?: Record<string, unknown>;
  user?: Record<string, unknown>;
  currentContext?: string;
}

/** A kubeconfig with one cluster `c`, user `u` and context `ctx` (the current one), written to `dir/<name>`. */
function writeKubeconfig(parts: Parts = {}, name = 'config'): string {
  const path = join(dir, name);
  const document = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: parts.cluster ?? { server: 'https://api.example:6443/' } }],
    users: [{ name: 'u', user: parts.user ?? { token: 'abc' } }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': parts.currentContext ?? 'ctx',
  };
  writeFileSync(path, stringify(document));
  return path;
}

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, content);
  return path;
}

describe('loadKubeconfig', () => {
  it('reads the current context: the server without a trailing slash, verified TLS, the bearer token', async () => {
    const credentials = await loadKubeconfig([writeKubeconfig()]);
    expect(credentials.server).toBe('https://api.example:6443');
    expect(credentials.proxyUrl).toBeUndefined();
    expect((await credentials.tls()).rejectUnauthorized).toBe(true);
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer abc' });
  });

  it('merges several files as kubectl does: missing ones skipped, the first to set current-context wins', async () => {
    const first = writeKubeconfig({ cluster: { server: 'https://first.example' } }, 'first');
    const second = file(
      'second',
      stringify({
        clusters: [{ name: 'other', cluster: { server: 'https://second.example' } }],
        users: [{ name: 'other-user', user: { token: 'second' } }],
        contexts: [{ name: 'other-ctx', context: { cluster: 'other', user: 'other-user' } }],
        'current-context': 'other-ctx',
      }),
    );
    const credentials = await loadKubeconfig([join(dir, 'missing'), first, second]);
    expect(credentials.server).toBe('https://first.example');
    await expect(loadKubeconfig([join(dir, 'missing')])).rejects.toThrow(`no kubeconfig file exists of ${join(dir, 'missing')}`);
  });

  it('hands a user with an exec plugin to client-node, which runs the plugin for the token', async () => {
    const credential = { apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential', status: { token: 'from-plugin' } };
    const exec = {
      apiVersion: 'client.authentication.k8s.io/v1beta1',
      command: process.execPath,
      args: ['-e', `process.stdout.write(${JSON.stringify(JSON.stringify(credential))})`],
    };
    file('pki/ca.crt', 'CA PEM');
    const path = writeKubeconfig({ cluster: { server: 'https://api.example/', 'certificate-authority': 'pki/ca.crt' }, user: { exec } });
    const credentials = await loadKubeconfig([path]);
    expect(credentials.server).toBe('https://api.example');
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer from-plugin' });
    expect((await credentials.tls()).ca).toEqual(Buffer.from('CA PEM'));
  });

  it.skipIf(!hasOpenssl())('connects over TLS with the CA, server name and client certificate it names', async () => {
    // The server's certificate is for kubernetes.test, not 127.0.0.1: only tls-server-name makes it match.
    selfSigned('server', ['-subj', '/CN=kubernetes.test', '-addext', 'subjectAltName=DNS:kubernetes.test']);
    selfSigned('client', ['-subj', '/CN=runlet-sidecar']);
    const server = createServer({
      key: readFileSync(join(dir, 'pki/server.key')),
      cert: readFileSync(join(dir, 'pki/server.crt')),
      ca: readFileSync(join(dir, 'pki/client.crt')),
      requestCert: true,
      rejectUnauthorized: true,
    });
    server.on('request', (request, response) => {
      const peer = (request.socket as TLSSocket).getPeerCertificate();
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify({ client: peer.subject.CN }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const clients: KubeApi[] = [];
    try {
      const cluster = { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, 'certificate-authority': 'pki/server.crt' };
      const user = { 'client-certificate': 'pki/client.crt', 'client-key': 'pki/client.key' };
      const named = writeKubeconfig({ cluster: { ...cluster, 'tls-server-name': 'kubernetes.test' }, user }, 'named');
      const client = new KubeApi(await loadKubeconfig([named]), { requestTimeoutMs: 10_000 });
      clients.push(client);
      expect(await client.request('GET', kubePathOf('/version'))).toEqual({ client: 'runlet-sidecar' });

      const unnamed = writeKubeconfig({ cluster, user }, 'unnamed');
      const mismatched = new KubeApi(await loadKubeconfig([unnamed]), { requestTimeoutMs: 10_000 });
      clients.push(mismatched);
      await expect(mismatched.request('GET', kubePathOf('/version'))).rejects.toThrow(/ERR_TLS_CERT_ALTNAME_INVALID/);
    } finally {
      for (const client of clients) await client.close();
      server.closeAllConnections();
      server.close();
    }
  });
});

function selfSigned(name: string, subject: string[]): void {
  mkdirSync(join(dir, 'pki'), { recursive: true });
  const files = ['-keyout', join(dir, `pki/${name}.key`), '-out', join(dir, `pki/${name}.crt`)];
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', ...subject, ...files], { stdio: 'ignore' });
}
