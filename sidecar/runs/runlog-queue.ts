// An ordered list of the RunLog window's entries (runs in flight, finished runs in completion order, runs not
// yet written) that items leave by going stale where they are, rather than by being removed: the window
// files every run into two of them a few times over its life, thousands of times a second, and a Map or Set
// would hash on each move. Stale items are skipped, and squeezed out once they outnumber the live ones, so
// pushing and taking from the front are O(1) amortised and memory stays proportional to what is live.

/** Stale items tolerated beyond twice the live ones before the list is compacted. */
const SLACK = 64;

export class LazyQueue<T> {
  readonly #isLive: (item: T) => boolean;
  #items: T[] = [];
  /** Items before it were taken or skipped for good. */
  #head = 0;

  /** `isLive` says whether an item is still in the list; once false for an item, it must stay false. */
  constructor(isLive: (item: T) => boolean) {
    this.#isLive = isLive;
  }

  /** Appends `item`, which must not be in the list already; `live` is how many live items it holds with it. */
  push(item: T, live: number): void {
    this.#items.push(item);
    if (this.#items.length - this.#head > 2 * live + SLACK) this.#compact();
  }

  /** Removes and returns the oldest live item. */
  shift(): T | undefined {
    const items = this.#items;
    while (this.#head < items.length) {
      const item = items[this.#head]!;
      this.#head += 1;
      if (this.#isLive(item)) {
        this.#release();
        return item;
      }
    }
    this.#release();
    return undefined;
  }

  /**
   * Walks the live items oldest first while `more()` holds, taking out each one `take` accepts (it goes stale);
   * the ones it refuses stay at the front, in order, so the next walk passes them again but nothing else.
   */
  takeOldest(take: (item: T) => boolean, more: () => boolean): void {
    const items = this.#items;
    let read = this.#head;
    const refused: T[] = [];
    while (read < items.length && more()) {
      const item = items[read]!;
      read += 1;
      if (this.#isLive(item) && !take(item)) refused.push(item);
    }
    for (let i = refused.length - 1; i >= 0; i -= 1) {
      read -= 1;
      items[read] = refused[i]!;
    }
    this.#head = read;
    this.#release();
  }

  /** Calls `visit` with each live item, newest first, until it returns false. `visit` may make items stale. */
  visitNewestFirst(visit: (item: T) => boolean): void {
    const items = this.#items;
    for (let i = items.length - 1; i >= this.#head; i -= 1) {
      const item = items[i]!;
      if (this.#isLive(item) && !visit(item)) return;
    }
  }

  /** Keeps only the live items `keep` accepts (it may change them as it goes), in order. */
  retain(keep: (item: T) => boolean): void {
    const items = this.#items;
    let kept = 0;
    for (let i = this.#head; i < items.length; i += 1) {
      const item = items[i]!;
      if (this.#isLive(item) && keep(item)) items[kept++] = item;
    }
    items.length = kept;
    this.#head = 0;
  }

  /** Replaces the list with `items`, in that order. */
  reset(items: T[]): void {
    this.#items = items;
    this.#head = 0;
  }

  #compact(): void {
    this.retain(() => true);
  }

  /** Lets go of the items before the head once they are half the array. */
  #release(): void {
    if (this.#head >= SLACK && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}
