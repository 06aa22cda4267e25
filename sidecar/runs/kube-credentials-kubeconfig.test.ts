import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { kubeconfigCredentials } from './kube-credentials-kubeconfig.ts';
import { KubeJsonClient } from './runlog-kube-client.ts';
import { hasOpenssl } from '../../test/support/openssl.ts';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'runlet-kubeconfig-'));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

interface Parts {
  cluster?: Record<string, unknown>;
  user?: Record<string, unknown> | null;
  context?: Record<string, unknown>;
  currentContext?: string | null;
}

/** A kubeconfig with one cluster `c`, user `u` and context `ctx` (the current one), written to `dir/<name>`. */
function writeKubeconfig(parts: Parts = {}, name = 'config'): string {
  const path = join(dir, name);
  mkdirSync(join(path, '..'), { recursive: true });
  const document = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: parts.cluster ?? { server: 'https://api.example:6443/' } }],
    users: parts.user === null ? [] : [{ name: 'u', user: parts.user ?? { token: 'abc' } }],
    contexts: [{ name: 'ctx', context: parts.context ?? { cluster: 'c', user: 'u' } }],
    'current-context': parts.currentContext === null ? undefined : (parts.currentContext ?? 'ctx'),
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

const base64 = (text: string): string => Buffer.from(text).toString('base64');

