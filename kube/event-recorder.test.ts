// The Event recorder against the in-memory API server: repeats bump the count of one Event, each object's
// events are rate-bounded, an expired Event is written anew, and long messages are cut to what the API takes.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { testLogger } from '../test/support/logger.ts';
import { KubeApi } from './client.ts';
import { EventRecorder, type EventRecorderOptions } from './event-recorder.ts';
import type { KubeObject } from './objects.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

interface EventObject extends KubeObject {
  involvedObject: { kind: string; name: string; namespace: string; uid: string };
  type: string;
  reason: string;
  message: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  source: { component: string };
}

let server: KubeApiServer;
let api: KubeApi;
let clock: Date;

beforeEach(async () => {
  server = await startKubeApiServer();
  api = new KubeApi(await server.credentials(), { requestTimeoutMs: 10_000 });
  clock = new Date('2025-03-01T10:00:00Z');
});

afterEach(async () => {
  await api.close();
  await server.close();
});

const app = (uid = 'uid-1', name = 'hello'): KubeObject => ({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name, namespace: 'default', uid, resourceVersion: '7' } });

function recorder(options: Partial<EventRecorderOptions> = {}): EventRecorder {
  return new EventRecorder({ api, component: 'runlet-operator', instance: 'operator-a', logger: testLogger(), now: () => clock, ...options });
}

async function eventsAbout(name: string): Promise<EventObject[]> {
  return (await api.list<EventObject>(kubePathOf('/api/v1/namespaces/default/events'), { fieldSelector: `involvedObject.name=${name}` })).items;
}

describe('EventRecorder', () => {
  it('writes an Event about the object, and bumps its count when the same is seen again', async () => {
    const events = recorder();
    events.record(app(), { type: 'Warning', reason: 'ApplyFailed', message: 'etcd is having a day' });
    await events.flushed();
    clock = new Date('2025-03-01T10:05:00Z');
    events.record(app(), { type: 'Warning', reason: 'ApplyFailed', message: 'etcd is having a day' });
    events.record(app(), { type: 'Warning', reason: 'ApplyFailed', message: 'etcd is having a day' });
    await events.flushed();

    const [event, ...others] = await eventsAbout('hello');
    expect(others).toEqual([]);
    expect(event).toMatchObject({
      involvedObject: { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'hello', namespace: 'default', uid: 'uid-1' },
      type: 'Warning',
      reason: 'ApplyFailed',
      message: 'etcd is having a day',
      count: 3,
      firstTimestamp: '2025-03-01T10:00:00Z',
      lastTimestamp: '2025-03-01T10:05:00Z',
      source: { component: 'runlet-operator' },
    });
    expect(event!.metadata?.name).toMatch(/^hello\.[0-9a-f]+$/);
    expect(server.countRequests({ method: 'POST', pathPattern: '/events' })).toBe(1);
  });

  it('writes a new Event for a new reason or message, or another object', async () => {
    const events = recorder();
    events.record(app(), { type: 'Warning', reason: 'ApplyFailed', message: 'one' });
    events.record(app(), { type: 'Warning', reason: 'ApplyFailed', message: 'two' });
    events.record(app(), { type: 'Normal', reason: 'Ready', message: 'two' });
    events.record(app('uid-2', 'other'), { type: 'Warning', reason: 'ApplyFailed', message: 'one' });
    await events.flushed();
    expect((await eventsAbout('hello')).map((e) => `${e.reason}:${e.message}:${e.count}`).sort()).toEqual(['ApplyFailed:one:1', 'ApplyFailed:two:1', 'Ready:two:1']);
    expect(await eventsAbout('other')).toHaveLength(1);
  });

  it('bounds each object’s events: a burst, then one per interval; other objects are not held back', async () => {
    const events = recorder({ burst: 3, refillMs: 60_000 });
    for (let i = 0; i < 5; i += 1) events.record(app(), { type: 'Warning', reason: 'ApplyFailed', message: 'same' });
    events.record(app('uid-2', 'other'), { type: 'Warning', reason: 'ApplyFailed', message: 'same' });
    await events.flushed();
    expect((await eventsAbout('hello'))[0]?.count).toBe(3);
    expect(await eventsAbout('other')).toHaveLength(1);

    clock = new Date(clock.getTime() + 60_000);
    events.record(app(), { type: 'Warning', reason: 'ApplyFailed', message: 'same' });
    events.record(app(), { type: 'Warning', reason: 'ApplyFailed', message: 'same' });
    await events.flushed();
    expect((await eventsAbout('hello'))[0]?.count).toBe(4);
  });

  it('writes an Event anew when the one it counted has expired', async () => {
    const events = recorder();
    events.record(app(), { type: 'Normal', reason: 'Ready', message: 'serving' });
    await events.flushed();
    const [first] = await eventsAbout('hello');
    await api.delete(kubePathOf(`/api/v1/namespaces/default/events/${first!.metadata!.name}`));

    events.record(app(), { type: 'Normal', reason: 'Ready', message: 'serving' });
    await events.flushed();
    const [again, ...others] = await eventsAbout('hello');
    expect(others).toEqual([]);
    expect(again).toMatchObject({ reason: 'Ready', count: 1 });
    expect(again!.metadata?.name).not.toBe(first!.metadata?.name);
  });

  it('cuts a message to the 1 KiB the Event API takes, and survives an API server that refuses', async () => {
    const events = recorder();
    server.failNext({ method: 'POST', pathPattern: '/events', status: 500 });
    events.record(app(), { type: 'Warning', reason: 'Lost', message: 'refused' });
    events.record(app(), { type: 'Warning', reason: 'InvalidSpec', message: 'x'.repeat(5000) });
    await events.flushed();
    const [event, ...others] = await eventsAbout('hello');
    expect(others).toEqual([]);
    expect(event?.reason).toBe('InvalidSpec');
    expect(event?.message).toHaveLength(1024);
    expect(event?.message.endsWith('…')).toBe(true);
  });
});
