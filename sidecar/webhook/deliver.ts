// Delivers run outcomes to webhooks: up to MAX_ATTEMPTS POSTs per run, following the retry table, through one
// keep-alive connection pool whose every connection passes the SSRF guard. A sidecar owns one deliverer for
// its lifetime; drain waits on `idle()` and then calls `close()`.

import { setTimeout as sleepFor } from 'node:timers/promises';
import type { Agent } from 'undici';
import type { WebhookRecord } from '../../crds/run-record-schema.ts';
import { undici } from '../lazy-undici.ts';
import { DestinationPolicy, DestinationRefusedError, guardedConnector, systemResolve } from './guard.ts';
import type { Resolve } from './guard.ts';
import { DEFAULT_RETRY_SCHEDULE, MAX_ATTEMPTS, delayBeforeAttempt, isDelivered, shouldRetry } from './retry-policy.ts';
import type { AttemptOutcome, RetrySchedule } from './retry-policy.ts';
import { OriginSlots } from './origin-slots.ts';
import type { WebhookSigner } from './sign.ts';

export interface WebhookDelivery {
  runId: string;
  endpoint: URL;
  /** From buildWebhookBody: sent, and signed, unchanged on every attempt. */
  body: string;
  /** Present when the run call carried `X-Webhook-Secret`. */
  signer: WebhookSigner | null;
  /** Called after every attempt, e.g. to update the run record and count metrics. */
  onAttempt?: (report: AttemptReport) => void;
  /**
   * The first attempt waits for it (never rejecting): the run store keeping what a restarted sidecar needs to
   * send the delivery again. Counted pending meanwhile, so a drain waits for it too.
   */
  kept?: Promise<void>;
}

/** The run record's `webhook` member without the endpoint. */
export type WebhookProgress = Omit<WebhookRecord, 'endpoint'>;
export type DeliveryOutcome = WebhookProgress & { state: 'delivered' | 'failed' };

export interface AttemptReport {
  runId: string;
  /** 1-based. */
  attempt: number;
  outcome: AttemptOutcome;
  /** From sending the request (a connection to the receiver free) to its answer or failure. */
  durationMs: number;
  /** How long the attempt waited for one of the connections to its receiver before it was sent. */
  connectionWaitMs: number;
  /** The wait before the next attempt, null when this attempt was the last. */
  nextDelayMs: number | null;
  /** The delivery's state after this attempt, ready to copy onto the run record. */
  progress: WebhookProgress;
}

/** Time as the deliverer sees it; tests replace it to run retries without waiting. */
export interface DeliveryClock {
  nowMs(): number;
  /** Resolves after `ms`; rejects when `signal` aborts first. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  /** In [0, 1), for retry jitter. */
  random(): number;
}

export const systemClock: DeliveryClock = {
  nowMs: () => Date.now(),
  sleep: (ms, signal) => sleepFor(ms, undefined, { signal }),
  random: () => Math.random(),
};

export interface DelivererOptions {
  /** CIDRs admitted despite the SSRF guard (LOOPBACK_CIDRS in local mode). Default: none. */
  allowCidrs?: readonly string[];
  resolve?: Resolve;
  clock?: DeliveryClock;
  schedule?: RetrySchedule;
  /** Default 5 s. */
  connectTimeoutMs?: number;
  /** Whole attempt: connect, send, answer; counted from when a connection to the receiver is free. Default 10 s. */
  attemptTimeoutMs?: number;
  /** How long an attempt may wait for a connection to its receiver. Default DEFAULT_CONNECTION_WAIT_LIMIT_MS. */
  connectionWaitLimitMs?: number;
  /** The receiver's answer body is read up to this many bytes and discarded. Default 64 KiB. */
  responseBodyLimitBytes?: number;
  /**
   * Sockets per receiver origin, and so attempts in flight to it. A slow receiver under a burst of runs would
   * otherwise get one socket per delivery in flight; the others wait their turn (OriginSlots). Default 128.
   */
  connectionsPerOrigin?: number;
}

/**
 * How long an attempt may wait for one of its receiver's connections before it counts as a timeout (and is
 * retried as one). Generous: a receiver slower than the pool drains gets its deliveries late, not failed; this
 * only bounds how late (128 connections to a receiver answering in 8 s clear ~9,600 deliveries in 10 minutes).
 * The wait happens before the attempt is signed and timed, so neither the signature's timestamp nor the
 * attempt timeout includes it.
 */
