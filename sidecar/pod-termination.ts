// Whether the sidecar's own pod is being deleted: the one condition under which the admin port's /drain drains.
// The app container's preStop hook asks /drain (the kubelet runs it before the app's SIGTERM; as a native
// sidecar this container is stopped only after the app, so the hook is where its drain must begin). A hook path
// is a literal of the pod spec, which every reader of the namespace sees, and the admin port is reachable from
// every pod, so the request itself proves nothing: the API server does. A pod being deleted has a
// deletionTimestamp, or is gone already; anyone else's /drain finds neither and changes nothing.
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';

/** At most one read of the pod a second, however many /drain arrive: a flood costs the API server nothing more. */
const READ_INTERVAL_MS = 1000;

export interface PodTermination {
  /** Whether the pod is being deleted, as read after this call began; rejects when the API server cannot say. */
  terminating(): Promise<boolean>;
}

export function podTermination(api: () => Promise<KubeApi>, namespace: string, podName: string, now: () => number = Date.now): PodTermination {
  const path = KubePath.of({ version: 'v1', namespace, resource: 'pods', name: podName });
  let known = false;
  let lastReadAt = Number.NEGATIVE_INFINITY;
  let reading: Promise<unknown> = Promise.resolve();
  /** The next read, not begun yet: every call until it begins shares it, so none gets an answer older than itself. */
  let next: Promise<boolean> | undefined;
  async function read(): Promise<boolean> {
    await reading.catch(() => undefined);
    const wait = lastReadAt + READ_INTERVAL_MS - now();
    if (wait > 0) await new Promise((resolveLater) => setTimeout(resolveLater, wait));
    next = undefined;
    lastReadAt = now();
    const answer = (async () => {
      const pod = await (await api()).find<KubeObject & { metadata?: { deletionTimestamp?: unknown } }>(path);
      return pod === undefined || pod.metadata?.deletionTimestamp != null;
    })();
    reading = answer;
    return answer;
  }
  return {
    async terminating() {
      // A deletion is never undone.
      if (known) return true;
      next ??= read();
      known = (await next) || known;
      return known;
    },
  };
}
