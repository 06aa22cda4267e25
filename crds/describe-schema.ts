// Plain-words descriptions for error messages: what a schema allows ("an integer from 1 to 43200 seconds")
// and what was found instead ("got 0").
import type { TSchema } from '@sinclair/typebox';

export function describeExpected(schema: TSchema): string {
  if (typeof schema.expected === 'string') return schema.expected;
  if (Array.isArray(schema.anyOf)) return describeUnion(schema.anyOf as TSchema[]);
  if ('const' in schema) return JSON.stringify(schema.const);
  switch (schema.type) {
    case 'integer':
      return describeRange('an integer', schema);
    case 'number':
      return describeRange('a number', schema);
    case 'boolean':
      return 'true or false';
    case 'string':
      return describeString(schema);
    case 'array':
      return `${schema.minItems ? 'a non-empty array' : 'an array'} (each item ${describeExpected(schema.items as TSchema)})`;
    case 'object':
      return 'an object';
    case 'null':
      return 'null';
    default:
      return 'a valid value';
  }
}

function describeUnion(variants: readonly TSchema[]): string {
  const nonNull = variants.filter((variant) => variant.type !== 'null');
  const orNull = nonNull.length < variants.length ? ' or null' : '';
  if (nonNull.every((variant) => 'const' in variant)) {
    const values = nonNull.map((variant) => JSON.stringify(variant.const));
    return `${values.length === 1 ? values[0] : `one of ${values.join(', ')}`}${orNull}`;
  }
  return `${nonNull.map(describeExpected).join(', or ')}${orNull}`;
}

function describeRange(noun: string, schema: TSchema): string {
  const unit = typeof schema.unit === 'string' ? ` ${schema.unit}` : '';
  const { minimum, maximum } = schema as { minimum?: number; maximum?: number };
  if (minimum !== undefined && maximum !== undefined) return `${noun} from ${minimum} to ${maximum}${unit}`;
  if (minimum !== undefined) return `${noun} >= ${minimum}${unit}`;
  if (maximum !== undefined) return `${noun} <= ${maximum}${unit}`;
  return `${noun}${unit}`;
}

function describeString(schema: TSchema): string {
  if (schema.format === 'date-time') return 'an RFC 3339 date-time such as "2025-01-31T12:00:00Z"';
  const parts: string[] = [];
  if (typeof schema.pattern === 'string') parts.push(`matching /${schema.pattern}/`);
  if (typeof schema.maxLength === 'number') parts.push(`of at most ${schema.maxLength} characters`);
  const noun = schema.minLength ? 'a non-empty string' : 'a string';
  return [noun, ...parts].join(' ');
}

/** A value as an error message quotes it: short JSON, or its kind when long. */
export function describeActual(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value instanceof Date) return `a date (${value.toISOString()})`;
  const json = JSON.stringify(value);
  if (json !== undefined && json.length <= 80) return json;
  if (Array.isArray(value)) return `an array of ${value.length} items`;
  if (typeof value === 'string') return `a string of ${value.length} characters`;
  return typeof value === 'object' && value !== null ? 'an object' : String(value);
}
