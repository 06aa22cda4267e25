import { describe, expect, it } from 'vitest';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { renderAppEndpoints, scalesToZero } from './endpoints.ts';
import { servingChanged } from './endpoints-switch.ts';

const app = storedApp({ ...pythonSpec(), scaling: { minReplicas: 0, maxReplicas: 3 } }, { name: 'hello', namespace: 'team-a' });

describe('renderAppEndpoints', () => {
  it('points at the ready pods, by name, on the sidecar run port', () => {
    const endpoints = renderAppEndpoints(app, [{ name: 'hello-b', ip: '10.0.0.2' }, { name: 'hello-a', ip: '10.0.0.1' }], [{ ip: '10.1.0.1', port: 8090 }]);
    expect(endpoints.metadata).toMatchObject({ name: 'hello', namespace: 'team-a' });
    expect(endpoints.metadata?.ownerReferences).toHaveLength(1);
    expect(endpoints.subsets).toEqual([
      {
        addresses: [
          { ip: '10.0.0.1', targetRef: { kind: 'Pod', name: 'hello-a', namespace: 'team-a' } },
          { ip: '10.0.0.2', targetRef: { kind: 'Pod', name: 'hello-b', namespace: 'team-a' } },
        ],
        ports: [{ name: 'http', port: 8000, protocol: 'TCP' }],
      },
    ]);
  });

  it('points at the holder replicas when no pod is ready, one subset per holder port', () => {
    const endpoints = renderAppEndpoints(app, [], [{ ip: '10.1.0.1', port: 8090 }, { ip: '10.1.0.2', port: 8090 }, { ip: '10.1.0.3', port: 9000 }]);
    expect(endpoints.subsets).toEqual([
      { addresses: [{ ip: '10.1.0.1' }, { ip: '10.1.0.2' }], ports: [{ name: 'http', port: 8090, protocol: 'TCP' }] },
      { addresses: [{ ip: '10.1.0.3' }], ports: [{ name: 'http', port: 9000, protocol: 'TCP' }] },
    ]);
  });

  it('is empty with neither (callers are refused rather than sent to a stale address)', () => {
    expect(renderAppEndpoints(app, [], []).subsets).toEqual([]);
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
