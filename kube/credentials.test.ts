import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { inClusterCredentials } from './in-cluster.ts';
import { loadKubeCredentials } from './load-credentials.ts';
import { TOKEN_FILE_MAX_AGE_MS, TokenFile } from './token-file.ts';

let dir: string;
/** Stands in for /var/run/secrets/kubernetes.io/serviceaccount. */
let serviceAccountDir: string;
const IN_POD = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'runlet-kube-credentials-'));
  serviceAccountDir = join(dir, 'serviceaccount');
  mkdirSync(serviceAccountDir);
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function mountServiceAccount(token = 'sa-token-1\n'): void {
  writeFileSync(join(serviceAccountDir, 'token'), token);
  writeFileSync(join(serviceAccountDir, 'ca.crt'), 'CLUSTER CA');
}

function writeKubeconfig(path: string, server: string): string {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(
    path,
    stringify({
      clusters: [{ name: 'c', cluster: { server } }],
      users: [{ name: 'u', user: { token: 'kubeconfig-token' } }],
      contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'ctx',
    }),
  );
  return path;
}

describe('inClusterCredentials', () => {
  it('calls the service host over https, trusting the mounted CA, with the mounted token', async () => {
    mountServiceAccount();
    const credentials = await inClusterCredentials({ env: IN_POD, serviceAccountDir });
    expect(credentials.server).toBe('https://10.96.0.1:443');
    expect(await credentials.tls()).toEqual({ ca: Buffer.from('CLUSTER CA'), rejectUnauthorized: true });
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer sa-token-1' });
  });

  it('brackets an IPv6 service host', async () => {
    mountServiceAccount();
    const credentials = await inClusterCredentials({ env: { KUBERNETES_SERVICE_HOST: 'fd00:10:96::1', KUBERNETES_SERVICE_PORT: '443' }, serviceAccountDir });
    expect(credentials.server).toBe('https://[fd00:10:96::1]:443');
  });

  it('picks up a rotated token once the cached one is a minute old', async () => {
    mountServiceAccount();
    let now = 0;
    const credentials = await inClusterCredentials({ env: IN_POD, serviceAccountDir, now: () => now });
    writeFileSync(join(serviceAccountDir, 'token'), 'sa-token-2');
    now += TOKEN_FILE_MAX_AGE_MS - 1;
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer sa-token-1' });
    now += 1;
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer sa-token-2' });
  });

  it('says what is missing', async () => {
    mountServiceAccount();
    await expect(inClusterCredentials({ env: {}, serviceAccountDir })).rejects.toThrow(
      `a service-account token is mounted at ${serviceAccountDir}, but KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set`,
    );
    rmSync(join(serviceAccountDir, 'ca.crt'));
    await expect(inClusterCredentials({ env: IN_POD, serviceAccountDir })).rejects.toThrow(
      `cannot read the service account's CA certificate ${join(serviceAccountDir, 'ca.crt')}: ENOENT`,
    );
  });
});

describe('TokenFile', () => {
  it('refuses an empty token file, and reports an unreadable one with its path', async () => {
    const path = join(dir, 'token');
    writeFileSync(path, ' \n');
    await expect(new TokenFile(path).read()).rejects.toThrow(`the bearer token file ${path} is empty`);
    await expect(new TokenFile(join(dir, 'gone')).read()).rejects.toThrow(`cannot read the bearer token file ${join(dir, 'gone')}: ENOENT`);
  });
});

describe('loadKubeCredentials, in the order of client-node loadFromDefault', () => {
  it('uses the files of KUBECONFIG first, even in a pod with a home kubeconfig', async () => {
    mountServiceAccount();
    writeKubeconfig(join(dir, 'home/.kube/config'), 'https://home.example');
    const listed = writeKubeconfig(join(dir, 'listed'), 'https://listed.example');
    const env = { ...IN_POD, HOME: join(dir, 'home'), KUBECONFIG: [join(dir, 'missing'), listed].join(delimiter) };
    const credentials = await loadKubeCredentials({ env, serviceAccountDir });
    expect(credentials.server).toBe('https://listed.example');
  });

  it('then ~/.kube/config', async () => {
    mountServiceAccount();
    writeKubeconfig(join(dir, 'home/.kube/config'), 'https://home.example');
    const credentials = await loadKubeCredentials({ env: { ...IN_POD, HOME: join(dir, 'home'), KUBECONFIG: '' }, serviceAccountDir });
    expect(credentials.server).toBe('https://home.example');
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer kubeconfig-token' });
  });

  it("then the pod's service account", async () => {
    mountServiceAccount();
    const credentials = await loadKubeCredentials({ env: { ...IN_POD, HOME: join(dir, 'home') }, serviceAccountDir });
    expect(credentials.server).toBe('https://10.96.0.1:443');
    expect(await credentials.authHeaders()).toEqual({ authorization: 'Bearer sa-token-1' });
  });

  it('and says where it looked when none applies', async () => {
    await expect(loadKubeCredentials({ env: { HOME: join(dir, 'home') }, serviceAccountDir })).rejects.toThrow(
      `no Kubernetes API credentials: KUBECONFIG is not set, ${join(dir, 'home/.kube/config')} does not exist, ` +
        `and there is no service-account token at ${join(serviceAccountDir, 'token')}`,
    );
  });
});
