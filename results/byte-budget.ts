// How many bytes of request bodies the collector holds at once, across every request: what has actually arrived,
// counted chunk by chunk as it is read (a body sent chunked, without a length, as much as one with it), never what
// a request declares. A request that has sent 10 bytes of a declared 17 MiB holds 10 bytes; one that stops
// sending is cut by its body's deadline (body-intake.ts), not by this budget.
//
// Shares are fair: while the budget has room, any namespace (a share) may use it; once it is full, a share that
// holds less than an equal part of it (the budget over the shares holding bytes now, counting the asker, and never
// less than `minShare`, one batch of the largest size) takes room from the share that holds the most above that
// part: that share's largest body still arriving is cut (its sender is answered 503 + Retry-After and sends it
// again), and its bytes given back. So two tenants that fill the budget with slow batches delay a third's batch by
// nothing; a tenant alone may use all of it.

/** One request's account: what it holds, and how it is cut when another share needs the room. */
export interface BodyHolding {
  /** Bytes this request holds now. */
  readonly held: number;
  /**
   * Takes `bytes` more for this request's body, cutting other shares' bodies if it is owed the room; false (and
   * nothing taken) when it is not: the request is then refused, and released.
   */
  take(bytes: number): boolean;
  /** The body arrived whole: it keeps its bytes until released, and is no longer cut to make room. */
  settle(): void;
  /** Gives every byte back and ends the account (once, however often it is called). */
  release(): void;
}

interface Holding {
  share: string;
  held: number;
  /** Still arriving: may be cut for another share. */
  preemptible: boolean;
  released: boolean;
  cut: () => void;
}

export class ByteBudget {
  readonly limit: number;
  /** The least room a share is owed when the budget is full, however many shares hold bytes. */
  readonly minShare: number;
  #inUse = 0;
  #peak = 0;
  #preemptions = 0;
  readonly #byShare = new Map<string, { held: number; holdings: Set<Holding> }>();

  /** `minShare`: the least room a share is owed (the collector's: a batch of the largest size); at most the budget. */
  constructor(limit: number, minShare: number) {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new Error(`a byte budget is a positive number of bytes, not ${limit}`);
    if (!Number.isSafeInteger(minShare) || minShare <= 0 || minShare > limit) throw new Error(`a share's room in a ${limit}-byte budget is 1 to ${limit} bytes, not ${minShare}`);
    this.limit = limit;
    this.minShare = minShare;
  }

  /** Bytes held now. */
  get inUse(): number {
    return this.#inUse;
  }

  /** The most bytes ever held at once. */
  get peak(): number {
    return this.#peak;
  }

  /** Bodies cut so far to make room for another share's. */
  get preemptions(): number {
    return this.#preemptions;
  }

  /** Bytes `share` holds now. */
  heldBy(share: string): number {
    return this.#byShare.get(share)?.held ?? 0;
  }

  /** What `share` is owed of a full budget now: an equal part among the shares holding bytes (and it). */
  fairShareOf(share: string): number {
    const shares = this.#byShare.size + (this.#byShare.has(share) ? 0 : 1);
    return Math.max(this.minShare, Math.floor(this.limit / shares));
  }

  /**
   * An account for one request of `share`, holding nothing yet. `cut` is called (once) when its bytes are taken
   * for another share's: by then they are given back already, and the request must be answered and dropped.
   */
  open(share: string, cut: () => void): BodyHolding {
    const holding: Holding = { share, held: 0, preemptible: true, released: false, cut };
    return {
      get held() {
        return holding.held;
      },
      take: (bytes) => this.#take(holding, bytes),
      settle: () => {
        holding.preemptible = false;
      },
      release: () => this.#release(holding),
    };
  }

  #take(holding: Holding, bytes: number): boolean {
    if (holding.released) return false;
    if (this.#inUse + bytes > this.limit) {
      const fair = this.fairShareOf(holding.share);
      if (this.heldBy(holding.share) + bytes > fair || !this.#makeRoom(bytes, fair)) return false;
    }
    let share = this.#byShare.get(holding.share);
    if (share === undefined) this.#byShare.set(holding.share, (share = { held: 0, holdings: new Set() }));
    share.held += bytes;
    share.holdings.add(holding);
    holding.held += bytes;
    this.#inUse += bytes;
    this.#peak = Math.max(this.#peak, this.#inUse);
    return true;
  }

  /**
   * Cuts bodies still arriving of the shares above `fair`, the one holding most first and its largest body first,
   * until `bytes` fit; false, with nothing cut, when cutting all of them would not make the room.
   */
  #makeRoom(bytes: number, fair: number): boolean {
    const victims: Holding[] = [];
    let room = this.limit - this.#inUse;
    // What each share above its part would hold after its victims so far: none is cut below `fair`.
    const left = new Map<string, number>();
    for (const [name, share] of this.#byShare) if (share.held > fair) left.set(name, share.held);
    const candidates = [...this.#byShare.entries()]
      .filter(([name]) => left.has(name))
      .flatMap(([, share]) => [...share.holdings].filter((holding) => holding.preemptible && holding.held > 0))
      .sort((a, b) => this.heldBy(b.share) - this.heldBy(a.share) || b.held - a.held);
    for (const candidate of candidates) {
      if (room >= bytes) break;
      const shareLeft = left.get(candidate.share)!;
      if (shareLeft <= fair) continue;
      victims.push(candidate);
      left.set(candidate.share, shareLeft - candidate.held);
      room += candidate.held;
    }
    if (room < bytes) return false;
    for (const victim of victims) {
      this.#release(victim);
      this.#preemptions += 1;
      victim.cut();
    }
    return true;
  }

  #release(holding: Holding): void {
    if (holding.released) return;
    holding.released = true;
    this.#inUse -= holding.held;
    const share = this.#byShare.get(holding.share);
    if (share === undefined) return;
    share.held -= holding.held;
    share.holdings.delete(holding);
    if (share.holdings.size === 0) this.#byShare.delete(holding.share);
    holding.held = 0;
  }
}
