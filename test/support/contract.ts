// Contract checks: answers of the real servers against the committed OpenAPI documents (docs/openapi-*.json).
// OpenAPI 3.0 schemas are a dialect of JSON Schema; `toJsonSchema` turns `nullable` into a JSON Schema type.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsPlugin from 'ajv-formats';
import { expect } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

type OpenApiDocument = {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>>;
  components: { schemas?: Record<string, object> };
};

export function loadDocument(name: 'run' | 'management'): OpenApiDocument {
  return JSON.parse(readFileSync(resolve(ROOT, `docs/openapi-${name}.json`), 'utf8')) as OpenApiDocument;
}

/** OpenAPI 3.0 → JSON Schema: `nullable: true` widens `type` with null (or means "anything" without a type). */
export function toJsonSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) out[key] = key === 'enum' ? value : toJsonSchema(value);
  if (out.nullable === true) {
    delete out.nullable;
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  }
  return out;
}

const addFormats = addFormatsPlugin as unknown as (ajv: Ajv) => Ajv;

export class ContractChecker {
  readonly #document: OpenApiDocument;
  readonly #ajv: Ajv;
  readonly #validators = new Map<string, ValidateFunction>();

  constructor(name: 'run' | 'management') {
    this.#document = loadDocument(name);
    this.#ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
    this.#ajv.addSchema(toJsonSchema({ components: this.#document.components }) as object, 'document');
  }

  /** Asserts that an answer is described: its status and content type exist for the operation, its body fits. */
  async expectDescribed(method: string, pathTemplate: string, response: Response, body?: unknown): Promise<void> {
    const operation = this.#document.paths[pathTemplate]?.[method.toLowerCase()];
    expect(operation, `${method} ${pathTemplate} is described`).toBeDefined();
    const status = String(response.status);
    const described = operation!.responses[status] ?? operation!.responses[`${status[0]}XX`] ?? operation!.responses.default;
    expect(described, `${method} ${pathTemplate} describes status ${status}`).toBeDefined();
    const contentType = (response.headers.get('content-type') ?? '').split(';', 1)[0]!;
    if (!described!.content) return;
    const media = described!.content[contentType];
    expect(media, `${method} ${pathTemplate} ${status} describes content type ${contentType}`).toBeDefined();
    if (contentType.endsWith('json')) {
      const validate = this.#validator(media!.schema);
      const value = body ?? (await response.clone().json());
      expect(validate(value), `${method} ${pathTemplate} ${status}: ${this.#ajv.errorsText(validate.errors)}`).toBe(true);
    }
  }

  /** Asserts that a body fits a named component schema (e.g. the webhook delivery). */
  expectComponent(name: string, value: unknown): void {
    const validate = this.#validator({ $ref: `#/components/schemas/${name}` });
    expect(validate(value), `${name}: ${this.#ajv.errorsText(validate.errors)}`).toBe(true);
  }

  #validator(schema: object): ValidateFunction {
    const key = JSON.stringify(schema);
    let validate = this.#validators.get(key);
    if (!validate) {
      const rebased = JSON.parse(key.replaceAll('"#/components/', '"document#/components/')) as object;
      validate = this.#ajv.compile(toJsonSchema(rebased) as object);
      this.#validators.set(key, validate);
    }
    return validate;
  }
}
