// An App's load summed from its replicas' scraped loads: whose load counts (pod Ready and the scrape fresh; not
// a pod the cache does not show), and that the listener hears of changes only.
import { describe, expect, it } from 'vitest';
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import type { PodObject } from '../runlog-verdict.ts';
import { AppLoads, type AppLoad } from './app-load.ts';

const NOW = Date.parse('2030-01-01T00:10:00Z');

function load(overrides: Partial<RunLogLoad> = {}): RunLogLoad {
  return { inFlight: 1, queued: 0, averageConcurrency: 1, peakConcurrency: 1, requestsPerSecond: 2, concurrency: 4, sampledAt: new Date(NOW).toISOString(), ...overrides };
}

/** A scrape of pod `name` at the clock's time. */
function scraped(loads: AppLoads, clock: { now: number }, name: string, replicaLoad: RunLogLoad, app = 'hello', namespace = 'team-a'): void {
  loads.replicaScraped({ namespace, podName: name, appName: app }, replicaLoad, clock.now);
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
  it('sums the loads of the replicas whose pods are Ready, while their scrapes are fresh', () => {
    const { loads, pods, clock } = setUp();
    pods.set('team-a/hello-1', pod('hello-1', true));
    pods.set('team-a/hello-2', pod('hello-2', true));
    scraped(loads, clock, 'hello-1', load({ inFlight: 3, queued: 1, averageConcurrency: 3.3, peakConcurrency: 4, requestsPerSecond: 10.1 }));
    scraped(loads, clock, 'hello-2', load({ inFlight: 2, queued: 0, averageConcurrency: 1.2, peakConcurrency: 2, requestsPerSecond: 0.2 }));
    clock.now += 3000;
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

  it('leaves out a replica whose pod is not Ready or not known, and one not scraped for more than 3 s', () => {
    const { loads, pods, clock } = setUp();
    pods.set('team-a/hello-1', pod('hello-1', false));
    pods.set('team-a/hello-3', pod('hello-3', true));
    scraped(loads, clock, 'hello-1', load({ inFlight: 7 }));
    scraped(loads, clock, 'hello-2', load({ inFlight: 2 }));
    scraped(loads, clock, 'hello-3', load({ inFlight: 4 }));
    expect(loads.get('team-a', 'hello')).toMatchObject({ replicasReporting: 1, inFlight: 4 });
    pods.set('team-a/hello-1', pod('hello-1', true));
    expect(loads.get('team-a', 'hello')).toMatchObject({ replicasReporting: 2, inFlight: 11 });
    clock.now += 3001;
    expect(loads.get('team-a', 'hello')).toMatchObject({ replicasReporting: 0, inFlight: 0 });
  });

  it('keeps Apps and namespaces apart, and lists every App with a scraped replica', () => {
    const { loads, pods, clock } = setUp();
    pods.set('team-a/hello-1', pod('hello-1', true));
    pods.set('team-a/other-1', pod('other-1', true));
    pods.set('team-b/hello-1', pod('hello-1', true, 'team-b'));
    scraped(loads, clock, 'hello-1', load({ inFlight: 1 }));
    scraped(loads, clock, 'other-1', load({ inFlight: 2 }), 'other');
    scraped(loads, clock, 'hello-1', load({ inFlight: 4 }), 'hello', 'team-b');
    expect([...loads.list()].map(({ namespace, app, load: { inFlight } }) => [namespace, app, inFlight])).toEqual([
      ['team-a', 'hello', 1],
      ['team-a', 'other', 2],
      ['team-b', 'hello', 4],
    ]);
    expect(loads.get('team-c', 'hello')).toMatchObject({ replicasReporting: 0, inFlight: 0, requestsPerSecond: 0 });
  });

  it('tells the listener when an App’s load changes: a scrape, a replica gone, a pod turning Ready; not when nothing moved', () => {
    const { loads, pods, told, clock } = setUp();
    const summary = () => told.map(([appKey, appLoad]) => [appKey, appLoad.replicasReporting, appLoad.inFlight]);
    pods.set('team-a/hello-1', pod('hello-1', true));
    scraped(loads, clock, 'hello-1', load({ inFlight: 1 }));
    scraped(loads, clock, 'hello-1', load({ inFlight: 1 }));
    pods.set('team-a/hello-2', pod('hello-2', false));
    scraped(loads, clock, 'hello-2', load({ inFlight: 5 }));
    expect(summary()).toEqual([['team-a/hello', 1, 1]]);
    pods.set('team-a/hello-2', pod('hello-2', true));
    loads.podChanged(pods.get('team-a/hello-2')!);
    loads.replicaGone('team-a', 'hello-1');
    expect(summary()).toEqual([
      ['team-a/hello', 1, 1],
      ['team-a/hello', 2, 6],
      ['team-a/hello', 1, 5],
    ]);
    loads.replicaGone('team-a', 'hello-2');
    expect([...loads.list()]).toEqual([]);
  });
});
