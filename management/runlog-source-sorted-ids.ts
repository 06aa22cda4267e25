// A set of run ids kept in sorted order, read a page at a time from the newest down: the index behind one
// filter of one app's runs in the RunLog cache.
//
// A plain sorted array: a page is a binary search plus the page itself, O(log n + page size). Writes are
// O(n) in the worst case (a splice moves the tail), but the common writes are cheap — a new run has the
// largest id (UUID v7 sorts by creation), so it is appended; a trimmed run is among the oldest, a splice near
// the front of an array of pointers, microseconds at the 10^4 runs an app holds (replicas × keepFinished).

export interface IdPage {
  /** Newest (largest) first. */
  ids: string[];
  /** More ids sort below the last one returned. */
  hasMore: boolean;
}

export class SortedIds {
  /** Ascending: UUID v7 ids compare by creation time as plain strings, as SQLite's `ORDER BY id` does. */
  readonly #ids: string[] = [];

  add(id: string): void {
    const ids = this.#ids;
    const last = ids.at(-1);
    if (last === undefined || id > last) {
      ids.push(id);
      return;
    }
    const at = this.#lowerBound(id);
    if (ids[at] !== id) ids.splice(at, 0, id);
  }

  delete(id: string): void {
    const at = this.#lowerBound(id);
    if (this.#ids[at] === id) this.#ids.splice(at, 1);
  }

  /** Up to `limit` ids below `beforeId` (all ids when null), newest first. */
  pageBefore(beforeId: string | null, limit: number): IdPage {
    const end = beforeId === null ? this.#ids.length : this.#lowerBound(beforeId);
    const start = Math.max(0, end - limit);
    const ids: string[] = [];
    for (let i = end - 1; i >= start; i--) ids.push(this.#ids[i]!);
    return { ids, hasMore: start > 0 };
  }

  /** The first position whose id is not below `id` (the length when every id is). */
  #lowerBound(id: string): number {
    let low = 0;
    let high = this.#ids.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#ids[middle]! < id) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}
