import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { failureOf, serverPerTest, withinBound } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ core: config.makeApiClient(CoreV1Api) }));

const readDefault = () => kube.core.readNamespace({ name: 'default' });

describe('test controls', () => {
  it('failNext answers matching requests with the given Status, a given number of times', async () => {
    kube.server.failNext({ method: 'GET', pathPattern: /\/namespaces\/default$/, status: 503, times: 2, retryAfterSeconds: 1 });
    const first = await failureOf(readDefault());
    expect(first.code).toBe(503);
    expect(first.status).toMatchObject({ kind: 'Status', reason: 'ServiceUnavailable', code: 503 });
    expect((await failureOf(readDefault())).code).toBe(503);
    await kube.core.listNamespace(); // not matched: served
    expect((await readDefault()).metadata?.name).toBe('default');
    expect(kube.server.counters.injectedFailures).toBe(2);
  });

  it('pause("refuse") resets connections until resume', async () => {
    kube.server.pause('refuse');
    await expect(readDefault()).rejects.toThrow();
    kube.server.resume();
    expect((await readDefault()).metadata?.name).toBe('default');
  });

  it('pause("hang") holds requests unanswered until resume', async () => {
    kube.server.pause('hang');
    let settled = false;
    const pending = readDefault().finally(() => (settled = true));
    await kube.server.waitForRequest({ method: 'GET', pathPattern: '/namespaces/default' });
    expect(kube.server.counters.heldRequests).toBe(1);
    expect(settled).toBe(false);
    kube.server.resume();
    expect((await withinBound(pending, 'the held request to be served')).metadata?.name).toBe('default');
  });

  it('logs requests for assertions', async () => {
    kube.server.clearRequests();
    await kube.core.listNamespacedPod({ namespace: 'default', labelSelector: 'app=x' });
    expect(kube.server.requests).toEqual([
      {
        method: 'GET',
        path: '/api/v1/namespaces/default/pods',
        query: { labelSelector: 'app=x' },
        contentType: undefined,
        watch: false,
        status: 200,
        injected: false,
        token: 'fake-token',
      },
    ]);
    expect(kube.server.countRequests({ method: 'GET', pathPattern: '/pods' })).toBe(1);
  });

  it('writes a kubeconfig that client-node in a child process can use', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kube-fake-'));
    try {
      const path = join(dir, 'kubeconfig');
      await kube.server.writeKubeconfig(path, { namespace: 'kube-system' });
      const config = new KubeConfig();
      config.loadFromFile(path);
      expect(config.getContextObject(config.getCurrentContext())?.namespace).toBe('kube-system');

      const script = `
        import { KubeConfig, CoreV1Api } from '@kubernetes/client-node';
        const config = new KubeConfig();
        config.loadFromDefault();
        const list = await config.makeApiClient(CoreV1Api).listNamespace();
        console.log(list.items.map((n) => n.metadata.name).join(','));
      `;
      const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
        env: { ...process.env, KUBECONFIG: path },
        cwd: process.cwd(),
      });
      expect(stdout.trim()).toBe('default,kube-node-lease,kube-public,kube-system');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
