// The one error of kube/'s client: the HTTP status and the Status the API server answered, or the transport
// error as `cause`, and the predicates callers branch on.

/** A failed API call. */
export class KubeApiError extends Error {
  /** HTTP status; 0 when no answer arrived (connection refused or reset, timeout). */
  readonly status: number;
  readonly reason: string | undefined;
  /** From `Retry-After` (429, 503). */
  readonly retryAfterMs: number | undefined;

  constructor(
    what: string,
    status: number,
    detail: string,
    extra: { reason?: string; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    const answer = status === 0 ? 'no answer' : `${status}${extra.reason ? ` ${extra.reason}` : ''}`;
    super(`${what}: ${answer}: ${detail}`, { cause: extra.cause });
    this.name = 'KubeApiError';
    this.status = status;
    this.reason = extra.reason;
    this.retryAfterMs = extra.retryAfterMs;
  }
}

export function isNotFound(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 404;
}

/** 422: the object is refused as it is (e.g. a change to an immutable field). */
export function isInvalid(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 422;
}

export function isConflict(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 409;
}

/** 403 to a write into a namespace being deleted: nothing to retry, since everything in it goes anyway. */
export function isNamespaceTerminating(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 403 && error.message.includes('being terminated');
}
