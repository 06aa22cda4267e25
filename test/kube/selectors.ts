// Label selectors (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`) and field selectors
// (`metadata.name=x`, `a.b!=c`), parsed once into predicates over objects.

import { badRequest } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

export type ObjectPredicate = (object: KubeObject) => boolean;

const matchAll: ObjectPredicate = () => true;

/** Splits on commas that are not inside a `( … )` value set. */
function splitRequirements(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const char of selector) {
    if (char === '(') depth += 1;
    if (char === ')') depth -= 1;
    if (char === ',' && depth === 0) {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts.map((part) => part.trim()).filter((part) => part !== '');
}

const SET_REQUIREMENT = /^([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)$/;
const EQUALITY_REQUIREMENT = /^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$/;
const EXISTS_REQUIREMENT = /^(!?)\s*([^\s!=(),]+)$/;

type LabelRequirement = (labels: Record<string, string>) => boolean;

function parseLabelRequirement(text: string, selector: string): LabelRequirement {
  const set = SET_REQUIREMENT.exec(text);
  if (set !== null) {
    const [, key, operator, rawValues] = set;
    const values = new Set(rawValues.split(',').map((v) => v.trim()));
    return operator === 'in'
      ? (labels) => key in labels && values.has(labels[key])
      : (labels) => !(key in labels) || !values.has(labels[key]);
  }
  const equality = EQUALITY_REQUIREMENT.exec(text);
  if (equality !== null) {
    const [, key, operator, value] = equality;
    return operator === '!='
      ? (labels) => labels[key] !== value
      : (labels) => key in labels && labels[key] === value;
  }
  const exists = EXISTS_REQUIREMENT.exec(text);
  if (exists !== null) {
    const [, negated, key] = exists;
    return negated === '!' ? (labels) => !(key in labels) : (labels) => key in labels;
  }
  throw badRequest(`unable to parse requirement "${text}" of label selector "${selector}"`);
}

export function parseLabelSelector(selector: string | null): ObjectPredicate {
  if (selector === null || selector.trim() === '') return matchAll;
  const requirements = splitRequirements(selector).map((text) => parseLabelRequirement(text, selector));
  return (object) => {
    const labels = object.metadata.labels ?? {};
    return requirements.every((requirement) => requirement(labels));
  };
}

/** The value of a dotted field path as the API server compares it: a string, empty when absent. */
function fieldValue(object: KubeObject, path: string): string {
  let value: unknown = object;
  for (const segment of path.split('.')) {
    value = isPlainObject(value) ? value[segment] : undefined;
  }
  return value === undefined || value === null ? '' : String(value);
}

const FIELD_REQUIREMENT = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/;

/**
 * Any dotted path is accepted (the real server accepts only metadata.name, metadata.namespace and a few
 * fields per kind, and rejects the rest).
 */
export function parseFieldSelector(selector: string | null): ObjectPredicate {
  if (selector === null || selector.trim() === '') return matchAll;
  const requirements = selector.split(',').map((text) => {
    const match = FIELD_REQUIREMENT.exec(text.trim());
    if (match === null) throw badRequest(`invalid field selector requirement "${text}" in "${selector}"`);
    const [, path, operator, value] = match;
    return operator === '!='
      ? (object: KubeObject) => fieldValue(object, path) !== value
      : (object: KubeObject) => fieldValue(object, path) === value;
  });
  return (object) => requirements.every((requirement) => requirement(object));
}

export function combine(...predicates: ObjectPredicate[]): ObjectPredicate {
  return (object) => predicates.every((predicate) => predicate(object));
}
