// The autoscaler's load signal, straight from the replicas: the leader asks every ready replica's sidecar for
// its load (`GET /load` on the admin port: a JSON object of a few hundred bytes) once per scaler tick, as
// Knative's autoscaler scrapes each pod's queue-proxy (pkg/autoscaler/metrics/stats_scraper.go), and hands
// what it reads to AppLoads. Nothing of it goes through the API server: a burst reaches the decision within
// a tick or two of the sidecar seeing it, and a throttled or failing API server does not freeze it.
//
// Unlike Knative, every ready pod is asked, not a sample: an App has at most 100 replicas, and a sample's
// error would be the autoscaler's. One request per pod at a time (a pod slower than the interval is skipped
// until it answers), over a keep-alive connection per pod, each bounded by a timeout and a body limit.
import { Agent } from 'node:http';
import type { Logger } from 'pino';
import { APP_LABEL } from '../../crds/api-group.ts';
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import { objectKey } from '../../kube/watch.ts';
import { SIDECAR_ADMIN_PORT } from '../render/names.ts';
import type { PodObject } from '../runlog-verdict.ts';
import { isPodReady, type ScrapedReplica } from './app-load.ts';
import type { ReplicaAddress } from '../replica-address.ts';
import { scrapeGet } from './scrape-get.ts';

/** The sidecar's answer is a few hundred bytes; anything much larger is not a load. */
const MAX_ANSWER_BYTES = 4096;
export const LOAD_PATH = '/load';
const DEFAULT_TIMEOUT_MS = 2000;

export type ScrapeOutcome = 'ok' | 'failed';

export interface LoadScraperOptions {
  /** The pods of Runlet's Apps, from the pod watch's cache (with their IP and readiness). */
  pods: { list(): PodObject[] };
  /** Where the scrapes go. */
  loads: { replicaScraped(replica: ScrapedReplica, load: RunLogLoad, scrapedAt: number): void; replicaGone(namespace: string, podName: string): void };
  /** Where a pod's admin port is reached. Default: its pod IP, port 8001. */
  address?(pod: PodObject): ReplicaAddress;
  /** How often every ready replica is asked: the scaler's tick. */
  intervalMs: number;
  /**
   * Bound on one scrape. Default 2 s (Knative's is 3 s): a replica busy with a burst may answer late, and its
   * late answer is still the freshest; meanwhile its next ticks are skipped. Below the 3 s a load counts for.
   */
  timeoutMs?: number;
  logger: Logger;
  /** Epoch ms, stamped on each scrape. Default Date.now. */
  now?: () => number;
  /** Each scrape's outcome, for the operator's metrics. */
  onScrape?(outcome: ScrapeOutcome): void;
}

function podAdminAddress(pod: PodObject): ReplicaAddress {
  return { host: pod.status!.podIP!, port: SIDECAR_ADMIN_PORT };
}

interface Scraped {
  replica: ScrapedReplica;
  /** A scrape of it is under way. */
  busy: boolean;
  /** Its last scrape failed: logged once, until one succeeds again. */
  failing: boolean;
}

export class LoadScraper {
  readonly #options: LoadScraperOptions;
  readonly #address: (pod: PodObject) => ReplicaAddress;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  /** Sockets kept open between scrapes: one per pod, so a scrape costs a request, not a connection. */
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 1, maxFreeSockets: 1 });
  /** Pod key → the replica scraped there. */
  readonly #scraped = new Map<string, Scraped>();
  readonly #inFlight = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: LoadScraperOptions) {
    this.#options = options;
    this.#address = options.address ?? podAdminAddress;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#now = options.now ?? Date.now;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.scrape();
    this.#timer = setInterval(() => this.scrape(), this.#options.intervalMs);
    this.#timer.unref();
  }

  /** Stops scraping; resolves once the scrapes in hand have ended. What was read stops counting. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.allSettled(this.#inFlight);
    for (const { replica } of this.#scraped.values()) this.#options.loads.replicaGone(replica.namespace, replica.podName);
    this.#scraped.clear();
    this.#agent.destroy();
  }

  /** One round: every ready pod not already being asked; pods no longer ready stop counting. */
  scrape(): void {
    const current = new Set<string>();
    for (const pod of this.#options.pods.list()) {
      const replica = scrapable(pod);
      if (replica === undefined) continue;
      const key = objectKey(replica.namespace, replica.podName);
      current.add(key);
      let scraped = this.#scraped.get(key);
      if (scraped === undefined) this.#scraped.set(key, (scraped = { replica, busy: false, failing: false }));
      if (scraped.busy) continue;
      scraped.busy = true;
      const done = this.#scrapeOne(pod, scraped).finally(() => {
        scraped.busy = false;
        this.#inFlight.delete(done);
      });
      this.#inFlight.add(done);
    }
    for (const [key, { replica }] of this.#scraped) {
      if (current.has(key)) continue;
      this.#scraped.delete(key);
      this.#options.loads.replicaGone(replica.namespace, replica.podName);
    }
  }

  async #scrapeOne(pod: PodObject, scraped: Scraped): Promise<void> {
    const { logger, loads, onScrape } = this.#options;
    let where = `pod ${scraped.replica.namespace}/${scraped.replica.podName}`;
    try {
      const address = this.#address(pod);
      where = `${address.host}:${address.port}${LOAD_PATH}`;
      const load = parseLoad(await scrapeGet({ agent: this.#agent, address, path: LOAD_PATH, timeoutMs: this.#timeoutMs, maxBytes: MAX_ANSWER_BYTES }), where);
      // A pod that left while it was asked is not brought back.
      if (!this.#scraped.has(objectKey(scraped.replica.namespace, scraped.replica.podName))) return;
      loads.replicaScraped(scraped.replica, load, this.#now());
      onScrape?.('ok');
      if (scraped.failing) logger.info({ pod: `${scraped.replica.namespace}/${scraped.replica.podName}` }, 'load scrape answered again');
      scraped.failing = false;
    } catch (error) {
      onScrape?.('failed');
      if (!scraped.failing) {
        logger.warn(
          { pod: `${scraped.replica.namespace}/${scraped.replica.podName}`, err: error },
          `load scrape of ${where} failed: the replica's load stops counting after a few failed scrapes (logged once until it answers)`,
        );
      }
      scraped.failing = true;
    }
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
