// The leader's periodic scrape of small JSON answers, shared by the two load signals: each replica's sidecar
// (load-scraper.ts) and each activator (activator-loads.ts). At every tick the targets are listed again; each is
// asked once (`scrapeGet`: a timeout and a body limit), over a keep-alive connection of its own, so a scrape
// costs a request, not a connection. One request per target at a time: a target slower than the interval is
// skipped until it answers, and its late answer is still taken. A target no longer listed is forgotten, and an
// answer arriving after that is dropped, so a target gone is never brought back. Each outcome is counted.
//
// What differs stays with the callers: what a target is, where it is reached, how its answer is checked and
// handed on, and how long an answer counts.
import { Agent } from 'node:http';
import type { Logger } from 'pino';
import type { ReplicaAddress } from '../replica-address.ts';
import { scrapeGet } from './scrape-get.ts';

export type ScrapeOutcome = 'ok' | 'failed';

/** How often targets are asked, how long one may take, and where it is said how it went: the callers' options. */
export interface ScrapeSchedule {
  /** How often every target is asked: the scaler's tick. */
  intervalMs: number;
  /**
   * Bound on one scrape, from the request to the answer's last byte. Default 2 s (Knative's is 3 s): a target
   * busy with a burst may answer late, and its late answer is still the freshest; meanwhile its next ticks are
   * skipped. Below the 3 s an answer counts for.
   */
  timeoutMs?: number;
  logger: Logger;
  /** Epoch ms, stamped on each answer. Default Date.now. */
  now?: () => number;
  /** Each scrape's outcome, for the operator's metrics. */
  onScrape?(outcome: ScrapeOutcome): void;
}

const DEFAULT_TIMEOUT_MS = 2000;

/** What is scraped: the targets, where and what they are asked, and where their answers go. */
export interface ScrapeTargets<Target, Answer> {
  /** The targets now: listed at every tick and by `relist`. */
  targets(): Iterable<Target>;
  /** A target's identity: two listings of one key are one target. */
  key(target: Target): string;
  /** Where the target is asked. May throw (no address known): that scrape counts as failed. */
  address(target: Target): ReplicaAddress;
  path: string;
  /** The largest answer taken; a larger one is a failed scrape. */
  maxBytes: number;
  /** The answer, checked: throws, naming `where`, when it is not one. */
  parse(body: string, where: string): Answer;
  /** A target's checked answer and when it was read. Never called for a target already forgotten. */
  answered(target: Target, answer: Answer, scrapedAt: number): void;
  /** A target no longer listed, or every target when scraping stops: what it answered stops counting. */
  forgotten(target: Target): void;
  /** What a target is in the log (`pod`, `activator`), and its name there. */
  kind: string;
  describe(target: Target): string;
  /** What failing scrapes cost, for the warning (`the replica's load stops counting`). */
  failureMeans: string;
}

interface Entry<Target> {
  key: string;
  /** As last listed. */
  target: Target;
  /** A scrape of it is under way. */
  busy: boolean;
  /** Its last scrape failed: logged once, until one succeeds again. */
  failing: boolean;
}

export class PeriodicScraper<Target, Answer> {
  readonly #scraped: ScrapeTargets<Target, Answer>;
  readonly #schedule: ScrapeSchedule;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  /** Sockets kept open between scrapes: one per target (an agent's sockets are per host and port). */
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 1, maxFreeSockets: 1 });
  readonly #entries = new Map<string, Entry<Target>>();
  readonly #inFlight = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;

  constructor(targets: ScrapeTargets<Target, Answer>, schedule: ScrapeSchedule) {
    this.#scraped = targets;
    this.#schedule = schedule;
    this.#timeoutMs = schedule.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#now = schedule.now ?? Date.now;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.scrape();
    this.#timer = setInterval(() => this.scrape(), this.#schedule.intervalMs);
    this.#timer.unref();
  }

  /** Stops scraping; resolves once the scrapes in hand have ended. Every target is forgotten. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.allSettled(this.#inFlight);
    for (const entry of this.#entries.values()) this.#scraped.forgotten(entry.target);
    this.#entries.clear();
    this.#agent.destroy();
  }

  /** One tick: the targets listed again, and every one not already being asked is asked. */
  scrape(): void {
    this.relist();
    for (const entry of this.#entries.values()) {
      if (entry.busy) continue;
      entry.busy = true;
      const done = this.#scrapeOne(entry).finally(() => {
        entry.busy = false;
        this.#inFlight.delete(done);
      });
      this.#inFlight.add(done);
    }
  }

  /** The targets listed again without asking any: new ones are taken, those no longer listed forgotten at once. */
  relist(): void {
    const scraped = this.#scraped;
    const listed = new Set<string>();
    for (const target of scraped.targets()) {
      const targetKey = scraped.key(target);
      listed.add(targetKey);
      const entry = this.#entries.get(targetKey);
      if (entry === undefined) this.#entries.set(targetKey, { key: targetKey, target, busy: false, failing: false });
      else entry.target = target;
    }
    for (const [targetKey, entry] of this.#entries) {
      if (listed.has(targetKey)) continue;
      this.#entries.delete(targetKey);
      scraped.forgotten(entry.target);
    }
  }

  async #scrapeOne(entry: Entry<Target>): Promise<void> {
    const { logger, onScrape } = this.#schedule;
    const { kind, path } = this.#scraped;
    const target = entry.target;
    const name = this.#scraped.describe(target);
    let where = `${kind} ${name}`;
    let answer: Answer;
    try {
      const address = this.#scraped.address(target);
      where = `${address.host}:${address.port}${path}`;
      const body = await scrapeGet({ agent: this.#agent, address, path, timeoutMs: this.#timeoutMs, maxBytes: this.#scraped.maxBytes });
      answer = this.#scraped.parse(body, where);
    } catch (error) {
      onScrape?.('failed');
      if (!entry.failing) {
        logger.warn(
          { [kind]: name, err: error },
          `load scrape of ${where} failed: ${this.#scraped.failureMeans} after a few failed scrapes (logged once until it answers)`,
        );
      }
      entry.failing = true;
      return;
    }
    onScrape?.('ok');
    if (entry.failing) logger.info({ [kind]: name }, `load scrape of ${where} answered again`);
    entry.failing = false;
    // A target that left while it was asked is not brought back (nor one listed again meanwhile, as a new entry).
    if (this.#entries.get(entry.key) === entry) this.#scraped.answered(target, answer, this.#now());
  }
}
