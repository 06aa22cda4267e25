// The template functions the chart uses, with Helm's (Sprig's) semantics, and the Go rules for printing a
// value and for what counts as empty. Argument types are checked as Go's reflection-based calls would:
// a wrong type is an error, not a coercion.
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';

/** `include` needs the renderer; everything else is pure. */
export interface FunctionContext {
  include(name: string, data: unknown): string;
}

export type TemplateFunction = (args: unknown[], context: FunctionContext) => unknown;

/** Raised for a failed call; the renderer adds the file and line. */
export class FunctionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FunctionError';
  }
}

export const TEMPLATE_FUNCTIONS: Record<string, TemplateFunction> = {
  // Helm: sigs.k8s.io/yaml (go-yaml v2: YAML 1.1, so `off` or `y` are quoted to stay strings; sorted keys;
  // sequences not indented under their key), final newline trimmed.
  toYaml: (args) => {
    const [value] = arity('toYaml', args, 1);
    return stringify(value ?? null, { version: '1.1', sortMapEntries: true, indentSeq: false, lineWidth: 0 }).replace(/\n$/, '');
  },
  nindent: (args) => {
    const [spaces, text] = arity('nindent', args, 2);
    return '\n' + indent(integer('nindent', spaces), string('nindent', text));
  },
  // Sprig: each argument as Go's %q; nil arguments are dropped there. Quoting a missing value is almost
  // always a typo in a value path, so here it is an error.
  quote: (args) => {
    if (args.length === 0) throw new FunctionError('quote needs an argument');
    return args.map((arg) => goQuote(printValue(arg, 'quote'))).join(' ');
  },
  // Sprig: `default DEFAULT VALUE` is VALUE unless it is empty.
  default: (args) => {
    if (args.length < 1 || args.length > 2) throw new FunctionError(`default takes 1 or 2 arguments, got ${args.length}`);
    return args.length === 2 && !isEmpty(args[1]) ? args[1] : args[0];
  },
  // Helm: fails on nil and on the empty string (other empty values pass).
  required: (args) => {
    const [message, value] = arity('required', args, 2);
    if (value === undefined || value === null || value === '') throw new FunctionError(string('required', message));
    return value;
  },
  include: (args, context) => {
    const [name, data] = arity('include', args, 2);
    return context.include(string('include', name), data);
  },
  printf: (args) => {
    const [format, ...values] = args;
    return goSprintf(string('printf', format), values);
  },
  // Sprig: a number as an int64 (a float64 from a values file truncated), which Go prints in full: how a count of
  // a million or more is printed without the exponent form.
  int64: (args) => {
    const [value] = arity('int64', args, 1);
    if (typeof value !== 'number' || !Number.isFinite(value)) throw new FunctionError(`int64 wants a number, got ${describe(value)}`);
    return BigInt(Math.trunc(value));
  },
  // Sprig: a negative count keeps the end of the string.
  trunc: (args) => {
    const [count, text] = arity('trunc', args, 2);
    const n = integer('trunc', count);
    const s = string('trunc', text);
    if (n < 0) return s.length + n > 0 ? s.slice(s.length + n) : s;
    return s.slice(0, n);
  },
  trimSuffix: (args) => {
    const [suffix, text] = arity('trimSuffix', args, 2);
    const s = string('trimSuffix', text);
    const tail = string('trimSuffix', suffix);
    return tail !== '' && s.endsWith(tail) ? s.slice(0, -tail.length) : s;
  },
  // Sprig: `contains SUBSTRING STRING`.
  contains: (args) => {
    const [needle, haystack] = arity('contains', args, 2);
    return string('contains', haystack).includes(string('contains', needle));
  },
  // Go's builtin: `eq A B C…` is whether A equals any of the others; only strings, numbers and booleans compare.
  eq: (args) => {
    if (args.length < 2) throw new FunctionError(`eq takes 2 or more arguments, got ${args.length}`);
    const [first, ...others] = args.map((arg) => scalar('eq', arg));
    return others.some((other) => other === first);
  },
  // Helm: stops rendering with the message (`helm install` prints it).
  fail: (args) => {
    const [message] = arity('fail', args, 1);
    throw new FunctionError(string('fail', message));
  },
  sha256sum: (args) => {
    const [text] = arity('sha256sum', args, 1);
    return createHash('sha256').update(string('sha256sum', text)).digest('hex');
  },
  // Sprig: `semverCompare CONSTRAINT VERSION`. Only a single comparison (`>=1.21.0-0`) is supported; pre-release
  // parts are ignored, which is what the `-0` idiom for Kubernetes versions (v1.29.3-eks-…) asks for.
  semverCompare: (args) => {
    const [constraint, version] = arity('semverCompare', args, 2);
    const parsed = /^\s*(>=|<=|>|<|=|!=)?\s*(v?\d+(?:\.\d+){0,2}(?:-\S*)?)\s*$/.exec(string('semverCompare', constraint));
    if (parsed === null) throw new FunctionError(`semverCompare: only one comparison such as ">=1.21.0-0" is supported, got "${String(constraint)}"`);
    const order = compareVersions(semverNumbers(string('semverCompare', version)), semverNumbers(parsed[2]!));
    switch (parsed[1] ?? '=') {
      case '>=': return order >= 0;
      case '<=': return order <= 0;
      case '>': return order > 0;
      case '<': return order < 0;
      case '!=': return order !== 0;
      default: return order === 0;
    }
  },
};

