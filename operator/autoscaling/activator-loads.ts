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
// An activator that stops answering stops counting after a few missed scrapes, as a replica does.
import { Agent } from 'node:http';
import type { Logger } from 'pino';
import type { ReplicaAddress } from '../replica-address.ts';
import type { HolderAddress } from './endpoints.ts';
import { HELD_LOAD_PATH, type HeldCount, type HeldDemand } from './held-demand.ts';
import type { ScrapeOutcome } from './load-scraper.ts';
import { scrapeGet } from './scrape-get.ts';

/** An activator holds at most 1,000 calls by default, each App's name and namespace ≤ 63 + 253 bytes. */
const MAX_ANSWER_BYTES = 512 * 1024;
const DEFAULT_TIMEOUT_MS = 2000;
/** As a replica's load (app-load.ts): a few missed scrapes. */
const DEFAULT_FRESH_MS = 3000;

export interface ActivatorLoadsOptions {
  /** Where an activator's admin port is reached, from its holder address (the holder Service's Endpoints). */
  address(activator: HolderAddress): ReplicaAddress;
  /** How often every activator is asked: the scaler's tick. */
  intervalMs: number;
  /** Bound on one scrape. Default 2 s, as a replica's. */
  timeoutMs?: number;
  /** How long an activator's last answer counts. Default 3 s. */
  freshMs?: number;
  logger: Logger;
  /** Epoch ms. Default Date.now. */
  now?: () => number;
  onScrape?(outcome: ScrapeOutcome): void;
}

interface Activator {
  address: HolderAddress;
  /** `namespace/app` → calls waiting, as last answered; undefined before the first answer. */
  held: Map<string, number> | undefined;
  scrapedAt: number;
  busy: boolean;
  failing: boolean;
}

export class ActivatorLoads implements HeldDemand {
  readonly #options: ActivatorLoadsOptions;
  readonly #timeoutMs: number;
  readonly #freshMs: number;
  readonly #now: () => number;
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 1, maxFreeSockets: 1 });
  /** By `ip:port` of the holder address. */
  readonly #activators = new Map<string, Activator>();
  readonly #inFlight = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ActivatorLoadsOptions) {
    this.#options = options;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#freshMs = options.freshMs ?? DEFAULT_FRESH_MS;
    this.#now = options.now ?? Date.now;
  }

  /** The activators now (the holder Service's ready addresses): those gone stop counting at once. */
  setActivators(addresses: readonly HolderAddress[]): void {
    const current = new Set<string>();
    for (const address of addresses) {
      const key = `${address.ip}:${address.port}`;
      current.add(key);
      if (!this.#activators.has(key)) this.#activators.set(key, { address, held: undefined, scrapedAt: 0, busy: false, failing: false });
    }
    for (const key of this.#activators.keys()) if (!current.has(key)) this.#activators.delete(key);
  }

  /** Calls to the App waiting at the activators, as their fresh answers say. */
  held(namespace: string, app: string): number {
    const key = `${namespace}/${app}`;
    const now = this.#now();
    let held = 0;
    for (const activator of this.#activators.values()) {
      if (activator.held === undefined || now - activator.scrapedAt > this.#freshMs) continue;
      held += activator.held.get(key) ?? 0;
    }
    return held;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.scrape();
    this.#timer = setInterval(() => this.scrape(), this.#options.intervalMs);
    this.#timer.unref();
  }

  /** Stops asking; resolves once the scrapes in hand have ended. What was read stops counting. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.allSettled(this.#inFlight);
    for (const activator of this.#activators.values()) activator.held = undefined;
    this.#agent.destroy();
  }

  /** One round: every activator not already being asked. */
  scrape(): void {
    for (const activator of this.#activators.values()) {
      if (activator.busy) continue;
      activator.busy = true;
      const done = this.#scrapeOne(activator).finally(() => {
        activator.busy = false;
        this.#inFlight.delete(done);
      });
      this.#inFlight.add(done);
    }
  }

  async #scrapeOne(activator: Activator): Promise<void> {
    const { logger, onScrape } = this.#options;
    let where = `the activator at ${activator.address.ip}`;
    try {
      const address = this.#options.address(activator.address);
      where = `${address.host}:${address.port}${HELD_LOAD_PATH}`;
      const body = await scrapeGet({ agent: this.#agent, address, path: HELD_LOAD_PATH, timeoutMs: this.#timeoutMs, maxBytes: MAX_ANSWER_BYTES });
      activator.held = parseHeldReport(body, where);
      activator.scrapedAt = this.#now();
      onScrape?.('ok');
      if (activator.failing) logger.info({ activator: where }, 'activator load scrape answered again');
      activator.failing = false;
    } catch (error) {
      onScrape?.('failed');
      if (!activator.failing) {
        logger.warn(
          { activator: where, err: error },
          `load scrape of ${where} failed: the calls waiting there stop counting for the autoscaler after a few failed scrapes (logged once until it answers)`,
        );
      }
      activator.failing = true;
    }
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
