// Request validation of the management API: its own Ajv, so that the plugin behaves the same in whichever
// server registers it (`runlet dev`, the operator), and the mapping of Ajv's errors to a 400 problem whose
// detail names the parameter and the values it accepts.
import { Ajv, type AnySchema, type AnySchemaObject, type ErrorObject } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { ROUTE_PARAMETERS, invalidName } from '../crds/route-names.ts';

/**
 * Fastify's own defaults differ in one way that matters here: they remove unknown properties where the schema
 * says `additionalProperties: false`, so a misspelt `pagesize=10` would be ignored. Here it is refused.
 */
export function createValidatorCompiler(): FastifySchemaCompiler<AnySchema> {
  const ajv = new Ajv({
    // Query and path values arrive as text.
    coerceTypes: true,
    // `pageSize` and `asyncOnly` get their documented defaults.
    useDefaults: true,
    removeAdditional: false,
    // Stop at the first error: one precise detail, and no work spent on a flood of bad parameters.
    allErrors: false,
    // Errors carry the failing value and its schema, from which the detail is written.
    verbose: true,
  });
  return ({ schema }) => ajv.compile(schema);
}

const PART_NAMES: Readonly<Record<string, string>> = {
  querystring: 'query parameter',
  params: 'path parameter',
  body: 'body field',
};

/**
 * The problem for a failed validation. `errors` must come from a validator made by createValidatorCompiler
 * (verbose Ajv errors); `context` is fastify's `validationContext`.
 */
export function validationProblem(errors: readonly ErrorObject[], context: string | undefined): ProblemError {
  const part = PART_NAMES[context ?? ''] ?? 'parameter';
  const [error] = errors;
  if (error === undefined) {
    return new ProblemError(Problems.invalidParameter, `a ${part} is invalid`);
  }
  if (error.keyword === 'additionalProperties') {
    const name = String(error.params.additionalProperty);
    const accepted = Object.keys(error.parentSchema?.properties ?? {});
    const known = accepted.length === 0 ? 'this operation takes none' : `accepted: ${accepted.join(', ')}`;
    return parameterProblem(name, `unknown ${part} ${name}; ${known}`);
  }
  if (error.keyword === 'required') {
    const name = String(error.params.missingProperty);
    return parameterProblem(name, `${part} ${name} is required`);
  }
  const name = parameterName(error.instancePath);
  const rule = context === 'params' ? ROUTE_PARAMETERS[name as keyof typeof ROUTE_PARAMETERS] : undefined;
  if (rule !== undefined) return invalidName(name, rule, error.data, part);
  if (Array.isArray(error.data)) {
    return parameterProblem(name, `${part} ${name} is given ${error.data.length} times; give it once`);
  }
  const expected = error.parentSchema === undefined ? undefined : describeExpected(error.parentSchema);
  const requirement = expected === undefined ? (error.message ?? 'be valid') : `be ${expected}`;
  return parameterProblem(name, `${part} ${name} must ${requirement}; got ${JSON.stringify(error.data)}`);
}

function parameterProblem(name: string, detail: string): ProblemError {
  return new ProblemError(Problems.invalidParameter, detail, { extensions: { parameter: name } });
}

/** `/pageSize` → `pageSize` (a JSON pointer of one segment: request parts are flat). */
function parameterName(instancePath: string): string {
  return instancePath.slice(1).replaceAll('~1', '/').replaceAll('~0', '~');
}

function describeExpected(schema: AnySchemaObject): string | undefined {
  if (Array.isArray(schema.enum)) return `one of ${schema.enum.join(', ')}`;
  if (schema.type === 'integer' || schema.type === 'number') {
    const kind = schema.type === 'integer' ? 'an integer' : 'a number';
    const { minimum, maximum } = schema;
    if (typeof minimum === 'number' && typeof maximum === 'number') return `${kind} from ${minimum} to ${maximum}`;
    if (typeof minimum === 'number') return `${kind} of at least ${minimum}`;
    if (typeof maximum === 'number') return `${kind} of at most ${maximum}`;
    return kind;
  }
  return undefined;
}
