import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { Nullable, StringEnum, Struct } from './schema-kit.ts';
import { toOpenApiSchema, toStructuralSchema } from './structural-schema.ts';

describe('toStructuralSchema', () => {
  it('turns string literal unions into enums and "X or null" into nullable', () => {
    expect(toStructuralSchema(StringEnum(['a', 'b'], { description: 'd' }))).toEqual({ description: 'd', type: 'string', enum: ['a', 'b'] });
    expect(toStructuralSchema(Nullable(Type.Integer({ minimum: 0 })))).toEqual({ type: 'integer', nullable: true, minimum: 0 });
    expect(toStructuralSchema(Type.Literal(true))).toEqual({ type: 'boolean', enum: [true] });
    // A real apiserver refuses a CRD with null among enum values, and a null value outside them.
    expect(toStructuralSchema(Nullable(StringEnum(['a'])))).toEqual({ type: 'string', nullable: true });
  });

  it('drops additionalProperties: false, validator-only wording, and defaulted properties from required', () => {
    const schema = Struct({
      a: Type.Integer({ default: 1, unit: 'seconds' }),
      b: Type.String({ pattern: '^x$', expected: 'an x' }),
      c: Type.Optional(Type.Boolean()),
    });
    expect(toStructuralSchema(schema)).toEqual({
      type: 'object',
      properties: { a: { type: 'integer', default: 1 }, b: { type: 'string', pattern: '^x$' }, c: { type: 'boolean' } },
      required: ['b'],
    });
  });

  it('refuses what has no structural form, naming where', () => {
    expect(() => toStructuralSchema(Struct({ x: Type.Union([Type.String(), Type.Integer()]) }))).toThrow('<root>.x: a union other than');
    expect(() => toStructuralSchema(Struct({ m: Type.Record(Type.String(), Type.String()) }))).toThrow('<root>.m: keyword "patternProperties"');
    expect(() => toStructuralSchema(Type.Null())).toThrow('type "null" cannot be expressed');
    expect(() => toStructuralSchema(Type.String({ examples: ['x'] }))).toThrow('keyword "examples" has no structural-schema translation');
  });
});

describe('toOpenApiSchema', () => {
  it('translates as for a CRD, but keeps objects closed and every required property', () => {
    const schema = Struct({ a: Type.Integer({ default: 1 }), b: Nullable(Struct({ c: StringEnum(['x']) }), { description: 'd' }) });
    expect(toOpenApiSchema(schema)).toEqual({
      type: 'object',
      additionalProperties: false,
      properties: {
        a: { type: 'integer', default: 1 },
        b: {
          description: 'd',
          type: 'object',
          nullable: true,
          additionalProperties: false,
          properties: { c: { type: 'string', enum: ['x'] } },
          required: ['c'],
        },
      },
      required: ['a', 'b'],
    });
  });
});
