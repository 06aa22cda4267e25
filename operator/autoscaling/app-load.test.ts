// An App's load summed from its replicas' RunLogs: whose load counts (pod Ready; pod not in the cache and the
// sample fresh), that a steady load written long ago still counts, and that the listener hears of changes only.
import { describe, expect, it } from 'vitest';
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import type { RunLogObject } from '../../management/runlog-source.ts';
import type { PodObject } from '../runlog-verdict.ts';
import { AppLoads, type AppLoad } from './app-load.ts';

const NOW = Date.parse('2030-01-01T00:10:00Z');

function load(overrides: Partial<RunLogLoad> = {}): RunLogLoad {
  return { inFlight: 1, queued: 0, averageConcurrency: 1, peakConcurrency: 1, requestsPerSecond: 2, concurrency: 4, sampledAt: new Date(NOW).toISOString(), ...overrides };
}

function runLog(name: string, replicaLoad: RunLogLoad | undefined, app = 'hello', namespace = 'team-a'): RunLogObject {
  return { apiVersion: 'runlet.dev/v1alpha1', kind: 'RunLog', metadata: { name, namespace }, spec: { appName: app }, status: { runs: [], load: replicaLoad } };
}

function pod(name: string, ready: boolean, namespace = 'team-a'): PodObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace }, status: { phase: 'Running', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] } };
}

function setUp(): { loads: AppLoads; pods: Map<string, PodObject>; told: [string, AppLoad][]; clock: { now: number } } {
  const pods = new Map<string, PodObject>();
  const told: [string, AppLoad][] = [];
  const clock = { now: NOW };
  const loads = new AppLoads({
    pod: (namespace, name) => pods.get(`${namespace}/${name}`),
    now: () => clock.now,
    onChange: (appKey, appLoad) => told.push([appKey, appLoad]),
  });
  return { loads, pods, told, clock };
}

describe('AppLoads', () => {
  it('sums the loads of the replicas whose pods are Ready, however long ago a steady load was written', () => {
    const { loads, pods, clock } = setUp();
    pods.set('team-a/hello-1', pod('hello-1', true));
    pods.set('team-a/hello-2', pod('hello-2', true));
    loads.runLogChanged(runLog('hello-1', load({ inFlight: 3, queued: 1, averageConcurrency: 3.3, peakConcurrency: 4, requestsPerSecond: 10.1 })));
    loads.runLogChanged(runLog('hello-2', load({ inFlight: 2, queued: 0, averageConcurrency: 1.2, peakConcurrency: 2, requestsPerSecond: 0.2 })));
    clock.now += 60 * 60_000;
    expect(loads.get('team-a', 'hello')).toEqual({
      at: clock.now,
      replicasReporting: 2,
      inFlight: 5,
      queued: 1,
      averageConcurrency: 4.5,
      peakConcurrency: 6,
      requestsPerSecond: 10.3,
    });
  });

  it('leaves out a replica whose pod is not Ready, and one whose pod it does not know once its sample is older than 3 s', () => {
    const { loads, pods, clock } = setUp();
    pods.set('team-a/hello-1', pod('hello-1', false));
    loads.runLogChanged(runLog('hello-1', load({ inFlight: 7 })));
    loads.runLogChanged(runLog('hello-2', load({ inFlight: 2 })));
    expect(loads.get('team-a', 'hello')).toMatchObject({ replicasReporting: 1, inFlight: 2 });
    clock.now += 3001;
    expect(loads.get('team-a', 'hello')).toMatchObject({ replicasReporting: 0, inFlight: 0 });
    pods.set('team-a/hello-1', pod('hello-1', true));
    expect(loads.get('team-a', 'hello')).toMatchObject({ replicasReporting: 1, inFlight: 7 });
  });

  it('keeps Apps and namespaces apart, and lists every App with a report', () => {
    const { loads } = setUp();
    loads.runLogChanged(runLog('hello-1', load({ inFlight: 1 })));
    loads.runLogChanged(runLog('other-1', load({ inFlight: 2 }), 'other'));
    loads.runLogChanged(runLog('hello-1', load({ inFlight: 4 }), 'hello', 'team-b'));
    expect([...loads.list()].map(({ namespace, app, load: { inFlight } }) => [namespace, app, inFlight])).toEqual([
      ['team-a', 'hello', 1],
      ['team-a', 'other', 2],
      ['team-b', 'hello', 4],
    ]);
    expect(loads.get('team-c', 'hello')).toMatchObject({ replicasReporting: 0, inFlight: 0, requestsPerSecond: 0 });
  });

  it('tells the listener when an App’s load changes: a RunLog written, deleted, a pod turning Ready; not when nothing moved', () => {
    const { loads, pods, told } = setUp();
    const summary = () => told.map(([appKey, appLoad]) => [appKey, appLoad.replicasReporting, appLoad.inFlight]);
    loads.runLogChanged(runLog('hello-1', load({ inFlight: 1 })));
    loads.runLogChanged(runLog('hello-1', load({ inFlight: 1 })));
    pods.set('team-a/hello-2', pod('hello-2', false));
    loads.runLogChanged(runLog('hello-2', load({ inFlight: 5 })));
    expect(summary()).toEqual([['team-a/hello', 1, 1]]);
    pods.set('team-a/hello-2', pod('hello-2', true));
    loads.podChanged(pods.get('team-a/hello-2')!);
    loads.runLogDeleted(runLog('hello-1', undefined));
    expect(summary()).toEqual([
      ['team-a/hello', 1, 1],
      ['team-a/hello', 2, 6],
      ['team-a/hello', 1, 5],
    ]);
  });

  it('drops a replica whose RunLog carries no load (a sidecar that does not report one)', () => {
    const { loads } = setUp();
    loads.runLogChanged(runLog('hello-1', load({ inFlight: 3 })));
    loads.runLogChanged(runLog('hello-1', undefined));
    expect(loads.get('team-a', 'hello').replicasReporting).toBe(0);
    expect([...loads.list()]).toEqual([]);
  });
});
