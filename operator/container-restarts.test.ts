import { describe, expect, it } from 'vitest';
import { containerRestarts, restartOf } from './container-restarts.ts';
import type { PodObject } from './runlog-verdict.ts';

const NOW = new Date('2026-11-26T11:00:00Z');

function pod(statuses: unknown): PodObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'hello-7d9c-x2x4z', namespace: 'team-a', labels: { 'runlet.dev/app': 'hello' } },
    status: { phase: 'Running', containerStatuses: containerRestarts(statuses) },
  };
}

describe('restartOf', () => {
  const running = pod([{ name: 'app', restartCount: 0 }, { name: 'sidecar', restartCount: 0 }]);

  it('names the container the kubelet restarted, how it ended and how often, from the API server’s container statuses', () => {
    const crashed = pod([
      { name: 'app', restartCount: 1, ready: true, lastState: { terminated: { exitCode: 137, reason: 'Error', finishedAt: '2026-11-26T10:59:59Z' } } },
      { name: 'sidecar', restartCount: 0 },
    ]);
    expect(restartOf(crashed, running, NOW)).toEqual({
      time: '2026-11-26T11:00:00Z',
      pod: 'hello-7d9c-x2x4z',
      container: 'app',
      restartCount: 1,
      exitCode: 137,
      reason: 'Error',
      message: "container app of pod hello-7d9c-x2x4z ended with exit code 137 (killed by SIGKILL) and was restarted by the kubelet (restart 1 of this pod's app)",
    });
  });

  it('says OOMKilled and the kubelet’s message when there is one', () => {
    const killed = pod([{ name: 'sidecar', restartCount: 3, lastState: { terminated: { exitCode: 1, reason: 'OOMKilled', message: 'out of memory\n' } } }]);
    expect(restartOf(killed, pod([{ name: 'sidecar', restartCount: 2 }]), NOW)?.message).toBe(
      "container sidecar of pod hello-7d9c-x2x4z ended with exit code 1 (OOMKilled): out of memory and was restarted by the kubelet (restart 3 of this pod's sidecar)",
    );
  });

  it('reports nothing for a pod first seen, or one whose counts did not grow', () => {
    const restartedLongAgo = pod([{ name: 'app', restartCount: 4, lastState: { terminated: { exitCode: 2 } } }]);
    expect(restartOf(restartedLongAgo, undefined, NOW)).toBeUndefined();
    expect(restartOf(restartedLongAgo, restartedLongAgo, NOW)).toBeUndefined();
    expect(restartOf(running, running, NOW)).toBeUndefined();
  });

  it('takes hostile container statuses without throwing', () => {
    expect(containerRestarts('not a list')).toBeUndefined();
    expect(restartOf(pod([{}]), pod([{}]), NOW)).toBeUndefined();
  });
});
