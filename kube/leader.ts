// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it: one replica
// holds the lease and renews it every retry period; the others check it as often and take over once it has
// not been renewed for its duration. Expiry is judged by when *this* replica saw the lease last change, on
// its own monotonic clock, never by comparing the holder's timestamps with local time (clocks drift).
// Every write carries the resourceVersion it read, so two replicas racing for the lease cannot both win.
// A leader steps down the moment its renew deadline passes without a successful renewal (a timer, not the
// end of a renew that may hang), and every Lease call is aborted by then, so a hung API server cannot keep a
// replica reconciling after a standby may have taken over.
import type { Logger } from 'pino';
import type { KubeApi } from './client.ts';
import { isConflict } from './errors.ts';
import { resourcePath, type KubeObject } from './objects.ts';
import type { KubePath } from './paths.ts';

export interface LeaderElectorOptions {
  api: KubeApi;
  namespace: string;
  leaseName: string;
  identity: string;
  leaseDurationMs: number;
  /** The leader steps down when its last successful renewal is older than this; also each Lease call's bound. */
  renewDeadlineMs: number;
  retryPeriodMs: number;
  logger: Logger;
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

export class LeaderElector {
  readonly #options: LeaderElectorOptions;
  readonly #path: KubePath;
  #leading = false;
  #stopped = true;
  #timer: NodeJS.Timeout | undefined;
  /** Fires at the renew deadline of the current leadership; re-armed by every renewal. */
  #deadlineTimer: NodeJS.Timeout | undefined;
  #tick: Promise<void> | undefined;
  /** The lease record as last seen, and when (monotonic ms) it was first seen like that. */
  #observed: { holder: string; renewTime: string | undefined; durationMs: number; at: number } | undefined;
  #lastRenewalAt = 0;

  constructor(options: LeaderElectorOptions) {
    this.#options = options;
    this.#path = resourcePath({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: options.namespace, name: options.leaseName });
  }

  get isLeader(): boolean {
    return this.#leading;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  /** Stops campaigning; a leader releases the lease so a standby takes over at once rather than after it expires. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#tick;
    if (!this.#leading) return;
    try {
      await this.#release();
    } catch (error) {
      this.#options.logger.warn({ err: error }, 'could not release the leader lease; it will expire');
    }
    this.#stepDown('stopped');
  }

  #schedule(delayMs: number): void {
    this.#timer = setTimeout(() => {
      this.#tick = this.#tryAcquireOrRenew().finally(() => {
        if (!this.#stopped) this.#schedule(this.#options.retryPeriodMs);
      });
    }, delayMs);
  }

  async #tryAcquireOrRenew(): Promise<void> {
    const { api, identity, logger } = this.#options;
    try {
      const lease = await api.find<Lease>(this.#path, this.#callBound());
      if (this.#stopped) return;
      if (lease === undefined) {
        const leases = resourcePath({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: this.#options.namespace });
        await api.create(leases, this.#leaseFor(undefined), this.#callBound());
        this.#renewed();
        return;
      }
      const spec = lease.spec ?? {};
      this.#observe(spec);
      const holder = spec.holderIdentity ?? '';
      if (holder !== identity && holder !== '' && !this.#expired()) {
        if (this.#leading) this.#stepDown(`lease taken by ${holder}`);
        return;
      }
      await api.replace(this.#path, this.#leaseFor(lease), this.#callBound());
      this.#renewed();
    } catch (error) {
      // A lost race (409) is routine; anything else is worth a line.
      if (!isConflict(error)) logger.warn({ err: error, lease: this.#path }, 'leader lease check failed');
    }
  }

  /** A leader's call may last until its renew deadline, no longer; a candidate's one renew deadline. */
  #callBound(): { timeoutMs: number } {
    const { renewDeadlineMs } = this.#options;
    if (!this.#leading) return { timeoutMs: renewDeadlineMs };
    return { timeoutMs: Math.max(1, Math.ceil(this.#lastRenewalAt + renewDeadlineMs - performance.now())) };
  }

  /** The lease as this replica holds it: renewed now; acquired now unless it was already ours. */
  #leaseFor(current: Lease | undefined): Lease {
    const now = microTime(new Date());
    const previous = current?.spec ?? {};
    const ours = previous.holderIdentity === this.#options.identity;
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: this.#options.leaseName, namespace: this.#options.namespace, resourceVersion: current?.metadata?.resourceVersion },
      spec: {
        holderIdentity: this.#options.identity,
        leaseDurationSeconds: Math.ceil(this.#options.leaseDurationMs / 1000),
        acquireTime: ours && previous.acquireTime !== undefined ? previous.acquireTime : now,
        renewTime: now,
        leaseTransitions: (previous.leaseTransitions ?? 0) + (ours || current === undefined ? 0 : 1),
      },
    };
  }

  async #release(): Promise<void> {
    const bound = { timeoutMs: this.#options.renewDeadlineMs };
    const lease = await this.#options.api.find<Lease>(this.#path, bound);
    if (lease?.spec?.holderIdentity !== this.#options.identity) return;
    const now = microTime(new Date());
    await this.#options.api.replace(
      this.#path,
      { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: now, acquireTime: now } },
      bound,
    );
  }

  #observe(spec: LeaseSpec): void {
    const holder = spec.holderIdentity ?? '';
    const observed = this.#observed;
    if (observed !== undefined && observed.holder === holder && observed.renewTime === spec.renewTime) return;
    this.#observed = { holder, renewTime: spec.renewTime, durationMs: (spec.leaseDurationSeconds ?? 0) * 1000, at: performance.now() };
  }

  #expired(): boolean {
    return this.#observed === undefined || performance.now() - this.#observed.at > this.#observed.durationMs;
  }

  #renewed(): void {
    this.#lastRenewalAt = performance.now();
    this.#observed = undefined;
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = setTimeout(() => this.#stepDown('could not renew the lease within the renew deadline'), this.#options.renewDeadlineMs);
    this.#deadlineTimer.unref();
    if (this.#leading) return;
    this.#leading = true;
    this.#options.logger.info({ identity: this.#options.identity, lease: this.#path }, 'became the leader');
    this.#options.onStartedLeading();
  }

  #stepDown(why: string): void {
    clearTimeout(this.#deadlineTimer);
    if (!this.#leading) return;
    this.#leading = false;
    this.#options.logger.warn({ identity: this.#options.identity, lease: this.#path, why }, 'stopped leading');
    this.#options.onStoppedLeading();
  }
}

/** metav1.MicroTime: RFC 3339 with exactly six fractional digits (the API server parses no other precision). */
function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
