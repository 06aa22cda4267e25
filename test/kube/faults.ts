// Injected failures: the next matching requests are answered with an error Status instead of being
// served, or never answered at all (hung), so tests can exercise retries, timeouts and error handling
// against precise failures.

import { KubeError } from './status.ts';

export interface FailureRule {
  /** HTTP method to match (any when omitted). */
  method?: string;
  /** Matched against `pathname?query`: a RegExp, or a substring. Any path when omitted. */
  pathPattern?: RegExp | string;
  status: number;
  /** How many matching requests fail; 1 by default. */
  times?: number;
  reason?: string;
  message?: string;
  /** Sent as `Retry-After` (and in the Status details), e.g. with 429 or 503. */
  retryAfterSeconds?: number;
}

const DEFAULT_REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Expired',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** Requests matching this are held unanswered until the client gives up (or the server closes). */
export type HangRule = Pick<FailureRule, 'method' | 'pathPattern' | 'times'>;

interface ArmedRule {
  rule: FailureRule;
  remaining: number;
}

interface ArmedHang {
  rule: HangRule;
  remaining: number;
}

function matches(rule: HangRule, method: string, pathWithQuery: string): boolean {
  if (rule.method !== undefined && rule.method.toUpperCase() !== method) return false;
  const pattern = rule.pathPattern;
  if (pattern === undefined) return true;
  if (typeof pattern === 'string') return pathWithQuery.includes(pattern);
  pattern.lastIndex = 0; // a /g or /y pattern would otherwise remember where its last match ended
  return pattern.test(pathWithQuery);
}

function armedTimes(times: number | undefined): number {
  const count = times ?? 1;
  if (!(Number.isInteger(count) && count >= 1) && count !== Infinity) {
    throw new Error(`times must be a positive integer or Infinity, got ${count}`);
  }
  return count;
}

export class FaultInjector {
  private readonly armed: ArmedRule[] = [];
  private readonly hangs: ArmedHang[] = [];

  failNext(rule: FailureRule): void {
    this.armed.push({ rule, remaining: armedTimes(rule.times) });
  }

  hangNext(rule: HangRule): void {
    this.hangs.push({ rule, remaining: armedTimes(rule.times) });
  }

  /** Whether this request is to be held unanswered, consuming one use of the first matching hang rule. */
  takeHang(method: string, pathWithQuery: string): boolean {
    const match = this.hangs.find(({ rule }) => matches(rule, method, pathWithQuery));
    if (match === undefined) return false;
    match.remaining -= 1;
    if (match.remaining === 0) this.hangs.splice(this.hangs.indexOf(match), 1);
    return true;
  }

  /** The injected error for this request, consuming one use of the first matching rule. */
  take(method: string, pathWithQuery: string): KubeError | undefined {
    const match = this.armed.find(({ rule }) => matches(rule, method, pathWithQuery));
    if (match === undefined) return undefined;
    match.remaining -= 1;
    if (match.remaining === 0) this.armed.splice(this.armed.indexOf(match), 1);
    const { status, reason, message, retryAfterSeconds } = match.rule;
    const details = retryAfterSeconds === undefined ? undefined : { retryAfterSeconds };
    return new KubeError(
      status,
      reason ?? DEFAULT_REASONS[status] ?? 'Unknown',
      message ?? `injected failure for ${method} ${pathWithQuery}`,
      details,
    );
  }

  clear(): void {
    this.armed.length = 0;
    this.hangs.length = 0;
  }
}
