// The names Runlet's routes take — a project, an app, a run, an API key — and the one rule each must follow,
// checked once where a request names it (the management API's path parameters, the run interface's path), before
// any of them reaches a store or a Kubernetes API path. A project is a namespace and an app an App's name, so
// both are DNS-1123 labels; a run id is the UUID Runlet minted; a key name becomes a ServiceAccount's name after
// a prefix, which must stay a DNS-1123 label too. Nothing else (no `/`, `.`, `%`, no unicode, no empty name)
// ever gets through to be joined into a path.
import { ProblemError } from './problem.ts';
import { Problems } from './problems.ts';

/**
 * A DNS-1123 label, as Kubernetes names a namespace or most objects. Here, not in schema-kit.ts, which the
 * schemas import it from: a pod's sidecar checks every run path against it and loads no TypeBox at start.
 */
export const DNS_LABEL_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';

/** The ServiceAccount of API key `ci` is `runlet-key-ci` (operator/api-keys.ts): a key never takes another's name. */
export const API_KEY_ACCOUNT_PREFIX = 'runlet-key-';

const DNS_LABEL_MAX_LENGTH = 63;
const UUID_PATTERN = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';

export interface NameRule {
  /** A JSON-schema `pattern`: Ajv's, and the regular expression below. */
  pattern: string;
  minLength: number;
  maxLength: number;
  /** What a valid value is, for the refusal's detail. */
  expected: string;
}

function dnsLabel(maxLength: number, what: string): NameRule {
  return {
    pattern: DNS_LABEL_PATTERN,
    minLength: 1,
    maxLength,
    expected: `${what}: a DNS-1123 label (1 to ${maxLength} lowercase letters, digits and "-", starting and ending with a letter or digit)`,
  };
}

/** A project: a namespace. */
export const PROJECT_ID = dnsLabel(DNS_LABEL_MAX_LENGTH, 'a project (a namespace)');
/** An app: an App's name (crds/app-schema.ts AppNameSchema). */
export const APP_NAME = dnsLabel(DNS_LABEL_MAX_LENGTH, "an app's name");
/** The management API's `app_id`: an app name, or `{project_id}-{app_name}` (management/app-directory.ts). */
export const APP_ID = dnsLabel(2 * DNS_LABEL_MAX_LENGTH + 1, 'an app name, or {project_id}-{app_name}');
/** A run: the UUID Runlet minted for it (run-request/run-id.ts), lowercase as it writes it. */
export const RUN_ID: NameRule = { pattern: UUID_PATTERN, minLength: 36, maxLength: 36, expected: 'a run id: a UUID in lowercase hex, as Runlet writes it' };
/** An API key: its ServiceAccount, the prefix and the name, is a DNS-1123 label as well. */
export const KEY_NAME = dnsLabel(DNS_LABEL_MAX_LENGTH - API_KEY_ACCOUNT_PREFIX.length, 'an API key name');

/** Every route parameter by the name the routes give it. */
export const ROUTE_PARAMETERS = {
  project_id: PROJECT_ID,
  app_id: APP_ID,
  app_name: APP_NAME,
  run_id: RUN_ID,
  key_name: KEY_NAME,
} as const satisfies Record<string, NameRule>;

const compiled = new Map<NameRule, RegExp>();

/** Whether `value` follows `rule`. */
export function followsRule(rule: NameRule, value: string): boolean {
  let pattern = compiled.get(rule);
  if (pattern === undefined) {
    pattern = new RegExp(rule.pattern);
    compiled.set(rule, pattern);
  }
  return value.length >= rule.minLength && value.length <= rule.maxLength && pattern.test(value);
}

/** The 400 `invalid-parameter` refusing `value` for the parameter `name` (its `parameter` member names it). */
export function invalidName(name: string, rule: NameRule, value: unknown, part = 'path parameter'): ProblemError {
  const shown = JSON.stringify(value);
  return new ProblemError(Problems.invalidParameter, `${part} ${name} must be ${rule.expected}; got ${shown.length > 100 ? `${shown.slice(0, 100)}…` : shown}`, {
    extensions: { parameter: name },
  });
}

/** `value`, when it follows `rule`; otherwise throws the 400 naming `name`. */
export function checkName(name: string, rule: NameRule, value: string, part?: string): string {
  if (!followsRule(rule, value)) throw invalidName(name, rule, value, part);
  return value;
}

/** The JSON schema of a string following `rule`, for a route's `params` (with its `description`). */
export function nameSchema(rule: NameRule, description: string) {
  return { type: 'string', pattern: rule.pattern, minLength: rule.minLength, maxLength: rule.maxLength, description } as const;
}
