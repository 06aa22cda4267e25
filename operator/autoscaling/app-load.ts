// An App's load: the sum of the loads its replicas' sidecars serve at their admin port's `/load`, as the
// leader's scraper last read them (load-scraper.ts: every ready replica, each tick), for the scaler and the
// metrics. Nothing of it goes through the API server, so a throttled or failing API server does not freeze it.
// Whose load counts:
//   - a replica whose pod is Ready and whose last scrape is within `freshMs` of now (a replica that stops
//     answering drops out after a few missed scrapes, rather than holding its last load for ever);
//   - not a replica whose pod is known and not Ready (starting, draining, ended): its calls are going away;
//   - not a replica whose pod the cache no longer shows.
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import { objectKey } from '../../kube/watch.ts';
import { ByApp } from '../by-app.ts';
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
  /** The pod `name`, from the pod watch's cache; undefined when it has none. */
  pod(namespace: string, name: string): PodObject | undefined;
  /** How long a replica's scraped load counts: a few missed scrapes. Default 3000 ms. */
  freshMs?: number;
  /** The clock the scraper stamps its scrapes with (epoch ms). Default `Date.now`. */
  now?: () => number;
  /** An App's load changed (`appKey` is `namespace/name`); not called when only `at` moved. */
  onChange?(appKey: string, load: AppLoad): void;
}

/** What one replica's sidecar last said. */
interface ReplicaLoad {
  namespace: string;
  podName: string;
  load: RunLogLoad;
  /** When it was scraped (the operator's clock, not the sidecar's: no clock skew between them). */
  scrapedAt: number;
}

/** The replica a scrape read: its pod and the App it serves. */
export interface ScrapedReplica {
  namespace: string;
  podName: string;
  appName: string;
}

const DEFAULT_FRESH_MS = 3000;

export function isPodReady(pod: PodObject): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
}

export class AppLoads {
  readonly #options: AppLoadsOptions;
  readonly #freshMs: number;
  readonly #now: () => number;
  /** By App and pod key: the replicas' loads. */
  readonly #replicas = new ByApp<ReplicaLoad>();
  /** What `onChange` was last told per App, to call it only on a change. */
  readonly #told = new Map<string, AppLoad>();

  constructor(options: AppLoadsOptions) {
    this.#options = options;
    this.#freshMs = options.freshMs ?? DEFAULT_FRESH_MS;
    this.#now = options.now ?? Date.now;
  }

  /** The App's load now; zeros with `replicasReporting` 0 for an App no replica reports for. */
  get(namespace: string, appName: string): AppLoad {
    return this.#sum(this.#replicas.of(objectKey(namespace, appName)));
  }

  /** Every App some replica's load was scraped for, with its load now. */
  *list(): Iterable<{ namespace: string; app: string; load: AppLoad }> {
    for (const [appKey, replicas] of this.#replicas.entries()) {
      const slash = appKey.indexOf('/');
      yield { namespace: appKey.slice(0, slash), app: appKey.slice(slash + 1), load: this.#sum(replicas) };
    }
  }

  /** A scrape of `replica` read `load` at `scrapedAt`. */
  replicaScraped(replica: ScrapedReplica, load: RunLogLoad, scrapedAt: number): void {
    const podKey = objectKey(replica.namespace, replica.podName);
    const appKey = objectKey(replica.namespace, replica.appName);
    const movedFrom = this.#replicas.set(appKey, podKey, { namespace: replica.namespace, podName: replica.podName, load, scrapedAt });
    if (movedFrom !== undefined) this.#tell(movedFrom);
    this.#tell(appKey);
  }

  /** The replica is no longer scraped (its pod is gone or no longer Ready): its load stops counting. */
  replicaGone(namespace: string | undefined, podName: string | undefined): void {
    const appKey = this.#replicas.delete(objectKey(namespace, podName));
    if (appKey !== undefined) this.#tell(appKey);
  }

  /** A pod came, changed (readiness) or went: its replica's load may start or stop counting. */
  podChanged(pod: PodObject): void {
    const appKey = this.#replicas.appOf(objectKey(pod.metadata?.namespace, pod.metadata?.name));
    if (appKey !== undefined) this.#tell(appKey);
  }

  /** The App is gone: forget what `onChange` was told (its pods leave with their own events). */
  appDeleted(appKey: string): void {
    this.#told.delete(appKey);
  }

  #counts(replica: ReplicaLoad, now: number): boolean {
    const pod = this.#options.pod(replica.namespace, replica.podName);
    return pod !== undefined && isPodReady(pod) && now - replica.scrapedAt <= this.#freshMs;
  }

  #sum(replicas: ReadonlyMap<string, ReplicaLoad> | undefined): AppLoad {
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
