// `/openapi/v2` in protobuf (gnostic's openapi_v2.Document, github.com/googleapis/gnostic/openapiv2/
// OpenAPIv2.proto), the only form kubectl's discovery client reads: it asks for
// `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and unmarshals the answer as protobuf, so a
// JSON answer fails its validation and explain. Encodes the subset openapi.ts writes: info, definitions and
// their schemas; values the schema carries as `Any` (default, enum, example, vendor extensions) go as YAML,
// which JSON is.

import type { OpenApiV2Document } from './openapi.ts';
import type { JsonSchema } from './resources.ts';
import { isPlainObject } from './types.ts';

export const OPENAPI_V2_PROTOBUF = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf';

const LENGTH_DELIMITED = 2;
const VARINT = 0;
const FIXED64 = 1;

/** Protobuf wire-format writer of one message. */
class MessageWriter {
  private readonly chunks: Buffer[] = [];

  private key(field: number, wireType: number): void {
    this.varint((field << 3) | wireType);
  }

  private varint(value: number): void {
    const bytes: number[] = [];
    let rest = BigInt.asUintN(64, BigInt(value));
    do {
      const low = Number(rest & 0x7fn);
      rest >>= 7n;
      bytes.push(rest === 0n ? low : low | 0x80);
    } while (rest !== 0n);
    this.chunks.push(Buffer.from(bytes));
  }

  bytes(field: number, value: Buffer): void {
    this.key(field, LENGTH_DELIMITED);
    this.varint(value.length);
    this.chunks.push(value);
  }

  string(field: number, value: string): void {
    this.bytes(field, Buffer.from(value, 'utf8'));
  }

  message(field: number, write: (writer: MessageWriter) => void): void {
    const nested = new MessageWriter();
    write(nested);
    this.bytes(field, nested.finish());
  }

  integer(field: number, value: number): void {
    this.key(field, VARINT);
    this.varint(Math.trunc(value));
  }

  boolean(field: number, value: boolean): void {
    this.key(field, VARINT);
    this.varint(value ? 1 : 0);
  }

  double(field: number, value: number): void {
    this.key(field, FIXED64);
    const buffer = Buffer.alloc(8);
    buffer.writeDoubleLE(value);
    this.chunks.push(buffer);
  }

  finish(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/** gnostic `Any`: the value as YAML (field 2). */
function writeAny(writer: MessageWriter, field: number, value: unknown): void {
  writer.message(field, (any) => any.string(2, JSON.stringify(value)));
}

/** gnostic `NamedAny` (vendor extensions). */
function writeNamedAny(writer: MessageWriter, field: number, name: string, value: unknown): void {
  writer.message(field, (named) => {
    named.string(1, name);
    writeAny(named, 2, value);
  });
}

// Field numbers of gnostic's openapi_v2.Schema.
const STRING_FIELDS: Record<string, number> = { $ref: 1, format: 2, title: 3, description: 4, pattern: 13, discriminator: 26 };
const DOUBLE_FIELDS: Record<string, number> = { multipleOf: 6, maximum: 7, minimum: 9 };
const BOOLEAN_FIELDS: Record<string, number> = { exclusiveMaximum: 8, exclusiveMinimum: 10, uniqueItems: 16, readOnly: 27 };
const INTEGER_FIELDS: Record<string, number> = {
  maxLength: 11,
  minLength: 12,
  maxItems: 14,
  minItems: 15,
  maxProperties: 17,
  minProperties: 18,
};

function writeSchema(writer: MessageWriter, schema: JsonSchema): void {
  for (const [keyword, value] of Object.entries(schema)) {
    if (value === undefined) continue;
    if (keyword in STRING_FIELDS && typeof value === 'string') writer.string(STRING_FIELDS[keyword]!, value);
    else if (keyword in DOUBLE_FIELDS && typeof value === 'number') writer.double(DOUBLE_FIELDS[keyword]!, value);
    else if (keyword in BOOLEAN_FIELDS && typeof value === 'boolean') writer.boolean(BOOLEAN_FIELDS[keyword]!, value);
    else if (keyword in INTEGER_FIELDS && typeof value === 'number') writer.integer(INTEGER_FIELDS[keyword]!, value);
    else if (keyword === 'default') writeAny(writer, 5, value);
    else if (keyword === 'example') writeAny(writer, 30, value);
    else if (keyword === 'required' && Array.isArray(value)) for (const name of value) writer.string(19, String(name));
    else if (keyword === 'enum' && Array.isArray(value)) for (const member of value) writeAny(writer, 20, member);
    else if (keyword === 'additionalProperties') {
      writer.message(21, (item) => {
        if (typeof value === 'boolean') item.boolean(2, value);
        else item.message(1, (nested) => writeSchema(nested, value as JsonSchema));
      });
    } else if (keyword === 'type' && typeof value === 'string') writer.message(22, (item) => item.string(1, value));
    else if (keyword === 'items' && isPlainObject(value)) {
      writer.message(23, (item) => item.message(1, (nested) => writeSchema(nested, value as JsonSchema)));
    } else if (keyword === 'allOf' && Array.isArray(value)) {
      for (const member of value) writer.message(24, (nested) => writeSchema(nested, member as JsonSchema));
    } else if (keyword === 'properties' && isPlainObject(value)) {
      writer.message(25, (properties) => {
        for (const [name, member] of Object.entries(value)) writeNamedSchema(properties, 1, name, member as JsonSchema);
      });
    } else if (keyword.startsWith('x-')) writeNamedAny(writer, 31, keyword, value);
  }
}

function writeNamedSchema(writer: MessageWriter, field: number, name: string, schema: JsonSchema): void {
  writer.message(field, (named) => {
    named.string(1, name);
    named.message(2, (nested) => writeSchema(nested, schema));
  });
}

/** The gnostic Document of an OpenAPI v2 document as openapi.ts builds it (no paths). */
export function encodeOpenApiV2(document: OpenApiV2Document): Buffer {
  const writer = new MessageWriter();
  writer.string(1, document.swagger);
  writer.message(2, (info) => {
    info.string(1, document.info.title);
    info.string(2, document.info.version);
  });
  writer.message(8, () => {});
  writer.message(9, (definitions) => {
    for (const [name, schema] of Object.entries(document.definitions)) writeNamedSchema(definitions, 1, name, schema);
  });
  return writer.finish();
}
