import { describe, expect, it } from 'vitest';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { renderAppEndpointSlices, scalesToZero } from './endpoints.ts';
import { servingChanged } from './endpoints-switch.ts';

const app = storedApp({ ...pythonSpec(), scaling: { minReplicas: 0, maxReplicas: 3 } }, { name: 'hello', namespace: 'team-a' });
const V1 = 'discovery.k8s.io/v1';

describe('renderAppEndpointSlices', () => {
  it('points at the ready pods, by name, on the sidecar run port, in a slice of the Service the operator manages', () => {
    const [slice, ...more] = renderAppEndpointSlices(app, [{ name: 'hello-b', ip: '10.0.0.2' }, { name: 'hello-a', ip: '10.0.0.1' }], [{ ip: '10.1.0.1', port: 8090 }], V1);
    expect(more).toEqual([]);
    expect(slice!.apiVersion).toBe(V1);
    expect(slice!.metadata).toMatchObject({ name: 'hello-8000-ipv4', namespace: 'team-a' });
    expect(slice!.metadata?.labels).toMatchObject({ 'kubernetes.io/service-name': 'hello', 'endpointslice.kubernetes.io/managed-by': 'operator.runlet.dev' });
    expect(slice!.metadata?.ownerReferences).toHaveLength(1);
    expect(slice!.addressType).toBe('IPv4');
    expect(slice!.endpoints).toEqual([
      { addresses: ['10.0.0.1'], conditions: { ready: true }, targetRef: { kind: 'Pod', name: 'hello-a', namespace: 'team-a' } },
      { addresses: ['10.0.0.2'], conditions: { ready: true }, targetRef: { kind: 'Pod', name: 'hello-b', namespace: 'team-a' } },
    ]);
    expect(slice!.ports).toEqual([{ name: 'http', port: 8000, protocol: 'TCP' }]);
  });

  it('points at the holder replicas when no pod is ready, one slice per holder port and address family, in the version the server serves', () => {
    const slices = renderAppEndpointSlices(app, [], [{ ip: '10.1.0.2', port: 8090 }, { ip: '10.1.0.1', port: 8090 }, { ip: '10.1.0.3', port: 9000 }, { ip: 'fd00::1', port: 8090 }], 'discovery.k8s.io/v1beta1');
    expect(slices.map((slice) => [slice.apiVersion, slice.metadata?.name, slice.addressType, slice.ports[0]!.port, slice.endpoints.flatMap((endpoint) => endpoint.addresses)])).toEqual([
      ['discovery.k8s.io/v1beta1', 'hello-8090-ipv4', 'IPv4', 8090, ['10.1.0.1', '10.1.0.2']],
      ['discovery.k8s.io/v1beta1', 'hello-8090-ipv6', 'IPv6', 8090, ['fd00::1']],
      ['discovery.k8s.io/v1beta1', 'hello-9000-ipv4', 'IPv4', 9000, ['10.1.0.3']],
    ]);
    expect(slices.every((slice) => slice.endpoints.every((endpoint) => endpoint.targetRef === undefined))).toBe(true);
  });

  it('is none with neither (callers are refused rather than sent to a stale address)', () => {
    expect(renderAppEndpointSlices(app, [], [], V1)).toEqual([]);
  });

  it('only Apps with minReplicas 0 scale to zero', () => {
    expect(scalesToZero(app)).toBe(true);
    expect(scalesToZero(storedApp(pythonSpec(), { name: 'warm', namespace: 'team-a' }))).toBe(false);
  });
});

describe('servingChanged', () => {
  const pod = (ready: boolean, ending = false) => ({
    metadata: ending ? { deletionTimestamp: '2026-11-25T20:00:00Z' } : {},
    status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  });

  it('is a change when a pod starts or stops serving, begins to end, or is gone; not when it stays as it was', () => {
    expect(servingChanged(pod(true), false, pod(false))).toBe(true);
    expect(servingChanged(pod(false), false, pod(true))).toBe(true);
    expect(servingChanged(pod(true, true), false, pod(true))).toBe(true);
    expect(servingChanged(pod(false), true, undefined)).toBe(true);
    expect(servingChanged(pod(true), false, pod(true))).toBe(false);
    expect(servingChanged(pod(false), false, pod(false))).toBe(false);
    expect(servingChanged(pod(false, true), false, pod(true, true))).toBe(false);
  });

  it('takes a pod first seen ready as a change, and one first seen not ready as none', () => {
    expect(servingChanged(pod(true), false, undefined)).toBe(true);
    expect(servingChanged(pod(false), false, undefined)).toBe(false);
  });
});