describe('kubeconfigCredentials', () => {
  it('reads the current context: the server without a trailing slash, verified TLS, the bearer token', async () => {
    const credentials = await kubeconfigCredentials([writeKubeconfig()]);
    expect(credentials.server).toBe('https://api.example:6443');
    expect(credentials.proxyUrl).toBeUndefined();
    expect(await credentials.tls()).toEqual({ rejectUnauthorized: true });
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer abc' });
  });

  it('reads a kubeconfig written as JSON, and a YAML flow mapping that is not JSON', async () => {
    const document = { clusters: [{ name: 'c', cluster: { server: 'https://json.example' } }], users: [{ name: 'u', user: { token: 'j' } }], contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }], 'current-context': 'x' };
    const json = join(dir, 'json-config');
    writeFileSync(json, JSON.stringify(document));
    const fromJson = await kubeconfigCredentials([json]);
    expect([fromJson.server, await fromJson.authHeaders()]).toEqual(['https://json.example', { authorization: 'Bearer j' }]);
    const flow = join(dir, 'flow-config');
    writeFileSync(flow, "{clusters: [{name: c, cluster: {server: 'https://flow.example'}}], users: [{name: u, user: {token: f}}], contexts: [{name: x, context: {cluster: c, user: u}}], current-context: x}");
    const fromFlow = await kubeconfigCredentials([flow]);
    expect([fromFlow.server, await fromFlow.authHeaders()]).toEqual(['https://flow.example', { authorization: 'Bearer f' }]);
  });

  it('returns headers the caller may add to without changing the next call', async () => {
    const credentials = await kubeconfigCredentials([writeKubeconfig()]);
    const first = await credentials.authHeaders();
    first.accept = 'application/json';
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer abc' });
  });

  it('reads the CA, client certificate and key from files relative to the kubeconfig folder', async () => {
    file('kube/pki/ca.crt', 'CA PEM');
    file('kube/pki/client.crt', 'CERT PEM');
    file('kube/pki/client.key', 'KEY PEM');
    const path = writeKubeconfig(
      {
        cluster: { server: 'https://api.example', 'certificate-authority': 'pki/ca.crt', 'tls-server-name': 'kubernetes.default' },
        user: { 'client-certificate': 'pki/client.crt', 'client-key': join(dir, 'kube/pki/client.key') },
      },
      'kube/config',
    );
    const tls = await (await kubeconfigCredentials([path])).tls();
    expect(tls).toEqual({
      ca: Buffer.from('CA PEM'),
      cert: Buffer.from('CERT PEM'),
      key: Buffer.from('KEY PEM'),
      servername: 'kubernetes.default',
      rejectUnauthorized: true,
    });
  });

  it('reads base64 -data fields, which win over files as in kubectl', async () => {
    const path = writeKubeconfig({
      cluster: { server: 'https://api.example', 'certificate-authority-data': base64('CA'), 'certificate-authority': 'missing.crt' },
      user: { 'client-certificate-data': base64('CERT'), 'client-key-data': base64('KEY') },
    });
    const credentials = await kubeconfigCredentials([path]);
    expect(await credentials.tls()).toEqual({ ca: Buffer.from('CA'), cert: Buffer.from('CERT'), key: Buffer.from('KEY'), rejectUnauthorized: true });
    expect(await credentials.authHeaders()).toEqual({});
  });

  it('reads a token file relative to the kubeconfig folder, trimmed', async () => {
    file('tokens/sa', 'file-token\n');
    const credentials = await kubeconfigCredentials([writeKubeconfig({ user: { tokenFile: 'tokens/sa' } })]);
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer file-token' });
  });

  it('sends basic auth and impersonation headers', async () => {
    const credentials = await kubeconfigCredentials([writeKubeconfig({ user: { username: 'admin', password: 's3cret', as: 'jane' } })]);
    expect(await credentials.authHeaders()).toEqual({ authorization: `Basic ${base64('admin:s3cret')}`, 'impersonate-user': 'jane' });
  });

  it('allows plain HTTP with insecure-skip-tls-verify, and keeps the proxy', async () => {
    const path = writeKubeconfig({ cluster: { server: 'http://127.0.0.1:8080', 'insecure-skip-tls-verify': true, 'proxy-url': 'http://proxy:3128' } });
    const credentials = await kubeconfigCredentials([path]);
    expect(credentials.proxyUrl).toBe('http://proxy:3128');
    expect(await credentials.tls()).toEqual({ rejectUnauthorized: false });
  });

  it('sends no credentials for a context without a user', async () => {
    const credentials = await kubeconfigCredentials([writeKubeconfig({ user: null, context: { cluster: 'c' } })]);
    expect(await credentials.authHeaders()).toEqual({});
  });

  it('merges several files as kubectl does: missing ones skipped, the first to set a value wins', async () => {
    const first = writeKubeconfig({ cluster: { server: 'https://first.example' }, context: { cluster: 'c', user: 'other' } }, 'first/config');
    const second = file(
      'second/config',
      stringify({
        clusters: [{ name: 'c', cluster: { server: 'https://second.example' } }, { name: 'unused', cluster: { server: 'https://unused.example' } }],
        users: [{ name: 'other', user: { token: 'second-token' } }],
        contexts: [{ name: 'second', context: { cluster: 'unused' } }],
        'current-context': 'second',
      }),
    );
    const credentials = await kubeconfigCredentials([join(dir, 'missing'), first, second]);
    expect(credentials.server).toBe('https://first.example');
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer second-token' });
  });

  it('resolves a path against the folder of the file that holds it', async () => {
    file('second/ca.crt', 'SECOND CA');
    const first = writeKubeconfig({ context: { cluster: 'remote', user: 'u' } }, 'first/config');
    const second = file('second/config', stringify({ clusters: [{ name: 'remote', cluster: { server: 'https://remote.example', 'certificate-authority': 'ca.crt' } }] }));
    const tls = await (await kubeconfigCredentials([first, second])).tls();
    expect(tls.ca).toEqual(Buffer.from('SECOND CA'));
  });

  describe('errors name the file and the missing piece', () => {
    const failure = (paths: string[]) => kubeconfigCredentials(paths).then(() => 'no error', (error: Error) => error.message);

    it('no file', async () => {
      expect(await failure([join(dir, 'a'), join(dir, 'b')])).toBe(`no kubeconfig file exists of ${join(dir, 'a')}, ${join(dir, 'b')}`);
    });

    it('not YAML, or not a mapping', async () => {
      expect(await failure([file('broken', 'clusters: [')])).toMatch(new RegExp(`^the kubeconfig ${join(dir, 'broken')} is not valid YAML: `));
      expect(await failure([file('list', '- a\n- b\n')])).toBe(`the kubeconfig ${join(dir, 'list')} is not a YAML mapping`);
    });

    it('no current context', async () => {
      const path = writeKubeconfig({ currentContext: null });
      expect(await failure([path])).toBe(`the kubeconfig ${path} sets no current-context`);
    });

    it('a current context that is not defined', async () => {
      const path = writeKubeconfig({ currentContext: 'prod' });
      expect(await failure([path])).toBe(`the current-context "prod" of ${path} is not a context of the kubeconfig ${path}`);
    });

    it('a context naming a missing cluster or user', async () => {
      const noCluster = writeKubeconfig({ context: { cluster: 'gone', user: 'u' } }, 'no-cluster');
      expect(await failure([noCluster])).toBe(`context "ctx" in the kubeconfig ${noCluster} names cluster "gone", which the kubeconfig ${noCluster} does not define`);
      const noUser = writeKubeconfig({ context: { cluster: 'c', user: 'gone' } }, 'no-user');
      expect(await failure([noUser])).toBe(`context "ctx" in the kubeconfig ${noUser} names user "gone", which the kubeconfig ${noUser} does not define`);
    });

    it('an entry without a name, a cluster without a server', async () => {
      const unnamed = file('unnamed', stringify({ clusters: [{ cluster: { server: 'https://x' } }] }));
      expect(await failure([unnamed])).toBe(`the kubeconfig ${unnamed}: clusters[0] has no name`);
      const noServer = writeKubeconfig({ cluster: { 'insecure-skip-tls-verify': true } });
      expect(await failure([noServer])).toBe(`cluster "c" in the kubeconfig ${noServer} has no server`);
    });

    it('plain HTTP without insecure-skip-tls-verify', async () => {
      const path = writeKubeconfig({ cluster: { server: 'http://api.example' } });
      expect(await failure([path])).toBe(`cluster "c" in the kubeconfig ${path}: server http://api.example is plain HTTP, allowed only with insecure-skip-tls-verify: true`);
    });

    it('a file it names that cannot be read', async () => {
      const path = writeKubeconfig({ cluster: { server: 'https://api.example', 'certificate-authority': 'pki/ca.crt' } });
      expect(await failure([path])).toMatch(
        `cluster "c" in the kubeconfig ${path}: cannot read certificate-authority ${join(dir, 'pki/ca.crt')}: ENOENT`,
      );
      const tokenless = writeKubeconfig({ user: { tokenFile: '/nonexistent/token' } }, 'tokenless');
      expect(await failure([tokenless])).toMatch('cannot read the bearer token file /nonexistent/token: ENOENT');
    });

    it('a certificate without its key, two ways to authenticate, a value of the wrong type', async () => {
      const certOnly = writeKubeconfig({ user: { 'client-certificate-data': base64('CERT') } }, 'cert-only');
      expect(await failure([certOnly])).toBe(`user "u" in the kubeconfig ${certOnly}: a client certificate needs both client-certificate and client-key`);
      const both = writeKubeconfig({ user: { token: 't', username: 'admin', password: 'p' } }, 'both');
      expect(await failure([both])).toBe(`user "u" in the kubeconfig ${both} has both a token and a username/password; use one`);
      const quoted = writeKubeconfig({ cluster: { server: 'https://x', 'insecure-skip-tls-verify': 'true' } }, 'quoted');
      expect(await failure([quoted])).toBe(`cluster "c" in the kubeconfig ${quoted}: insecure-skip-tls-verify must be true or false, got "true"`);
    });
  });

  it("hands a user with an exec plugin to client-node, which runs the plugin for the token", async () => {
    const credential = { apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential', status: { token: 'from-plugin' } };
    const exec = {
      apiVersion: 'client.authentication.k8s.io/v1beta1',
      command: process.execPath,
      args: ['-e', `process.stdout.write(${JSON.stringify(JSON.stringify(credential))})`],
    };
    file('pki/ca.crt', 'CA PEM');
    const path = writeKubeconfig({ cluster: { server: 'https://api.example/', 'certificate-authority': 'pki/ca.crt' }, user: { exec } });
    const credentials = await kubeconfigCredentials([path]);
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
    const clients: KubeJsonClient[] = [];
    try {
      const cluster = { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, 'certificate-authority': 'pki/server.crt' };
      const user = { 'client-certificate': 'pki/client.crt', 'client-key': 'pki/client.key' };
      const named = writeKubeconfig({ cluster: { ...cluster, 'tls-server-name': 'kubernetes.test' }, user }, 'named');
      const client = new KubeJsonClient(await kubeconfigCredentials([named]), { requestTimeoutMs: 10_000 });
      clients.push(client);
      expect(await client.request('GET', '/version')).toEqual({ client: 'runlet-sidecar' });

      const unnamed = writeKubeconfig({ cluster, user }, 'unnamed');
      const mismatched = new KubeJsonClient(await kubeconfigCredentials([unnamed]), { requestTimeoutMs: 10_000 });
      clients.push(mismatched);
      await expect(mismatched.request('GET', '/version')).rejects.toThrow(/ERR_TLS_CERT_ALTNAME_INVALID/);
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
