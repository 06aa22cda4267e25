// RFC 9457 problem details: the one shape every platform error of Runlet's HTTP interfaces takes.
// Catalogues (sidecar/errors.ts, management/errors.ts) declare each problem once; handlers throw
// ProblemError and a single error handler renders it.

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
const PROBLEM_TYPE_BASE = 'https://runlet.dev/problems/';

export interface ProblemSpec {
  /** Stable, kebab-case: the last segment of the problem `type` URI. */
  readonly code: string;
  readonly status: number;
  readonly title: string;
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

export class ProblemError extends Error {
  readonly spec: ProblemSpec;
  readonly detail: string;
  readonly extensions: Record<string, unknown> | undefined;
  /** Response headers the problem requires (`Allow`, `Retry-After`, `WWW-Authenticate`). */
  readonly headers: Record<string, string> | undefined;

  constructor(
    spec: ProblemSpec,
    detail: string,
    options: { extensions?: Record<string, unknown>; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(`${spec.title}: ${detail}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ProblemError';
    this.spec = spec;
    this.detail = detail;
    this.extensions = options.extensions;
    this.headers = options.headers;
  }

  get status(): number {
    return this.spec.status;
  }

  toBody(): ProblemBody {
    return {
      type: PROBLEM_TYPE_BASE + this.spec.code,
      title: this.spec.title,
      status: this.spec.status,
      detail: this.detail,
      ...this.extensions,
    };
  }
}

export function problemTypeUri(code: string): string {
  return PROBLEM_TYPE_BASE + code;
}
