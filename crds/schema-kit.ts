// Building blocks for the resource schemas. Every schema here is written so that crds/structural-schema.ts
// can translate it into a Kubernetes structural schema, and so that TypeBox can check values against it.
//
// Two keywords exist only for crds/validate.ts and are dropped from the CRD: `expected` (the phrase an error
// message uses for what is allowed, where the schema alone reads badly, e.g. a regular expression) and
// `unit` (appended to numeric ranges: "from 1 to 43200 seconds").
import './formats.ts';
import { DNS_LABEL_PATTERN } from './route-names.ts';
import {
  Type,
  type ObjectOptions,
  type SchemaOptions,
  type StringOptions,
  type TLiteral,
  type TNull,
  type TObject,
  type TProperties,
  type TSchema,
  type TUnion,
} from '@sinclair/typebox';

export { DNS_LABEL_PATTERN };
export const DNS_SUBDOMAIN_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
// Kubernetes resource quantity without a sign (negative CPU or memory makes no sense): 500m, 2, 1.5, 512Mi, 1e3.
export const QUANTITY_PATTERN =
  '^(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';

/** An object that admits only its declared properties (the apiserver prunes others; we report them). */
export function Struct<T extends TProperties>(properties: T, options: ObjectOptions = {}): TObject<T> {
  return Type.Object(properties, { additionalProperties: false, ...options });
}

type LiteralsOf<T extends readonly string[]> = { -readonly [K in keyof T]: TLiteral<T[K]> };

/** A string restricted to `values`; becomes `enum` in the CRD. */
export function StringEnum<const T extends readonly string[]>(values: T, options: SchemaOptions = {}): TUnion<LiteralsOf<T>> {
  const literals = values.map((value) => Type.Literal(value));
  // TypeBox cannot map a tuple of strings to a tuple of literal schemas by type; the runtime value is exactly that.
  return Type.Union(literals, options) as unknown as TUnion<LiteralsOf<T>>;
}

/** `T | null`; becomes `nullable: true` in the CRD. */
export function Nullable<T extends TSchema>(schema: T, options: SchemaOptions = {}): TUnion<[T, TNull]> {
  return Type.Union([schema, Type.Null()], options);
}

export function DnsLabel(options: StringOptions = {}) {
  return Type.String({
    minLength: 1,
    maxLength: 63,
    pattern: DNS_LABEL_PATTERN,
    expected: 'a DNS-1123 label (at most 63 lowercase letters, digits and "-", starting and ending with a letter or digit)',
    ...options,
  });
}

export function DnsSubdomain(options: StringOptions = {}) {
  return Type.String({
    minLength: 1,
    maxLength: 253,
    pattern: DNS_SUBDOMAIN_PATTERN,
    expected: 'a DNS-1123 subdomain (at most 253 lowercase letters, digits, "-" and ".")',
    ...options,
  });
}

export function Quantity(options: StringOptions = {}) {
  return Type.String({
    pattern: QUANTITY_PATTERN,
    expected: 'a Kubernetes quantity such as "500m", "2", "1.5" or "512Mi"',
    ...options,
  });
}

export function DateTime(options: StringOptions = {}) {
  return Type.String({ format: 'date-time', ...options });
}

/** Where crds/validate.ts finds the TypeScript twins of an object's CEL rules. */
export const CROSS_FIELD_RULES = Symbol.for('runlet.dev/cross-field-rules');

/**
 * A rule across fields of one object. The apiserver evaluates `rule` (CEL, `self` is the object);
 * crds/validate.ts evaluates `holds`, so both reject the same objects.
 */
export interface CrossFieldRule<Self> {
  rule: string;
  /** A sentence naming fields as `{field}`; each is replaced by the field's name where the error is shown. */
  message: string;
  /** The field the complaint is about; absent: the object itself. */
  field?: string;
  holds(self: Self): boolean;
}

export interface CelValidation {
  rule: string;
  message: string;
  fieldPath?: string;
}

/** Schema options that attach rules to an object schema: CEL for the apiserver, `holds` for validate.ts. */
export function withRules<Self>(...rules: CrossFieldRule<Self>[]): ObjectOptions {
  const validations: CelValidation[] = rules.map((rule) => ({
    rule: rule.rule,
    message: rule.message.replace(/\{(\w+)\}/g, '$1'),
    ...(rule.field === undefined ? {} : { fieldPath: `.${rule.field}` }),
  }));
  return { 'x-kubernetes-validations': validations, [CROSS_FIELD_RULES]: rules };
}

/** The rule that exactly one of two optional fields is set (a one-of: which source, which runtime). */
export function exactlyOneOf(first: string, second: string): CrossFieldRule<Record<string, unknown>> {
  return {
    rule: `has(self.${first}) != has(self.${second})`,
    message: `exactly one of {${first}} or {${second}} must be set`,
    holds: (self) => (self[first] === undefined) !== (self[second] === undefined),
  };
}

/** The TypeScript twins attached by `withRules`, if any. */
export function crossFieldRulesOf(schema: TSchema): readonly CrossFieldRule<Record<string, unknown>>[] {
  const rules: unknown = Reflect.get(schema, CROSS_FIELD_RULES);
  return Array.isArray(rules) ? rules : [];
}
