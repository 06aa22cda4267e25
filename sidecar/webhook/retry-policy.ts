// When a webhook attempt is repeated, and how long the deliverer waits before repeating it. The rules are the
// service interface's retry table (spec 6.2) written down as data, so the table in the spec and the one the
// code follows can be compared line by line.

/** What one delivery attempt came to. */
export type AttemptOutcome =
  | { readonly kind: 'response'; readonly statusCode: number }
  /** No answer: connection refused or reset, DNS failure, TLS failure. */
  | { readonly kind: 'network-error'; readonly message: string }
  /** Connection not established, or no complete answer, within the configured time. */
  | { readonly kind: 'timeout'; readonly message: string }
  /** The SSRF guard refused every address the destination resolved to. */
  | { readonly kind: 'refused'; readonly message: string };

export interface RetryRule {
  /** The row of the spec's table this rule stands for. */
  readonly rule: string;
  readonly matches: (outcome: AttemptOutcome) => boolean;
  readonly retry: boolean;
}

const statusIn =
  (low: number, high: number) =>
  (outcome: AttemptOutcome): boolean =>
    outcome.kind === 'response' && outcome.statusCode >= low && outcome.statusCode <= high;

/** First matching rule wins. */
export const RETRY_TABLE: readonly RetryRule[] = [
  { rule: '2xx: delivered, nothing to repeat', matches: statusIn(200, 299), retry: false },
  { rule: 'network error (connection failure)', matches: (o) => o.kind === 'network-error', retry: true },
  { rule: 'timeout', matches: (o) => o.kind === 'timeout', retry: true },
  // The guard's verdict will not change on the next attempt; repeating would only delay the failure.
  { rule: 'destination refused by the SSRF guard', matches: (o) => o.kind === 'refused', retry: false },
  { rule: '404', matches: statusIn(404, 404), retry: true },
  { rule: 'other 4xx: permanent failure', matches: statusIn(400, 499), retry: false },
  { rule: '5xx: not repeated, avoids duplicate side effects', matches: statusIn(500, 599), retry: false },
  { rule: 'any other non-2xx (1xx, 3xx; redirects are never followed)', matches: (o) => o.kind === 'response', retry: true },
];

export function isDelivered(outcome: AttemptOutcome): boolean {
  return outcome.kind === 'response' && outcome.statusCode >= 200 && outcome.statusCode <= 299;
}

function ruleFor(outcome: AttemptOutcome): RetryRule {
  const rule = RETRY_TABLE.find((candidate) => candidate.matches(outcome));
  // The last row matches every response and the rows above it every other kind.
  if (rule === undefined) throw new Error(`no retry rule matches attempt outcome ${JSON.stringify(outcome)}`);
  return rule;
}

export function shouldRetry(outcome: AttemptOutcome): boolean {
  return ruleFor(outcome).retry;
}

/** Attempts in total, first one included (spec 6.2). */
export const MAX_ATTEMPTS = 3;
/** The spec's bound on the wait between two attempts. */
export const MAX_GAP_MS = 5_000;

export interface RetrySchedule {
  /** Wait before the 2nd and the 3rd attempt, before jitter. */
  readonly delaysMs: readonly [number, number];
  /** Up to this much is added at random, so receivers that failed together are not hit again together. */
  readonly maxJitterMs: number;
}

export const DEFAULT_RETRY_SCHEDULE: RetrySchedule = { delaysMs: [1_000, 2_000], maxJitterMs: 500 };

/**
 * The wait before attempt `nextAttempt` (2 or 3), never above MAX_GAP_MS whatever the configuration.
 * `random` is in [0, 1), as Math.random.
 */
export function delayBeforeAttempt(schedule: RetrySchedule, nextAttempt: number, random: () => number): number {
  const base = schedule.delaysMs[nextAttempt - 2];
  if (base === undefined) throw new RangeError(`no retry delay for attempt ${nextAttempt}; attempts run 2..${MAX_ATTEMPTS}`);
  return Math.min(MAX_GAP_MS, Math.max(0, base + Math.floor(random() * schedule.maxJitterMs)));
}
