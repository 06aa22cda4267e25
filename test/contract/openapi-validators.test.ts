// The served OpenAPI documents in a validator's hands: every schema in them compiles with Ajv in strict mode
// (Ajv reads OpenAPI 3.0's `nullable` itself), and the bodies the servers send are valid against them. What a
// client generator or a gateway that validates does with the documents, done here first.
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsPlugin from 'ajv-formats';
import { beforeAll, describe, expect, it } from 'vitest';
import { runRecord } from '../support/crd-fixtures.ts';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import { buildOpenApiDocuments } from '../../docs/openapi-documents.ts';

const addFormats = addFormatsPlugin as unknown as (ajv: Ajv) => Ajv;

interface Document {
  paths: Record<string, Record<string, unknown>>;
  components: { schemas?: Record<string, object> };
}

/** References to components point at the keys the component schemas are added under. */
const rebase = (schema: object) => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"components#/')) as object;

/** Every schema an operation holds (parameters, request and response bodies, headers, callbacks): each `schema`. */
function operationSchemas(node: unknown, where: string, found: Array<{ where: string; schema: object }> = []) {
  if (node === null || typeof node !== 'object') return found;
  for (const [key, value] of Object.entries(node)) {
    if (key === 'schema' && typeof value === 'object' && value !== null) found.push({ where, schema: value });
    else operationSchemas(value, `${where}/${key}`, found);
  }
  return found;
}

class StrictValidators {
  readonly ajv = addFormats(new Ajv({ strict: true, allErrors: true }));
  readonly document: Document;

  constructor(document: Document) {
    this.document = document;
    for (const [name, schema] of Object.entries(document.components.schemas ?? {})) {
      this.ajv.addSchema(rebase(schema), `components#/${name}`);
    }
  }

  component(name: string): ValidateFunction {
    return this.ajv.compile({ $ref: `components#/${name}` });
  }

  /** The schema of an operation's response body. */
  response(path: string, method: string, status: string, mediaType: string): ValidateFunction {
    const operation = this.document.paths[path]?.[method] as { responses: Record<string, { content: Record<string, { schema: object }> }> };
    return this.ajv.compile(rebase(operation.responses[status]!.content[mediaType]!.schema));
  }
}

function expectValid(validate: ValidateFunction, body: unknown, label: string): void {
  expect(validate(body), `${label}: ${JSON.stringify(validate.errors)}`).toBe(true);
}

const problemBody = new ProblemError(Problems.overCapacity, 'retry later', { extensions: { parameter: 'async' } }).toBody();
const anyJsonValues: unknown[] = [null, 'text', 3.5, 0, false, [1, 'a', null], { nested: { list: [] } }];

let run: StrictValidators;
let management: StrictValidators;
beforeAll(async () => {
  const documents = (await buildOpenApiDocuments()) as { run: Document; management: Document };
  run = new StrictValidators(documents.run);
  management = new StrictValidators(documents.management);
});

describe('the served OpenAPI documents under Ajv strict mode', () => {
  it.each(['run', 'management'] as const)('the %s document: every component and operation schema compiles', (name) => {
    const validators = name === 'run' ? run : management;
    const failures: string[] = [];
    const components = Object.keys(validators.document.components.schemas ?? {});
    for (const component of components) {
      try {
        validators.component(component);
      } catch (error) {
        failures.push(`components/schemas/${component}: ${(error as Error).message}`);
      }
    }
    const schemas = operationSchemas(validators.document.paths, 'paths');
    for (const { where, schema } of schemas) {
      try {
        validators.ajv.compile(rebase(schema));
      } catch (error) {
        failures.push(`${where}: ${(error as Error).message}`);
      }
    }
    expect(failures).toEqual([]);
    expect(components.length + schemas.length).toBeGreaterThan(5);
  });

  it('the run document: a result and a webhook result are any JSON value, or null, and are required where listed', () => {
    const syncResult = run.component('SyncResult');
    const delivery = run.component('WebhookDelivery');
    const runId = runRecord().id;
    for (const result of anyJsonValues) {
      expectValid(syncResult, { run_id: runId, result, run_time_ms: 1.5 }, `SyncResult with ${JSON.stringify(result)}`);
      const body = { run_id: runId, status: 'success', status_code: 200, result, run_time_ms: 1.5, timestamp: '2026-01-31T12:00:00.000Z' };
      expectValid(delivery, body, `WebhookDelivery with ${JSON.stringify(result)}`);
    }
    expect(syncResult({ run_id: runId, run_time_ms: 1.5 })).toBe(false);
  });

  it('the run document: a problem body as the sidecar renders it', () => {
    expectValid(run.component('Problem'), problemBody, 'Problem');
  });

  it('the management document: pages and items of run records, and problems', () => {
    const path = '/v2/projects/{project_id}/apps/{app_id}/runs';
    const page = management.response(path, 'get', '200', 'application/json');
    const pending = { ...runRecord(), status: 'pending', statusCode: null, startedAt: null, completedAt: null, webhook: null };
    expectValid(page, { items: [runRecord(), pending], nextToken: null }, 'a page');
    expectValid(management.response(`${path}/{run_id}`, 'get', '200', 'application/json'), { item: runRecord() }, 'an item');
    const { webhook: _omitted, ...incomplete } = runRecord();
    expect(page({ items: [incomplete], nextToken: null })).toBe(false);
    expectValid(management.response(path, 'get', '503', 'application/problem+json'), problemBody, 'a problem');
  });
});
