// The endpoints controller of the in-memory API server, through client-node as a cluster's clients see it: the
// Endpoints of a Service with a selector follow its pods' IPs and readiness, as kube-controller-manager 1.20
// writes them; a Service without a selector is left alone.
import { CoreV1Api, type V1EndpointAddress, type V1Endpoints, type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait.ts';
import { serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ core: config.makeApiClient(CoreV1Api) }));
const namespace = 'default';

async function pod(name: string, labels: Record<string, string>, status: V1Pod['status']): Promise<void> {
  const created = await kube.core.createNamespacedPod({
    namespace,
    body: { metadata: { name, labels }, spec: { nodeName: 'node-1', containers: [{ name: 'app', image: 'app:1', ports: [{ name: 'web', containerPort: 8080 }] }] } },
  });
  if (status !== undefined) await kube.core.replaceNamespacedPodStatus({ name, namespace, body: { ...created, status } });
}

const ready = (ip: string): V1Pod['status'] => ({ podIP: ip, phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] });
const notReady = (ip: string): V1Pod['status'] => ({ podIP: ip, phase: 'Running', conditions: [{ type: 'Ready', status: 'False' }] });

async function endpoints(name: string): Promise<V1Endpoints | undefined> {
  return kube.core.readNamespacedEndpoints({ name, namespace }).catch(() => undefined);
}

const names = (addresses: V1EndpointAddress[] | undefined) => (addresses ?? []).map((address) => `${address.targetRef?.name} ${address.ip}`);

describe('the endpoints controller', () => {
  it('lists the selected pods with an IP, ready ones as addresses and the others as not ready, on the Service’s ports', async () => {
    await pod('web-1', { app: 'web' }, ready('192.0.2.11'));
    await pod('web-2', { app: 'web' }, notReady('192.0.2.12'));
    await pod('web-3', { app: 'web' }, undefined);
    await pod('other', { app: 'other' }, ready('192.0.2.13'));
    await kube.core.createNamespacedService({
      namespace,
      body: { metadata: { name: 'web', labels: { team: 'a' } }, spec: { clusterIP: 'None', selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'web', protocol: 'TCP' }] } },
    });
    const listed = await waitFor(() => endpoints('web'), { what: 'the Endpoints of web' });
    expect(listed.metadata?.labels).toEqual({ team: 'a', 'service.kubernetes.io/headless': '' });
    expect(listed.subsets).toHaveLength(1);
    expect(names(listed.subsets![0]!.addresses)).toEqual(['web-1 192.0.2.11']);
    expect(names(listed.subsets![0]!.notReadyAddresses)).toEqual(['web-2 192.0.2.12']);
    expect(listed.subsets![0]!.ports).toEqual([{ name: 'http', port: 8080, protocol: 'TCP' }]);
    expect(listed.subsets![0]!.addresses![0]).toMatchObject({ nodeName: 'node-1', targetRef: { kind: 'Pod', namespace, name: 'web-1' } });

    // web-2 becomes ready, web-1 is deleted: the Endpoints follow.
    const web2 = await kube.core.readNamespacedPod({ name: 'web-2', namespace });
    await kube.core.replaceNamespacedPodStatus({ name: 'web-2', namespace, body: { ...web2, status: ready('192.0.2.12') } });
    await kube.core.deleteNamespacedPod({ name: 'web-1', namespace });
    await waitFor(async () => {
      const subsets = (await endpoints('web'))?.subsets ?? [];
      return subsets.length === 1 && names(subsets[0]!.addresses).join() === 'web-2 192.0.2.12' && subsets[0]!.notReadyAddresses === undefined;
    }, { what: 'web-2 alone, ready' });
  });

  it('leaves a pod being deleted out, and deletes the Endpoints with the Service', async () => {
    await kube.core.createNamespacedService({ namespace, body: { metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8000, protocol: 'TCP' }] } } });
    await waitFor(() => endpoints('web'), { what: 'empty Endpoints for a Service that selects no pod yet' });
    expect((await endpoints('web'))?.subsets).toBeUndefined();
    const created = await kube.core.createNamespacedPod({ namespace, body: { metadata: { name: 'web-1', labels: { app: 'web' }, finalizers: ['test/hold'] }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } });
    await kube.core.replaceNamespacedPodStatus({ name: 'web-1', namespace, body: { ...created, status: ready('192.0.2.21') } });
    await waitFor(async () => (await endpoints('web'))?.subsets?.[0]?.addresses?.length === 1, { what: 'web-1 listed' });
    // Its finalizer keeps it, marked for deletion: no longer an endpoint.
    await kube.core.deleteNamespacedPod({ name: 'web-1', namespace });
    await waitFor(async () => (await endpoints('web'))?.subsets === undefined, { what: 'web-1 gone from the Endpoints once being deleted' });

    await kube.core.deleteNamespacedService({ name: 'web', namespace });
    await waitFor(async () => (await endpoints('web')) === undefined, { what: 'the Endpoints deleted with the Service' });
  });

  it('leaves the Endpoints of a Service without a selector to whoever writes them', async () => {
    await kube.core.createNamespacedService({ namespace, body: { metadata: { name: 'manual' }, spec: { ports: [{ port: 80, protocol: 'TCP' }] } } });
    await kube.core.createNamespacedEndpoints({ namespace, body: { metadata: { name: 'manual' }, subsets: [{ addresses: [{ ip: '192.0.2.31' }], ports: [{ port: 80 }] }] } });
    await pod('any', { app: 'web' }, ready('192.0.2.32'));
    expect((await endpoints('manual'))?.subsets?.[0]?.addresses?.map((address) => address.ip)).toEqual(['192.0.2.31']);
  });
});
