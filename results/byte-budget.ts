// How many bytes of request bodies the collector holds at once, across every request: a body is admitted only if
// its declared length (or, sent chunked, the largest body taken) fits what is left, so that however many pods send
// large batches at once, the operator never holds more than the bound in bodies. A request past it is answered
// 503 + Retry-After before its body is read, and its sender tries again later.
export class ByteBudget {
  readonly limit: number;
  #inUse = 0;
  #peak = 0;

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new Error(`a byte budget is a positive number of bytes, not ${limit}`);
    this.limit = limit;
  }

  /** Bytes held now. */
  get inUse(): number {
    return this.#inUse;
  }

  /** The most bytes ever held at once. */
  get peak(): number {
    return this.#peak;
  }

  /** Takes `bytes` if they fit; the returned release gives them back (once, however often it is called). */
  tryTake(bytes: number): (() => void) | undefined {
    if (this.#inUse + bytes > this.limit) return undefined;
    this.#inUse += bytes;
    this.#peak = Math.max(this.#peak, this.#inUse);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inUse -= bytes;
    };
  }
}
