// Checks App and RunLog objects the way the apiserver does (defaults first, then the schema, then the CEL
// rules through their TypeScript twins, then list-map key uniqueness) and says precisely what is wrong
// where: `spec.scaling.responseGracePeriod must be an integer from 1 to 43200 seconds, got 0`.
import type { TSchema } from '@sinclair/typebox';
import { Value, ValueErrorType, type ValueError } from '@sinclair/typebox/value';
import { AppSchema, AppSpecSchema, type App, type AppSpec } from './app-schema.ts';
import { describeActual, describeExpected } from './describe-schema.ts';
import { RunLogSchema, type RunLog } from './runlog-schema.ts';
import { crossFieldRulesOf } from './schema-kit.ts';

export type FieldPath = readonly (string | number)[];

export interface ValidationIssue {
  /** Where, from the root of the validated object: ['spec', 'env', 0, 'name']. */
  path: FieldPath;
  message: string;
}

/** Names a field in messages; the default is the dotted path (`spec.env[0].name`). */
export type NameOf = (path: FieldPath) => string;

export interface ValidateOptions {
  nameOf?: NameOf;
}

export class ResourceValidationError extends Error {
  readonly issues: readonly ValidationIssue[];

  constructor(what: string, issues: readonly ValidationIssue[]) {
    super(`invalid ${what}:\n${issues.map((issue) => `  - ${issue.message}`).join('\n')}`);
    this.name = 'ResourceValidationError';
    this.issues = issues;
  }
}

export function formatFieldPath(path: FieldPath): string {
  return path.map((segment, i) => (typeof segment === 'number' ? `[${segment}]` : i === 0 ? segment : `.${segment}`)).join('');
}

/** A deep copy of `value` with every schema default filled in, as the apiserver does before validating. */
export function applyAppDefaults(value: unknown): unknown {
  return Value.Default(AppSchema, Value.Clone(value));
}

export function applyAppSpecDefaults(value: unknown): unknown {
  return Value.Default(AppSpecSchema, Value.Clone(value));
}

/** Problems of an App (defaults applied first); empty when the apiserver would accept it. */
export function validateApp(value: unknown, options: ValidateOptions = {}): ValidationIssue[] {
  return validateAgainst(AppSchema, applyAppDefaults(value), [], options);
}

/** Problems of an App spec (defaults applied first); paths start at `spec`. */
export function validateAppSpec(value: unknown, options: ValidateOptions = {}): ValidationIssue[] {
  return validateAgainst(AppSpecSchema, applyAppSpecDefaults(value), ['spec'], options);
}

export function validateRunLog(value: unknown, options: ValidateOptions = {}): ValidationIssue[] {
  return validateAgainst(RunLogSchema, Value.Default(RunLogSchema, Value.Clone(value)), [], options);
}

/** The App with defaults applied, or a ResourceValidationError listing every problem. */
export function parseApp(value: unknown): App {
  const defaulted = applyAppDefaults(value);
  const issues = validateAgainst(AppSchema, defaulted, [], {});
  if (issues.length > 0) throw new ResourceValidationError(`App${nameSuffix(value)}`, issues);
  return defaulted as App;
}

export function parseAppSpec(value: unknown): AppSpec {
  const defaulted = applyAppSpecDefaults(value);
  const issues = validateAgainst(AppSpecSchema, defaulted, ['spec'], {});
  if (issues.length > 0) throw new ResourceValidationError('App spec', issues);
  return defaulted as AppSpec;
}

export function parseRunLog(value: unknown): RunLog {
  const defaulted = Value.Default(RunLogSchema, Value.Clone(value));
  const issues = validateAgainst(RunLogSchema, defaulted, [], {});
  if (issues.length > 0) throw new ResourceValidationError(`RunLog${nameSuffix(value)}`, issues);
  return defaulted as RunLog;
}

function nameSuffix(value: unknown): string {
  const name = isRecord(value) && isRecord(value.metadata) ? value.metadata.name : undefined;
  return typeof name === 'string' ? ` "${name}"` : '';
}

function validateAgainst(schema: TSchema, value: unknown, basePath: FieldPath, options: ValidateOptions): ValidationIssue[] {
  const nameOf = options.nameOf ?? formatFieldPath;
  return [...schemaIssues(schema, value, basePath, nameOf), ...semanticIssues(schema, value, basePath, nameOf)];
}

