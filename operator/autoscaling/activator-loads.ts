// The calls waiting at the activators (`runlet activator` pods), for the leader's autoscaler. An activator holds
// the calls of an App at zero, and keeps holding them after its first replica is ready: each replica gets at
// most replica_concurrency of them at once (hold-slots.ts), so a replica's sidecar reports a full replica, not
// the 50 calls queued behind it. Without these counts, a burst arriving through an activator would ask for
// replicas only as fast as the replicas' own load doubles. So the leader asks each activator for its
// HeldLoadReport (`GET /load` on its admin port), once per tick as it asks the replicas (load-scraper.ts), and
// the scaler counts those calls as it counts the calls held in its own process (held-demand.ts). A call on a
// replica is no longer counted by the activator, only by that replica: none is counted twice.
//
// Knative has its activators push the same (pkg/activator/stat_reporter.go, over a websocket to the
// autoscaler); here the leader, which knows the activators from the holder Service's Endpoints, asks them,
// as it asks the replicas: no connection from the activators to whichever operator replica leads.
// An activator that stops answering stops counting after a few missed scrapes, as a replica does; the scrape
// itself is periodic-scraper.ts's, as the replicas'.
import type { ReplicaAddress } from '../replica-address.ts';
import type { HolderAddress } from './endpoints.ts';
import { HELD_LOAD_PATH, type HeldCount, type HeldDemand } from './held-demand.ts';
import { PeriodicScraper, type ScrapeSchedule } from './periodic-scraper.ts';

/** An activator holds at most 1,000 calls by default, each App's name and namespace ≤ 63 + 253 bytes. */
const MAX_ANSWER_BYTES = 512 * 1024;
/** As a replica's load (app-load.ts): a few missed scrapes. */
const DEFAULT_FRESH_MS = 3000;

export interface ActivatorLoadsOptions extends ScrapeSchedule {
  /** Where an activator's admin port is reached, from its holder address (the holder Service's Endpoints). */
  address(activator: HolderAddress): ReplicaAddress;
  /** How long an activator's last answer counts. Default 3 s. */
  freshMs?: number;
}

/** An activator's last answer: `namespace/app` → calls waiting, and when it was read. */
interface HeldAnswer {
  held: Map<string, number>;
  scrapedAt: number;
}

const activatorKey = (address: HolderAddress): string => `${address.ip}:${address.port}`;

export class ActivatorLoads implements HeldDemand {
  readonly #freshMs: number;
  readonly #now: () => number;
  /** The holder Service's ready addresses, as last set. */
  #activators: readonly HolderAddress[] = [];
  /** By activator key: only of activators still listed (the scraper forgets the others). */
  readonly #answers = new Map<string, HeldAnswer>();
  readonly #scraper: PeriodicScraper<HolderAddress, Map<string, number>>;

  constructor(options: ActivatorLoadsOptions) {
    this.#freshMs = options.freshMs ?? DEFAULT_FRESH_MS;
    this.#now = options.now ?? Date.now;
    this.#scraper = new PeriodicScraper(
      {
        targets: () => this.#activators,
        key: activatorKey,
        address: options.address,
        path: HELD_LOAD_PATH,
        maxBytes: MAX_ANSWER_BYTES,
        parse: parseHeldReport,
        answered: (activator, held, scrapedAt) => this.#answers.set(activatorKey(activator), { held, scrapedAt }),
        forgotten: (activator) => this.#answers.delete(activatorKey(activator)),
        kind: 'activator',
        describe: activatorKey,
        failureMeans: 'the calls waiting there stop counting for the autoscaler',
      },
      options,
    );
  }

  /** The activators now (the holder Service's ready addresses): those gone stop counting at once. */
  setActivators(addresses: readonly HolderAddress[]): void {
    this.#activators = [...addresses];
    this.#scraper.relist();
  }

  /** Calls to the App waiting at the activators, as their fresh answers say. */
  held(namespace: string, app: string): number {
    const key = `${namespace}/${app}`;
    const now = this.#now();
    let held = 0;
    for (const answer of this.#answers.values()) {
      if (now - answer.scrapedAt > this.#freshMs) continue;
      held += answer.held.get(key) ?? 0;
    }
    return held;
  }

  start(): void {
    this.#scraper.start();
  }

  /** Stops asking; resolves once the scrapes in hand have ended. What was read stops counting. */
  stop(): Promise<void> {
    return this.#scraper.stop();
  }

  /** One round: every activator not already being asked. */
  scrape(): void {
    this.#scraper.scrape();
  }
}

/** The activator's answer, checked: `namespace/app` → calls waiting. Not trusted to scale an App to anything it likes. */
export function parseHeldReport(body: string, where: string): Map<string, number> {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    throw new Error(`${where} answered no JSON: ${(error as Error).message}`);
  }
  const apps = (value as { apps?: unknown } | null)?.apps;
  if (!Array.isArray(apps)) throw new Error(`${where} answered ${body.slice(0, 80)}, not a held-calls report ({"apps": [...]})`);
  const held = new Map<string, number>();
  for (const entry of apps as Partial<HeldCount>[]) {
    const { namespace, app, held: count } = entry ?? {};
    if (typeof namespace !== 'string' || namespace === '' || namespace.includes('/') || typeof app !== 'string' || app === '') {
      throw new Error(`${where}: an entry names no App (namespace and app): ${JSON.stringify(entry).slice(0, 120)}`);
    }
    if (!Number.isSafeInteger(count) || (count as number) < 0) throw new Error(`${where}: held of ${namespace}/${app} must be a non-negative integer, got ${JSON.stringify(count)}`);
    const key = `${namespace}/${app}`;
    held.set(key, (held.get(key) ?? 0) + (count as number));
  }
  return held;
}