export const DEFAULT_CONNECTION_WAIT_LIMIT_MS = 10 * 60_000;
const DEFAULT_CONNECTIONS_PER_ORIGIN = 128;

interface AttemptResult {
  outcome: AttemptOutcome;
  durationMs: number;
  connectionWaitMs: number;
}

const SHUTDOWN_MESSAGE = 'delivery abandoned: the sidecar is shutting down';

export class WebhookDeliverer {
  readonly #createAgent: () => Agent;
  /** Created with the first delivery: a sidecar whose runs have no webhook never loads undici. */
  #agent: Agent | null = null;
  readonly #clock: DeliveryClock;
  readonly #schedule: RetrySchedule;
  readonly #attemptTimeoutMs: number;
  readonly #connectionWaitLimitMs: number;
  readonly #slots: OriginSlots;
  readonly #responseBodyLimitBytes: number;
  readonly #shutdown = new AbortController();
  #pending = 0;
  #idleWaiters: (() => void)[] = [];

  constructor(options: DelivererOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#schedule = options.schedule ?? DEFAULT_RETRY_SCHEDULE;
    this.#attemptTimeoutMs = options.attemptTimeoutMs ?? 10_000;
    this.#connectionWaitLimitMs = options.connectionWaitLimitMs ?? DEFAULT_CONNECTION_WAIT_LIMIT_MS;
    const connectionsPerOrigin = options.connectionsPerOrigin ?? DEFAULT_CONNECTIONS_PER_ORIGIN;
    this.#slots = new OriginSlots(connectionsPerOrigin);
    this.#responseBodyLimitBytes = options.responseBodyLimitBytes ?? 64 * 1024;
    const policy = new DestinationPolicy(options.allowCidrs);
    this.#createAgent = () =>
      new (undici().Agent)({
        connect: guardedConnector({
          policy,
          resolve: options.resolve ?? systemResolve,
          connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
        }),
        connections: connectionsPerOrigin,
      });
  }

  /** Deliveries started and not yet finished. */
  get pendingCount(): number {
    return this.#pending;
  }

