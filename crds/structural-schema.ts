// Translates a TypeBox schema (JSON Schema) into a Kubernetes structural schema (the OpenAPI v3 subset a
// CustomResourceDefinition accepts). The rules:
//   - a union of string literals            → `type: string` + `enum`
//   - a union of one schema and null         → that schema + `nullable: true`, without its `enum` if it has
//                                              one: the apiserver checks `enum` on null values too, and refuses
//                                              a CRD with null among them (kube-apiserver 1.20: "per-version
//                                              schemas may not all be set to identical values")
//   - a literal                              → its type + a one-value `enum`
//   - `additionalProperties: false`          → dropped: the apiserver prunes unknown fields instead
//   - a property with a `default`            → dropped from `required`: the apiserver fills it in first
//   - `expected`, `unit`                     → dropped: wording for crds/validate.ts only
// Anything else without a structural equivalent (other unions, records, null alone, unknown keywords) throws,
// naming the path, so a schema change cannot silently produce a CRD the apiserver would refuse.
//
// A structural schema is OpenAPI 3.0's schema dialect with restrictions, so the same translation gives the
// OpenAPI 3.0 schemas of the management API (toOpenApiSchema): there, objects keep `additionalProperties: false`
// (answers carry only the declared fields) and `required` lists every required property (nothing fills defaults).
import type { TSchema } from '@sinclair/typebox';

export interface StructuralSchema {
  description?: string;
  type: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  /** Only in OpenAPI schemas: a CRD's apiserver prunes unknown fields instead. */
  additionalProperties?: false;
  format?: string;
  enum?: unknown[];
  nullable?: true;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, StructuralSchema>;
  required?: string[];
  items?: StructuralSchema;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: unknown[];
}

// Keywords copied as they are.
const COPIED_KEYWORDS = [
  'description',
  'format',
  'default',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-validations',
] as const;
const TRANSLATED_KEYWORDS = new Set(['type', 'anyOf', 'const', 'properties', 'required', 'items', 'additionalProperties']);
const VALIDATOR_ONLY_KEYWORDS = new Set(['expected', 'unit']);
const STRUCTURAL_TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean']);

/** What the two targets of the translation do differently. */
interface Target {
  /** Kubernetes prunes unknown fields (and refuses `additionalProperties: false`); OpenAPI keeps it. */
  closedObjects: boolean;
  /** The apiserver fills in defaults before validating, so a defaulted property need not be sent. */
  defaultsFillRequired: boolean;
  /** Whether a nullable enum lists null among its values (OpenAPI), or drops its values (Kubernetes). */
  nullInEnum: boolean;
}

const KUBERNETES: Target = { closedObjects: false, defaultsFillRequired: true, nullInEnum: false };
const OPENAPI: Target = { closedObjects: true, defaultsFillRequired: false, nullInEnum: true };

export function toStructuralSchema(schema: TSchema, path = '<root>'): StructuralSchema {
  return translate(schema, KUBERNETES, path);
}

/** The OpenAPI 3.0 schema of a TypeBox schema, e.g. for fastify's serialisation and the served documents. */
export function toOpenApiSchema(schema: TSchema, path = '<root>'): StructuralSchema {
  return translate(schema, OPENAPI, path);
}

function translate(schema: TSchema, target: Target, path: string): StructuralSchema {
  for (const key of Object.keys(schema)) {
    const known = TRANSLATED_KEYWORDS.has(key) || VALIDATOR_ONLY_KEYWORDS.has(key) || (COPIED_KEYWORDS as readonly string[]).includes(key);
    if (!known) throw new Error(`${path}: keyword "${key}" has no structural-schema translation`);
  }
  if (Array.isArray(schema.anyOf)) return fromUnion(schema, schema.anyOf as TSchema[], target, path);
  if (!STRUCTURAL_TYPES.has(schema.type)) {
    throw new Error(`${path}: type ${JSON.stringify(schema.type)} cannot be expressed in a structural schema`);
  }
  const result: StructuralSchema = { type: schema.type };
  if ('const' in schema) result.enum = [schema.const];
  copyKeywords(schema, result);
  if (schema.type === 'object') addProperties(schema, result, target, path);
  if (schema.type === 'array') result.items = translate(schema.items as TSchema, target, `${path}[]`);
  if (schema.additionalProperties !== undefined && schema.additionalProperties !== false) {
    throw new Error(`${path}: only additionalProperties: false is supported (use properties)`);
  }
  if (schema.additionalProperties === false && target.closedObjects) result.additionalProperties = false;
  return ordered(result);
}

function fromUnion(union: TSchema, variants: TSchema[], target: Target, path: string): StructuralSchema {
  const nonNull = variants.filter((variant) => variant.type !== 'null');
  if (nonNull.length === 1 && variants.length === 2) {
    const result: StructuralSchema = { ...translate(nonNull[0]!, target, path), nullable: true };
    if (result.enum) {
      // kube-apiserver refuses a CRD with null among an enum's values, yet checks `enum` on null values too: a
      // nullable enum can only drop its values there (the writer's own schema keeps them). OpenAPI validators
      // (Ajv) check `enum` on null as well, and accept it listed.
      if (target.nullInEnum) result.enum = [...result.enum, null];
      else delete result.enum;
    }
    copyKeywords(union, result);
    return ordered(result);
  }
  const types = new Set(variants.map((variant) => variant.type));
  if (variants.every((variant) => 'const' in variant) && types.size === 1) {
    const result: StructuralSchema = { type: variants[0]!.type, enum: variants.map((variant) => variant.const) };
    copyKeywords(union, result);
    return ordered(result);
  }
  throw new Error(`${path}: a union other than literals of one type or "X or null" is not structural`);
}

function addProperties(schema: TSchema, result: StructuralSchema, target: Target, path: string): void {
  const properties = (schema.properties ?? {}) as Record<string, TSchema>;
  result.properties = Object.fromEntries(
    Object.entries(properties).map(([key, property]) => [key, translate(property, target, `${path}.${key}`)]),
  );
  const required = ((schema.required ?? []) as string[]).filter((key) => !target.defaultsFillRequired || !('default' in properties[key]!));
  if (required.length > 0) result.required = required;
}

function copyKeywords(from: TSchema, to: StructuralSchema): void {
  for (const key of COPIED_KEYWORDS) {
    if (from[key] !== undefined) Object.assign(to, { [key]: structuredClone(from[key]) });
  }
}

// A fixed keyword order (description, type, constraints, children, Kubernetes extensions): stable, readable YAML.
const KEYWORD_ORDER: readonly string[] = [
  'description',
  'type',
  'format',
  'enum',
  'nullable',
  'default',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
  'additionalProperties',
  'properties',
  'required',
  'items',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-validations',
];

function ordered(schema: StructuralSchema): StructuralSchema {
  const entries = Object.entries(schema).sort(([a], [b]) => KEYWORD_ORDER.indexOf(a) - KEYWORD_ORDER.indexOf(b));
  return Object.fromEntries(entries) as unknown as StructuralSchema;
}
