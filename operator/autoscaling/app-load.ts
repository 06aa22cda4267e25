// An App's load: the sum of the loads its replicas' sidecars write into their RunLogs (`status.load`), kept
// current from the operator's RunLog and pod watches, for the scaler and the metrics.
//
// A sidecar writes its load only when it changes, so an old `sampledAt` does not mean an old load: a steady
// load is not rewritten. Whose load counts:
//   - a replica whose pod is Ready: its last written load stands, however old (its sidecar would have written
//     a change; a sidecar that cannot fails its readiness probe);
//   - a replica whose pod is known and not Ready (starting, draining, ended): none, its calls are going away;
//   - a replica whose pod the cache does not show (the pod watch lags the RunLog's, or the pod is gone): its
//     load only while `sampledAt` is within `freshMs` of now.
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import type { RunLogObject } from '../../management/runlog-source.ts';
import { APP_LABEL } from '../../crds/api-group.ts';
import { objectKey } from '../../kube/watch.ts';
import type { PodObject } from '../runlog-verdict.ts';

/** The load of one App: sums over the replicas whose load counts. */
export interface AppLoad {
  /** When this was summed (epoch ms). */
  at: number;
  replicasReporting: number;
  inFlight: number;
  queued: number;
  averageConcurrency: number;
  peakConcurrency: number;
  requestsPerSecond: number;
}

export interface AppLoadsOptions {
  /** The pod the RunLog `name` is named after, from the pod watch's cache; undefined when it has none. */
  pod(namespace: string, name: string): PodObject | undefined;
  /** How long the load of a replica whose pod is not in the cache counts after it was sampled. Default 3000 ms. */
  freshMs?: number;
  /** Wall clock (epoch ms): `sampledAt` is the sidecar's wall time. Default `Date.now`. */
  now?: () => number;
  /** An App's load changed (`appKey` is `namespace/name`); not called when only `at` moved. */
  onChange?(appKey: string, load: AppLoad): void;
}

/** What one replica's RunLog says, kept from its last event. */
interface ReplicaLoad {
  namespace: string;
  /** The RunLog's name, which is its pod's. */
  podName: string;
  load: RunLogLoad;
  sampledAt: number;
}

const DEFAULT_FRESH_MS = 3000;

export function isPodReady(pod: PodObject): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
}

export class AppLoads {
  readonly #options: AppLoadsOptions;
  readonly #freshMs: number;
  readonly #now: () => number;
  /** App key → RunLog key → the replica's load. */
  readonly #byApp = new Map<string, Map<string, ReplicaLoad>>();
  /** RunLog key → its App key. */
  readonly #appOf = new Map<string, string>();
  /** What `onChange` was last told per App, to call it only on a change. */
  readonly #told = new Map<string, AppLoad>();

  constructor(options: AppLoadsOptions) {
    this.#options = options;
    this.#freshMs = options.freshMs ?? DEFAULT_FRESH_MS;
    this.#now = options.now ?? Date.now;
  }

  /** The App's load now; zeros with `replicasReporting` 0 for an App no replica reports for. */
  get(namespace: string, appName: string): AppLoad {
    return this.#sum(this.#byApp.get(objectKey(namespace, appName)));
  }

  /** Every App some RunLog reports a load for, with its load now. */
  *list(): Iterable<{ namespace: string; app: string; load: AppLoad }> {
    for (const [appKey, replicas] of this.#byApp) {
      const slash = appKey.indexOf('/');
      yield { namespace: appKey.slice(0, slash), app: appKey.slice(slash + 1), load: this.#sum(replicas) };
    }
  }

  runLogChanged(runLog: RunLogObject): void {
    const { namespace, name } = runLog.metadata;
    const runLogKey = objectKey(namespace, name);
    const appName = runLog.spec?.appName ?? runLog.metadata.labels?.[APP_LABEL];
    const load = runLog.status?.load;
    const sampledAt = load === undefined ? NaN : Date.parse(load.sampledAt);
    if (namespace === undefined || name === undefined || appName === undefined || load === undefined || Number.isNaN(sampledAt)) {
      this.runLogDeleted(runLog);
      return;
    }
    const appKey = objectKey(namespace, appName);
    const before = this.#appOf.get(runLogKey);
    if (before !== undefined && before !== appKey) this.runLogDeleted(runLog);
    let replicas = this.#byApp.get(appKey);
    if (replicas === undefined) this.#byApp.set(appKey, (replicas = new Map()));
    replicas.set(runLogKey, { namespace, podName: name, load, sampledAt });
    this.#appOf.set(runLogKey, appKey);
    this.#tell(appKey);
  }

  runLogDeleted(runLog: RunLogObject): void {
    const runLogKey = objectKey(runLog.metadata.namespace, runLog.metadata.name);
    const appKey = this.#appOf.get(runLogKey);
    if (appKey === undefined) return;
    this.#appOf.delete(runLogKey);
    const replicas = this.#byApp.get(appKey);
    replicas?.delete(runLogKey);
    if (replicas?.size === 0) this.#byApp.delete(appKey);
    this.#tell(appKey);
  }

  /** A pod came, changed (readiness) or went: its replica's load may start or stop counting. */
  podChanged(pod: PodObject): void {
    const appKey = this.#appOf.get(objectKey(pod.metadata?.namespace, pod.metadata?.name));
    if (appKey !== undefined) this.#tell(appKey);
  }

  /** The App is gone: forget what `onChange` was told (its RunLogs leave with their own events). */
  appDeleted(appKey: string): void {
    this.#told.delete(appKey);
  }

  #counts(replica: ReplicaLoad, now: number): boolean {
    const pod = this.#options.pod(replica.namespace, replica.podName);
    if (pod !== undefined) return isPodReady(pod);
    return now - replica.sampledAt <= this.#freshMs;
  }

  #sum(replicas: Map<string, ReplicaLoad> | undefined): AppLoad {
    const at = this.#now();
    const sum: AppLoad = { at, replicasReporting: 0, inFlight: 0, queued: 0, averageConcurrency: 0, peakConcurrency: 0, requestsPerSecond: 0 };
    for (const replica of replicas?.values() ?? []) {
      if (!this.#counts(replica, at)) continue;
      const { load } = replica;
      sum.replicasReporting += 1;
      sum.inFlight += load.inFlight;
      sum.queued += load.queued;
      sum.averageConcurrency += load.averageConcurrency;
      sum.peakConcurrency += load.peakConcurrency;
      sum.requestsPerSecond += load.requestsPerSecond;
    }
    // Sums of two-decimal figures, without the binary fractions' tails (0.1 + 0.2 shows as 0.3).
    sum.averageConcurrency = rounded(sum.averageConcurrency);
    sum.requestsPerSecond = rounded(sum.requestsPerSecond);
    return sum;
  }

  #tell(appKey: string): void {
    const slash = appKey.indexOf('/');
    const load = this.get(appKey.slice(0, slash), appKey.slice(slash + 1));
    const told = this.#told.get(appKey);
    if (told !== undefined && sameLoad(told, load)) return;
    this.#told.set(appKey, load);
    this.#options.onChange?.(appKey, load);
  }
}

function rounded(value: number): number {
  return Math.round(value * 100) / 100;
}

/** Equal but for when each was summed. */
function sameLoad(a: AppLoad, b: AppLoad): boolean {
  return (
    a.replicasReporting === b.replicasReporting &&
    a.inFlight === b.inFlight &&
    a.queued === b.queued &&
    a.averageConcurrency === b.averageConcurrency &&
    a.peakConcurrency === b.peakConcurrency &&
    a.requestsPerSecond === b.requestsPerSecond
  );
}
