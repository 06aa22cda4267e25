// RFC 9457 problem details: the one shape every platform error of Runlet's HTTP interfaces takes. The types
// are declared once, in crds/problems.ts; handlers throw ProblemError and each interface's single error handler
// renders it with toBody().

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * Where every problem `type` URI starts: the page docs/problems.md is published as, each problem documented
 * under a heading whose anchor is its code. One page with an anchor per type (rather than a path per type)
 * means any static host of the docs resolves every type URI, with no redirects to maintain. RFC 9457 asks that
 * a type URI be stable and, when dereferenced, lead to human-readable documentation: both hold.
 */
export const PROBLEM_TYPE_BASE = 'https://runlet.dev/problems#';

export interface ProblemSpec {
  /** Stable, kebab-case: the fragment of the problem `type` URI, and the heading in docs/problems.md. */
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
      type: problemTypeUri(this.spec.code),
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
