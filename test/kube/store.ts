// Object storage with etcd's versioning model: one global revision counter stamped on every write as
// `metadata.resourceVersion`, and a bounded history of change events that watches replay from. Events
// older than the history window are compacted away, which is what makes a watch answer 410 Gone.
// The store knows nothing of Kubernetes semantics; lifecycle.ts decides what is written.

import type { KubeObject } from './types.ts';

export type StoreEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  readonly type: StoreEventType;
  /** Resource key (`deployments.apps`) of the object. */
  readonly key: string;
  /** The object after the change; for DELETED its last state, stamped with the deletion's revision. */
  readonly object: KubeObject;
  /** The object before the change (MODIFIED and DELETED). */
  readonly previous: KubeObject | undefined;
  readonly revision: number;
}

export type StoreListener = (event: StoreEvent) => void;

export interface StoredEntry {
  readonly key: string;
  readonly object: KubeObject;
}

function objectKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

/** Where an object sorts among its kind: namespace, then name (etcd key order). */
export function storageOrderKey(object: KubeObject): string {
  return objectKey(object.metadata.namespace, object.metadata.name ?? '');
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

export class ObjectStore {
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private readonly uids = new Set<string>();
  private readonly history: StoreEvent[] = [];
  private readonly listeners = new Set<StoreListener>();
  private readonly historySize: number;
  private revision = 0;
  /** Highest revision whose event has been dropped from history; watches must start at or after it. */
  private compactedThrough = 0;

  constructor(historySize: number) {
    if (!Number.isInteger(historySize) || historySize < 1) {
      throw new Error(`watch history size must be a positive integer, got ${historySize}`);
    }
    this.historySize = historySize;
  }

  get currentRevision(): number {
    return this.revision;
  }

  get oldestWatchableRevision(): number {
    return this.compactedThrough;
  }

  /** Stored objects are deeply frozen: copy (structuredClone) before changing. */
  get(key: string, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.objects.get(key)?.get(objectKey(namespace, name));
  }

  /** Objects of one resource, in one namespace or all, ordered by namespace then name as etcd lists them. */
  list(key: string, namespace?: string): KubeObject[] {
    const all = [...(this.objects.get(key)?.values() ?? [])];
    return all
      .filter((object) => namespace === undefined || object.metadata.namespace === namespace)
      .map((object) => [storageOrderKey(object), object] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, object]) => object);
  }

  *entries(): Generator<StoredEntry> {
    for (const [key, byName] of this.objects) {
      for (const object of byName.values()) yield { key, object };
    }
  }

  hasUid(uid: string): boolean {
    return this.uids.has(uid);
  }

  create(key: string, object: KubeObject): KubeObject {
    const byName = this.objects.get(key) ?? new Map<string, KubeObject>();
    this.objects.set(key, byName);
    const id = this.idOf(object);
    if (byName.has(id)) throw new Error(`store: ${key} ${id} already exists`);
    const stored = this.stamp(object);
    byName.set(id, stored);
    if (stored.metadata.uid !== undefined) this.uids.add(stored.metadata.uid);
    this.record('ADDED', key, stored, undefined);
    return stored;
  }

  update(key: string, object: KubeObject): KubeObject {
    const id = this.idOf(object);
    const previous = this.objects.get(key)?.get(id);
    if (previous === undefined) throw new Error(`store: cannot update missing ${key} ${id}`);
    const stored = this.stamp(object);
    this.objects.get(key)!.set(id, stored);
    this.record('MODIFIED', key, stored, previous);
    return stored;
  }

  remove(key: string, object: KubeObject): KubeObject {
    const id = this.idOf(object);
    const previous = this.objects.get(key)?.get(id);
    if (previous === undefined) throw new Error(`store: cannot remove missing ${key} ${id}`);
    this.objects.get(key)!.delete(id);
    if (previous.metadata.uid !== undefined) this.uids.delete(previous.metadata.uid);
    // The DELETED event carries the last state at a new revision, as the real server's watch does.
    const tombstone = this.stamp(previous);
    this.record('DELETED', key, tombstone, previous);
    return tombstone;
  }

  /** Events after `revision`, oldest first; `undefined` when some of them were compacted away. */
  eventsAfter(revision: number): StoreEvent[] | undefined {
    if (revision < this.compactedThrough) return undefined;
    return this.history.filter((event) => event.revision > revision);
  }

  /** Drops the whole watch history, as an etcd compaction does: older revisions answer 410. */
  compact(): void {
    this.compactedThrough = this.revision;
    this.history.length = 0;
  }

  subscribe(listener: StoreListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private idOf(object: KubeObject): string {
    const name = object.metadata.name;
    if (name === undefined || name === '') throw new Error('store: object without metadata.name');
    return objectKey(object.metadata.namespace, name);
  }

  private stamp(object: KubeObject): KubeObject {
    this.revision += 1;
    const copy = structuredClone(object);
    copy.metadata.resourceVersion = String(this.revision);
    return deepFreeze(copy);
  }

  private record(type: StoreEventType, key: string, object: KubeObject, previous: KubeObject | undefined): void {
    const event: StoreEvent = { type, key, object, previous, revision: this.revision };
    this.history.push(event);
    while (this.history.length > this.historySize) {
      this.compactedThrough = this.history.shift()!.revision;
    }
    for (const listener of this.listeners) listener(event);
  }
}
