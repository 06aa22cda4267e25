// Waking an App at zero: its Deployment's scale subresource raised to the replicas the calls waiting for it
// need (settings.ts replicasForWaiting). Idempotent and safe from any holder replica at once: replicas are only
// ever raised, never lowered (that is the scaler's), and a write lost to a concurrent one (409 on the
// resourceVersion) is re-read rather than repeated blindly.
import type { KubeApi } from '../kube/client.ts';
import { isConflict, isNotFound } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';

interface Scale extends KubeObject {
  spec?: { replicas?: number };
}

const ATTEMPTS = 5;

/**
 * Raises the Deployment's replicas to `replicas` (default 1) when fewer are asked for; returns the replicas it
 * raised them from, or null when as many or more were asked for already, or when the Deployment is not made
 * yet (an App just applied): its reconcile makes it with Kubernetes' default of one replica, and the calls
 * wait for it within their cold-start limit as for any start.
 */
export async function wakeDeployment(api: KubeApi, namespace: string, deployment: string, replicas = 1): Promise<number | null> {
  const path = KubePath.of({ group: 'apps', version: 'v1', namespace, resource: 'deployments', name: deployment, subresource: 'scale' });
  for (let attempt = 1; ; attempt += 1) {
    const scale = await api.get<Scale>(path).catch((error: unknown) => {
      if (isNotFound(error)) return null;
      throw error;
    });
    if (scale === null) return null;
    const asked = scale.spec?.replicas ?? 0;
    if (asked >= replicas) return null;
    try {
      await api.replace(path, { ...scale, spec: { ...scale.spec, replicas } });
      return asked;
    } catch (error) {
      if (!isConflict(error) || attempt === ATTEMPTS) throw new Error(`waking ${namespace}/${deployment} (scale ${asked} → ${replicas}): ${(error as Error).message}`, { cause: error });
    }
  }
}

/**
 * How long a wake that asked for some replicas stands for later calls asking no more: a burst's calls then cost
 * the API server no read each. Short, as the scaler may take the app back to zero meanwhile (only once no call
 * waits, after its wake deadline: docs/autoscaling.md `NeverReady`).
 */
const ASKED_STANDS_MS = 1000;

/**
 * One wake at a time per App: a burst of calls arriving at zero makes one write for the first and one more for
 * all that came meanwhile (each asking for what the calls waiting then need), not one per call; and calls that
 * ask for no more than was asked within ASKED_STANDS_MS make none.
 */
export class Waker {
  readonly #wake: (namespace: string, deployment: string, replicas: number) => Promise<unknown>;
  /** By `namespace/deployment`: the most replicas asked for while a write is under way, and its end. */
  readonly #under = new Map<string, { wanted: number; done: Promise<void> }>();
  /** By `namespace/deployment`: the replicas the last wake asked for, and when it ended. */
  readonly #asked = new Map<string, { replicas: number; at: number }>();

  constructor(wake: (namespace: string, deployment: string, replicas: number) => Promise<unknown>) {
    this.#wake = wake;
  }

  /** Resolves once a write asking for at least `replicas` has ended (or rejects with its error). */
  wake(namespace: string, deployment: string, replicas: number): Promise<void> {
    const key = `${namespace}/${deployment}`;
    const asked = this.#asked.get(key);
    if (asked !== undefined) {
      if (performance.now() - asked.at >= ASKED_STANDS_MS) this.#asked.delete(key);
      else if (asked.replicas >= replicas) return Promise.resolve();
    }
    const under = this.#under.get(key);
    if (under !== undefined) {
      under.wanted = Math.max(under.wanted, replicas);
      return under.done;
    }
    const entry = { wanted: replicas, done: Promise.resolve() };
    entry.done = (async () => {
      try {
        let written = 0;
        while (entry.wanted > written) {
          const asking = entry.wanted;
          await this.#wake(namespace, deployment, asking);
          written = asking;
          this.#asked.set(key, { replicas: asking, at: performance.now() });
        }
      } finally {
        this.#under.delete(key);
      }
    })();
    this.#under.set(key, entry);
    return entry.done;
  }
}
