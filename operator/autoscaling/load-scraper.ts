// The autoscaler's load signal, straight from the replicas: the leader asks every ready replica's sidecar for
// its load (`GET /load` on the admin port: a JSON object of a few hundred bytes) once per scaler tick, as
// Knative's autoscaler scrapes each pod's queue-proxy (pkg/autoscaler/metrics/stats_scraper.go), and hands
// what it reads to AppLoads. Nothing of it goes through the API server: a burst reaches the decision within
// a tick or two of the sidecar seeing it, and a throttled or failing API server does not freeze it.
//
// Unlike Knative, every ready pod is asked, not a sample: an App has at most 100 replicas, and a sample's
// error would be the autoscaler's. The scrape itself (one request per pod at a time, keep-alive, bounded) is
// periodic-scraper.ts's; here are what a replica is, where it is reached, and what its answer must be.
import { APP_LABEL } from '../../crds/api-group.ts';
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import { objectKey } from '../../kube/watch.ts';
import { SIDECAR_ADMIN_PORT } from '../render/names.ts';
import type { PodObject } from '../runlog-verdict.ts';
import { isPodReady, type ScrapedReplica } from './app-load.ts';
import type { ReplicaAddress } from '../replica-address.ts';
import { PeriodicScraper, type ScrapeSchedule } from './periodic-scraper.ts';

/** The sidecar's answer is a few hundred bytes; anything much larger is not a load. */
const MAX_ANSWER_BYTES = 4096;
export const LOAD_PATH = '/load';

export interface LoadScraperOptions extends ScrapeSchedule {
  /** The pods of Runlet's Apps, from the pod watch's cache (with their IP and readiness). */
  pods: { list(): PodObject[] };
  /** Where the scrapes go. */
  loads: { replicaScraped(replica: ScrapedReplica, load: RunLogLoad, scrapedAt: number): void; replicaGone(namespace: string, podName: string): void };
  /** Where a pod's admin port is reached. Default: its pod IP, port 8001. */
  address?(pod: PodObject): ReplicaAddress;
}

function podAdminAddress(pod: PodObject): ReplicaAddress {
  return { host: pod.status!.podIP!, port: SIDECAR_ADMIN_PORT };
}

/** A ready replica, and the pod it is (for its address). */
export interface ReplicaPod {
  replica: ScrapedReplica;
  pod: PodObject;
}

/** The scraper of every ready replica's load: `start` on leading, `stop` on losing the lead. */
export function createLoadScraper(options: LoadScraperOptions): PeriodicScraper<ReplicaPod, RunLogLoad> {
  const address = options.address ?? podAdminAddress;
  return new PeriodicScraper(
    {
      targets: () => readyReplicas(options.pods.list()),
      key: ({ replica }) => objectKey(replica.namespace, replica.podName),
      address: ({ pod }) => address(pod),
      path: LOAD_PATH,
      maxBytes: MAX_ANSWER_BYTES,
      parse: parseLoad,
      answered: ({ replica }, load, scrapedAt) => options.loads.replicaScraped(replica, load, scrapedAt),
      // A pod no longer ready, or gone, stops counting at once.
      forgotten: ({ replica }) => options.loads.replicaGone(replica.namespace, replica.podName),
      kind: 'pod',
      describe: ({ replica }) => `${replica.namespace}/${replica.podName}`,
      failureMeans: "the replica's load stops counting",
    },
    options,
  );
}

function* readyReplicas(pods: readonly PodObject[]): Iterable<ReplicaPod> {
  for (const pod of pods) {
    const replica = scrapable(pod);
    if (replica !== undefined) yield { replica, pod };
  }
}

/** The replica a pod is, when its load is to be asked: an App's pod, Ready, not ending, with an IP. */
function scrapable(pod: PodObject): ScrapedReplica | undefined {
  const namespace = pod.metadata?.namespace;
  const podName = pod.metadata?.name;
  const appName = pod.metadata?.labels?.[APP_LABEL];
  if (namespace === undefined || podName === undefined || appName === undefined) return undefined;
  if (pod.metadata?.deletionTimestamp !== undefined || pod.status?.podIP === undefined || !isPodReady(pod)) return undefined;
  return { namespace, podName, appName };
}

const COUNTS = ['inFlight', 'queued', 'peakConcurrency'] as const;
const RATES = ['averageConcurrency', 'requestsPerSecond'] as const;

/** The sidecar's answer, checked: a replica is not trusted to scale its App to anything it likes. */
function parseLoad(body: string, where: string): RunLogLoad {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    throw new Error(`${where} answered no JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null) throw new Error(`${where} answered ${body.slice(0, 80)}, not a load object`);
  const load = value as Record<string, unknown>;
  for (const field of COUNTS) {
    if (!Number.isSafeInteger(load[field]) || (load[field] as number) < 0) throw new Error(`${where}: ${field} must be a non-negative integer, got ${JSON.stringify(load[field])}`);
  }
  for (const field of RATES) {
    if (typeof load[field] !== 'number' || !Number.isFinite(load[field]) || (load[field] as number) < 0) {
      throw new Error(`${where}: ${field} must be a non-negative number, got ${JSON.stringify(load[field])}`);
    }
  }
  if (!Number.isSafeInteger(load.concurrency) || (load.concurrency as number) < 1) throw new Error(`${where}: concurrency must be a positive integer, got ${JSON.stringify(load.concurrency)}`);
  return {
    inFlight: load.inFlight as number,
    queued: load.queued as number,
    averageConcurrency: load.averageConcurrency as number,
    peakConcurrency: load.peakConcurrency as number,
    requestsPerSecond: load.requestsPerSecond as number,
    concurrency: load.concurrency as number,
    sampledAt: typeof load.sampledAt === 'string' ? load.sampledAt : new Date().toISOString(),
  };
}
