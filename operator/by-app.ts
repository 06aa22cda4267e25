// Items kept per App, each under one App at a time: the replicas' loads (autoscaling/app-load.ts) and the
// RunLogs' run counts (runlog-run-counts.ts). An item seen under another App than before moves, and the App it
// left is named so its sums can be told again.

export class ByApp<Item> {
  /** App key → item key → item. */
  readonly #byApp = new Map<string, Map<string, Item>>();
  /** Item key → its App key. */
  readonly #appOf = new Map<string, string>();

  /** The items under the App; undefined when none is. */
  of(appKey: string): ReadonlyMap<string, Item> | undefined {
    return this.#byApp.get(appKey);
  }

  /** The App the item is under; undefined when it is unknown. */
  appOf(itemKey: string): string | undefined {
    return this.#appOf.get(itemKey);
  }

  /** Every App with an item, and its items. */
  entries(): IterableIterator<[string, ReadonlyMap<string, Item>]> {
    return this.#byApp.entries();
  }

  /** Puts the item under the App; returns the App it moved from, when it was under another one. */
  set(appKey: string, itemKey: string, item: Item): string | undefined {
    const before = this.#appOf.get(itemKey);
    const movedFrom = before !== undefined && before !== appKey ? this.delete(itemKey) : undefined;
    let items = this.#byApp.get(appKey);
    if (items === undefined) this.#byApp.set(appKey, (items = new Map()));
    items.set(itemKey, item);
    this.#appOf.set(itemKey, appKey);
    return movedFrom;
  }

  /** Forgets the item; returns the App it was under, undefined when it was unknown. */
  delete(itemKey: string): string | undefined {
    const appKey = this.#appOf.get(itemKey);
    if (appKey === undefined) return undefined;
    this.#appOf.delete(itemKey);
    const items = this.#byApp.get(appKey);
    items?.delete(itemKey);
    if (items?.size === 0) this.#byApp.delete(appKey);
    return appKey;
  }
}