  /**
   * Delivers with retries and resolves with the final state, which supersedes the last `onAttempt` report.
   * Delivery failures never reject; it rejects only when `onAttempt` throws, a bug of the caller.
   */
  async deliver(delivery: WebhookDelivery): Promise<DeliveryOutcome> {
    if (this.#shutdown.signal.aborted) {
      return { state: 'failed', attempts: 0, lastStatusCode: null, lastError: SHUTDOWN_MESSAGE };
    }
    this.#pending += 1;
    try {
      if (delivery.kept !== undefined) {
        await delivery.kept;
        if (this.#shutdown.signal.aborted) return { state: 'failed', attempts: 0, lastStatusCode: null, lastError: SHUTDOWN_MESSAGE };
      }
      return await this.#deliverWithRetries(delivery);
    } finally {
      this.#pending -= 1;
      if (this.#pending === 0) this.#wakeIdleWaiters();
    }
  }

  /** Resolves once no delivery is pending (at once when none is). */
  idle(): Promise<void> {
    if (this.#pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #pooledAgent(): Agent {
    this.#agent ??= this.#createAgent();
    return this.#agent;
  }

  /**
   * Abandons what is still pending (waits between attempts and attempts in flight end at once, recorded as
   * failed) and closes the connection pool. Call `idle()` first, bounded by the drain deadline, to let
   * deliveries finish.
   */
  async close(): Promise<void> {
    this.#shutdown.abort();
    await this.idle();
    await this.#agent?.close();
  }

  async #deliverWithRetries(delivery: WebhookDelivery): Promise<DeliveryOutcome> {
    const { runId, onAttempt } = delivery;
    for (let attempt = 1; ; attempt += 1) {
      const { outcome, durationMs, connectionWaitMs } = await this.#attempt(delivery);
      const shuttingDown = this.#shutdown.signal.aborted;
      const delivered = isDelivered(outcome);
      const lastStatusCode = outcome.kind === 'response' ? outcome.statusCode : null;
      const lastError = delivered ? null : describeFailure(outcome, shuttingDown);

      if (attempt === MAX_ATTEMPTS || !shouldRetry(outcome) || shuttingDown) {
        const final: DeliveryOutcome = { state: delivered ? 'delivered' : 'failed', attempts: attempt, lastStatusCode, lastError };
        onAttempt?.({ runId, attempt, outcome, durationMs, connectionWaitMs, nextDelayMs: null, progress: final });
        return final;
      }

      const progress: WebhookProgress = { state: 'pending', attempts: attempt, lastStatusCode, lastError };
      const nextDelayMs = delayBeforeAttempt(this.#schedule, attempt + 1, () => this.#clock.random());
      onAttempt?.({ runId, attempt, outcome, durationMs, connectionWaitMs, nextDelayMs, progress });
      try {
        await this.#clock.sleep(nextDelayMs, this.#shutdown.signal);
      } catch (error) {
        if (!this.#shutdown.signal.aborted) throw error;
        return { ...progress, state: 'failed', lastError: `${SHUTDOWN_MESSAGE} (after: ${lastError})` };
      }
    }
  }

  /** Waits for a connection to the receiver, then sends one attempt: its timer starts only then. */
  async #attempt(delivery: WebhookDelivery): Promise<AttemptResult> {
    const waitStarted = performance.now();
    const slot = await this.#slots.acquire(delivery.endpoint.origin, this.#connectionWaitLimitMs, this.#shutdown.signal);
    const connectionWaitMs = performance.now() - waitStarted;
    if (slot === null) {
      const outcome: AttemptOutcome = this.#shutdown.signal.aborted
        ? { kind: 'network-error', message: 'not sent: it was waiting for a connection to the receiver' }
        : { kind: 'timeout', message: `not sent: no connection to the receiver came free within ${this.#connectionWaitLimitMs} ms` };
      return { outcome, durationMs: 0, connectionWaitMs };
    }
    const sent = performance.now();
    try {
      const outcome = await this.#send(delivery);
      return { outcome, durationMs: performance.now() - sent, connectionWaitMs };
    } finally {
      slot.release();
    }
  }

  async #send(delivery: WebhookDelivery): Promise<AttemptOutcome> {
    const { runId, endpoint, body, signer } = delivery;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': runId };
    if (signer !== null) {
      // Signed afresh per attempt: the timestamp is the moment this attempt is sent.
      Object.assign(headers, signer.headers(runId, Math.floor(this.#clock.nowMs() / 1000), body));
    }
    const authorization = basicAuthorization(endpoint);
    if (authorization !== null) headers['authorization'] = authorization;

    const attempt = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      attempt.abort();
    }, this.#attemptTimeoutMs);
    const abandon = (): void => attempt.abort();
    this.#shutdown.signal.addEventListener('abort', abandon, { once: true });
    try {
      // undici's dispatcher does not follow redirects: a 3xx is an answer like any other.
      const response = await this.#pooledAgent().request({
        origin: endpoint.origin,
        path: endpoint.pathname + endpoint.search,
        method: 'POST',
        headers,
        body,
        signal: attempt.signal,
      });
      // The answer is in the status; the body is read (bounded, so the connection can be reused) and dropped.
      // Failing to read it changes nothing about the answer, hence the ignored rejection.
      await response.body.dump({ limit: this.#responseBodyLimitBytes }).catch(() => undefined);
      return { kind: 'response', statusCode: response.statusCode };
    } catch (error) {
      if (timedOut) return { kind: 'timeout', message: `no answer within ${this.#attemptTimeoutMs} ms` };
      return classifyRequestError(error);
    } finally {
      clearTimeout(timer);
      this.#shutdown.signal.removeEventListener('abort', abandon);
    }
  }

  #wakeIdleWaiters(): void {
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }
}

function classifyRequestError(error: unknown): AttemptOutcome {
  if (error instanceof DestinationRefusedError) return { kind: 'refused', message: error.message };
  const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return { kind: 'timeout', message: `connect: ${message}` };
  return { kind: 'network-error', message: typeof code === 'string' ? `${code}: ${message}` : message };
}

function describeFailure(outcome: AttemptOutcome, shuttingDown: boolean): string {
  if (outcome.kind === 'response') return `receiver answered HTTP ${outcome.statusCode}`;
  if (shuttingDown) return `${SHUTDOWN_MESSAGE} (attempt: ${outcome.message})`;
  return outcome.message;
}

/** Userinfo in the endpoint (`https://user:pass@host/…`) is sent the way browsers and curl send it. */
function basicAuthorization(endpoint: URL): string | null {
  if (endpoint.username === '' && endpoint.password === '') return null;
  const credentials = `${percentDecoded(endpoint.username)}:${percentDecoded(endpoint.password)}`;
  return `Basic ${Buffer.from(credentials, 'utf8').toString('base64')}`;
}

/** The URL parser keeps a stray `%` as typed; such a part is sent as typed rather than failing the delivery. */
function percentDecoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