/** One issue per offending field: TypeBox may report several errors for one field (type and range, say). */
function schemaIssues(schema: TSchema, value: unknown, basePath: FieldPath, nameOf: NameOf): ValidationIssue[] {
  const firstErrorByPointer = new Map<string, ValueError>();
  for (const error of Value.Errors(schema, value)) {
    if (!firstErrorByPointer.has(error.path)) firstErrorByPointer.set(error.path, error);
  }
  return [...firstErrorByPointer.values()].map((error) => {
    const path = [...basePath, ...pointerToPath(error.path, value)];
    const name = nameOf(path);
    switch (error.type) {
      case ValueErrorType.ObjectRequiredProperty:
        return { path, message: `${name} is required` };
      case ValueErrorType.ObjectAdditionalProperties: {
        const known = Object.keys((error.schema.properties ?? {}) as object).join(', ');
        return { path, message: `${name} is not a known field (known: ${known})` };
      }
      default:
        return { path, message: `${name} must be ${describeExpected(error.schema)}, got ${describeActual(error.value)}` };
    }
  });
}

/** What the schema keywords cannot say: cross-field rules (CEL in the CRD) and unique list-map keys. */
function semanticIssues(schema: TSchema, value: unknown, path: FieldPath, nameOf: NameOf): ValidationIssue[] {
  if (Array.isArray(schema.anyOf)) {
    // Nullable or enum: the rules of whichever variant the value is.
    const variant = (schema.anyOf as TSchema[]).find((candidate) => Value.Check(candidate, value));
    return variant ? semanticIssues(variant, value, path, nameOf) : [];
  }
  if (schema.type === 'array' && Array.isArray(value)) {
    return [
      ...listMapKeyIssues(schema, value, path, nameOf),
      ...value.flatMap((item, i) => semanticIssues(schema.items as TSchema, item, [...path, i], nameOf)),
    ];
  }
  if (schema.type !== 'object' || !isRecord(value)) return [];
  const properties = (schema.properties ?? {}) as Record<string, TSchema>;
  const nested = Object.entries(properties)
    .filter(([key]) => value[key] !== undefined)
    .flatMap(([key, child]) => semanticIssues(child, value[key], [...path, key], nameOf));
  // A rule reads fields of the right types only once the object itself is valid (CEL likewise never runs on
  // an object that failed its schema).
  if (!Value.Check(schema, value)) return nested;
  const broken = crossFieldRulesOf(schema).filter((rule) => !rule.holds(value));
  return [
    ...nested,
    ...broken.map((rule) => {
      const sentence = rule.message.replace(/\{(\w+)\}/g, (_, field: string) => {
        // Numbers and booleans help ("maxReplicas (1)"); strings may be env values, better not echoed.
        const fieldValue = value[field];
        const shown = typeof fieldValue === 'number' || typeof fieldValue === 'boolean' ? ` (${fieldValue})` : '';
        return `${nameOf([...path, field])}${shown}`;
      });
      return rule.field === undefined
        ? { path, message: `${nameOf(path)}: ${sentence}` }
        : { path: [...path, rule.field], message: sentence };
    }),
  ];
}

function listMapKeyIssues(schema: TSchema, items: unknown[], path: FieldPath, nameOf: NameOf): ValidationIssue[] {
  if (schema['x-kubernetes-list-type'] !== 'map') return [];
  const keys = schema['x-kubernetes-list-map-keys'] as string[];
  const firstIndexByKey = new Map<string, number>();
  const issues: ValidationIssue[] = [];
  items.forEach((item, i) => {
    if (!isRecord(item)) return;
    const key = JSON.stringify(keys.map((k) => item[k]));
    const first = firstIndexByKey.get(key);
    if (first === undefined) {
      firstIndexByKey.set(key, i);
      return;
    }
    const where = [...path, i, keys[0]!];
    issues.push({ path: where, message: `${nameOf(where)} duplicates ${nameOf([...path, first, keys[0]!])} (${key.slice(1, -1)})` });
  });
  return issues;
}

/** A TypeBox error pointer (`/env/0/name`) as a path; a segment is a number where the value is an array. */
function pointerToPath(pointer: string, root: unknown): FieldPath {
  if (pointer === '') return [];
  const path: (string | number)[] = [];
  let at: unknown = root;
  for (const raw of pointer.slice(1).split('/')) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const index = Array.isArray(at) ? Number(segment) : NaN;
    path.push(Number.isInteger(index) ? index : segment);
    at = isRecord(at) || Array.isArray(at) ? (at as Record<string, unknown>)[segment] : undefined;
  }
  return path;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
