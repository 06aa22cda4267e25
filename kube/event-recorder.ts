// Kubernetes Events (core v1, what `kubectl describe` lists) about objects, recorded the way client-go's
// recorder does: an event seen before (same object, type, reason and message) bumps the count of the Event
// already written instead of adding one; each object has a token bucket (a burst, then one event per
// interval), so a failure observed at every resync cannot flood the API server; writes happen one at a time
// off the caller's path, and are dropped past a bound while the API server does not answer.
import type { Logger } from 'pino';
import type { KubeApi } from './client.ts';
import { isNotFound } from './errors.ts';
import { metaTime, resourcePath, type KubeObject } from './objects.ts';
import type { KubePath } from './paths.ts';

export interface EventRecorderOptions {
  api: KubeApi;
  /** `source.component` and `reportingComponent`: who says so, as `kubectl describe` shows it ("From"). */
  component: string;
  /** `reportingInstance`, e.g. the replica's identity. */
  instance: string;
  logger: Logger;
  now?: () => Date;
  /** Events remembered for count bumps (least recently used dropped). Default 4096, as client-go. */
  cacheSize?: number;
  /** Per object: events allowed at once, then one per `refillMs`. Defaults 25 and 5 min, as client-go. */
  burst?: number;
  refillMs?: number;
  /** Writes waiting for the API server beyond this are dropped. Default 1000, as client-go's queue. */
  maxPending?: number;
}

export interface EventNote {
  type: 'Normal' | 'Warning';
  /** UpperCamelCase, short: `ApplyFailed`. */
  reason: string;
  message: string;
}

interface Written {
  name: string;
  count: number;
}

interface Bucket {
  tokens: number;
  refilledAt: number;
}

/** events.k8s.io/v1 refuses notes over 1 KiB; core v1 takes more, but `kubectl describe` lists one per line. */
const MAX_MESSAGE_LENGTH = 1024;

export class EventRecorder {
  readonly #options: Required<Omit<EventRecorderOptions, 'api' | 'logger' | 'now'>> & Pick<EventRecorderOptions, 'api' | 'logger'>;
  readonly #now: () => Date;
  /** Map order is insertion order: re-inserting on use makes it least-recently-used first. */
  readonly #written = new Map<string, Written>();
  readonly #buckets = new Map<string, Bucket>();
  #pending = 0;
  #chain: Promise<void> = Promise.resolve();
  #sequence = 0;

  constructor(options: EventRecorderOptions) {
    this.#options = { cacheSize: 4096, burst: 25, refillMs: 300_000, maxPending: 1000, ...options };
    this.#now = options.now ?? (() => new Date());
  }

  /** Records `note` about `object` (which needs apiVersion, kind, name, namespace and uid); returns at once. */
  record(object: KubeObject, note: EventNote): void {
    const uid = object.metadata?.uid ?? '';
    if (!this.#takeToken(uid)) {
      this.#options.logger.debug({ object: describe(object), reason: note.reason }, 'event dropped: too many about this object');
      return;
    }
    if (this.#pending >= this.#options.maxPending) {
      this.#options.logger.warn({ object: describe(object), reason: note.reason }, 'event dropped: the API server is not keeping up');
      return;
    }
    this.#pending += 1;
    this.#chain = this.#chain
      .then(() => this.#write(object, note))
      .catch((error: unknown) => this.#options.logger.warn({ object: describe(object), reason: note.reason, err: error }, 'could not record an event'))
      .finally(() => {
        this.#pending -= 1;
      });
  }

  /** Resolves once every event recorded so far has been written (or failed). */
  flushed(): Promise<void> {
    return this.#chain;
  }

  async #write(object: KubeObject, note: EventNote): Promise<void> {
    const { api } = this.#options;
    const namespace = object.metadata?.namespace ?? 'default';
    const message = note.message.length > MAX_MESSAGE_LENGTH ? `${note.message.slice(0, MAX_MESSAGE_LENGTH - 1)}…` : note.message;
    const key = [object.metadata?.uid, note.type, note.reason, message].join('\0');
    const timestamp = metaTime(this.#now());
    const seen = this.#written.get(key);
    if (seen !== undefined) {
      this.#written.delete(key);
      try {
        await api.mergePatch(eventPath(namespace, seen.name), { count: seen.count + 1, lastTimestamp: timestamp });
        this.#remember(key, { name: seen.name, count: seen.count + 1 });
        return;
      } catch (error) {
        // Events expire (an hour by default): then it is a new one.
        if (!isNotFound(error)) throw error;
      }
    }
    const name = `${object.metadata?.name}.${this.#uniqueSuffix()}`;
    await api.create(eventPath(namespace), {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace },
      involvedObject: {
        apiVersion: object.apiVersion,
        kind: object.kind,
        name: object.metadata?.name,
        namespace: object.metadata?.namespace,
        uid: object.metadata?.uid,
        resourceVersion: object.metadata?.resourceVersion,
      },
      type: note.type,
      reason: note.reason,
      message,
      source: { component: this.#options.component },
      reportingComponent: this.#options.component,
      reportingInstance: this.#options.instance,
      firstTimestamp: timestamp,
      lastTimestamp: timestamp,
      count: 1,
    } as KubeObject);
    this.#remember(key, { name, count: 1 });
  }

  #remember(key: string, written: Written): void {
    this.#written.set(key, written);
    if (this.#written.size > this.#options.cacheSize) this.#written.delete(this.#written.keys().next().value!);
  }

  #takeToken(uid: string): boolean {
    const now = this.#now().getTime();
    const { burst, refillMs, cacheSize } = this.#options;
    const bucket = this.#buckets.get(uid) ?? { tokens: burst, refilledAt: now };
    const refills = Math.floor((now - bucket.refilledAt) / refillMs);
    if (refills > 0) {
      bucket.tokens = Math.min(burst, bucket.tokens + refills);
      bucket.refilledAt += refills * refillMs;
    }
    this.#buckets.delete(uid);
    this.#buckets.set(uid, bucket);
    if (this.#buckets.size > cacheSize) this.#buckets.delete(this.#buckets.keys().next().value!);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /** client-go names Events `<object>.<nanoseconds in hex>`; a sequence keeps two in one millisecond apart. */
  #uniqueSuffix(): string {
    this.#sequence = (this.#sequence + 1) % 1_000_000;
    return (BigInt(this.#now().getTime()) * 1_000_000n + BigInt(this.#sequence)).toString(16);
  }
}

function eventPath(namespace: string, name?: string): KubePath {
  return resourcePath({ apiVersion: 'v1', kind: 'Event', namespace, name });
}

function describe(object: KubeObject): string {
  return `${object.kind} ${object.metadata?.namespace}/${object.metadata?.name}`;
}