function semverNumbers(version: string): number[] {
  const numbers = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+].*)?$/.exec(version);
  if (numbers === null) throw new FunctionError(`semverCompare: "${version}" is not a version`);
  return numbers.slice(1).map((part) => Number(part ?? 0));
}

function compareVersions(a: number[], b: number[]): number {
  for (let index = 0; index < 3; index += 1) {
    if (a[index] !== b[index]) return a[index]! - b[index]!;
  }
  return 0;
}

/**
 * How an action prints a value (Go's fmt %v). Stricter than Helm in two places, both loudly: a missing value
 * (Helm prints nothing, which hides typos in value paths) and a map or list (Go prints `map[…]`: use toYaml).
 */
export function printValue(value: unknown, where: string): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number') return printNumber(value, where);
  if (typeof value === 'bigint') return String(value);
  if (value === undefined || value === null) throw new FunctionError(`${where}: the value is missing (Helm would print nothing)`);
  throw new FunctionError(`${where}: cannot print a ${Array.isArray(value) ? 'list' : 'map'}; use toYaml`);
}

/**
 * Helm reads every number of a values file as a float64, which %v prints in exponent form from 1e6 on
 * (`1e+06`) — a classic Helm bug that rendering must not hide.
 */
function printNumber(value: number, where: string): string {
  if (!Number.isInteger(value)) throw new FunctionError(`${where}: printing the fraction ${value} is not supported by this renderer`);
  if (Math.abs(value) >= 1e6) throw new FunctionError(`${where}: Helm prints ${value} as a float64 in exponent form; quote it in the values`);
  return String(value);
}

/** Go templates' truth: false, 0, nil, and empty strings, lists and maps are false. */
export function isEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 0 || value === 0n || value === '') return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

function arity(name: string, args: unknown[], count: number): unknown[] {
  if (args.length !== count) throw new FunctionError(`${name} takes ${count} argument${count === 1 ? '' : 's'}, got ${args.length}`);
  return args;
}

function string(name: string, value: unknown): string {
  if (typeof value !== 'string') throw new FunctionError(`${name} wants a string, got ${describe(value)}`);
  return value;
}

function scalar(name: string, value: unknown): string | number | boolean {
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') throw new FunctionError(`${name} compares strings, numbers and booleans, got ${describe(value)}`);
  return value;
}

function integer(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new FunctionError(`${name} wants an integer, got ${describe(value)}`);
  return value;
}

function describe(value: unknown): string {
  if (value === undefined || value === null) return 'a missing value';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a map' : `the ${typeof value} ${JSON.stringify(value)}`;
}

/** Sprig's indent (which nindent starts with a newline): every line, blank ones included, gets the padding. */
function indent(spaces: number, text: string): string {
  const pad = ' '.repeat(spaces);
  return pad + text.replaceAll('\n', '\n' + pad);
}

/** Go's strconv.Quote for the characters a chart meets; control characters as \xNN. */
function goQuote(text: string): string {
  const escaped = text.replace(/[\\"\n\r\t\x00-\x1f\x7f]/g, (char) => {
    const named: Record<string, string> = { '\\': '\\\\', '"': '\\"', '\n': '\\n', '\r': '\\r', '\t': '\\t' };
    return named[char] ?? `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
  return `"${escaped}"`;
}

/** Go's Sprintf for %s with string arguments (all the chart formats), and %%. */
function goSprintf(format: string, values: unknown[]): string {
  let next = 0;
  const result = format.replace(/%(.)/g, (_, verb: string) => {
    if (verb === '%') return '%';
    if (verb !== 's') throw new FunctionError(`printf: the verb %${verb} is not supported by this renderer (only %s)`);
    if (next >= values.length) throw new FunctionError(`printf "${format}": too few arguments`);
    return string('printf %s', values[next++]);
  });
  if (next !== values.length) throw new FunctionError(`printf "${format}": ${values.length - next} argument(s) left over`);
  return result;
}
