// How many bytes of request bodies the collector holds at once, across every request: a body is admitted only if
// its declared length (or, sent chunked, the largest body taken) fits what is left, so that however many pods send
// large batches at once, the operator never holds more than the bound in bodies. A request past it is answered
// 503 + Retry-After before its body is read, and its sender tries again later.
//
// One namespace (a tenant) may hold at most `shareLimit` of it, so that pods of one tenant sending large batches
// slowly cannot hold the whole budget and keep every other tenant's batches waiting.
export class ByteBudget {
  readonly limit: number;
  readonly shareLimit: number;
  #inUse = 0;
  #peak = 0;
  readonly #byShare = new Map<string, number>();

  /** `shareLimit`: what one share (namespace) may hold; default half the budget. */
  constructor(limit: number, shareLimit = Math.floor(limit / 2)) {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new Error(`a byte budget is a positive number of bytes, not ${limit}`);
    if (!Number.isSafeInteger(shareLimit) || shareLimit <= 0 || shareLimit > limit) throw new Error(`a share of a ${limit}-byte budget is 1 to ${limit} bytes, not ${shareLimit}`);
    this.limit = limit;
    this.shareLimit = shareLimit;
  }

  /** Bytes held now. */
  get inUse(): number {
    return this.#inUse;
  }

  /** The most bytes ever held at once. */
  get peak(): number {
    return this.#peak;
  }

  /** Bytes `share` holds now. */
  heldBy(share: string): number {
    return this.#byShare.get(share) ?? 0;
  }

  /**
   * Takes `bytes` for `share` if they fit both the budget and the share's part of it; the returned release gives
   * them back (once, however often it is called). Undefined, and nothing taken, when they do not fit.
   */
  tryTake(bytes: number, share: string): (() => void) | undefined {
    const held = this.heldBy(share);
    if (this.#inUse + bytes > this.limit || held + bytes > this.shareLimit) return undefined;
    this.#inUse += bytes;
    this.#byShare.set(share, held + bytes);
    this.#peak = Math.max(this.#peak, this.#inUse);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inUse -= bytes;
      const left = this.heldBy(share) - bytes;
      if (left === 0) this.#byShare.delete(share);
      else this.#byShare.set(share, left);
    };
  }
}
