// service.toml (the app developer's file) ⇄ App (its cluster form). Shared by `runlet dev`, which runs an app
// folder locally, and the commands that turn a folder into cluster objects.
//
// Values are checked by the App schema itself (crds/validate.ts), with App field names translated back into
// service.toml's: `service.toml: [scaling] response_grace_period must be an integer from 1 to 43200 seconds, got 0`.
import { readFile, stat } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { Value } from '@sinclair/typebox/value';
import { parse as parseToml, stringify as stringifyToml, TomlError } from 'smol-toml';
import { APP_KIND, RUNLET_API_VERSION } from './api-group.ts';
import { AppNameSchema, type App, type AppSpec, type CustomRuntime, type PythonRuntime } from './app-schema.ts';
import { describeActual, describeExpected } from './describe-schema.ts';
import { ENV_TABLE, KNOWN_TABLES, NAME_KEY, TOML_FIELDS, knownKeysOf } from './service-toml-fields.ts';
import { applyAppSpecDefaults, formatFieldPath, validateAppSpec, type FieldPath, type NameOf } from './validate.ts';

/** The custom runtime as `runlet dev` needs it: the image is optional, the folder is run instead. */
export type LocalCustomRuntime = Omit<CustomRuntime, 'image'> & { image?: string };

/** An App spec read from a folder: complete with defaults, except that a custom runtime may lack its image. */
export type LocalAppSpec = Omit<AppSpec, 'runtime'> & {
  runtime: { python?: PythonRuntime; custom?: LocalCustomRuntime };
};

export interface ParsedServiceToml {
  name: string;
  spec: LocalAppSpec;
  /** Keys and sections that were ignored, and settings without effect; for the developer to see. */
  warnings: string[];
}

export interface LoadedApp extends ParsedServiceToml {
  /** Absolute path of the app folder. */
  dir: string;
}

export interface ParseServiceTomlOptions {
  /** The app name when [deployment] name is absent: the folder's name. */
  defaultName: string;
  /** What error messages call the file; default `service.toml`. */
  source?: string;
}

export class ServiceTomlError extends Error {
  /** Each problem, in service.toml's words, without the file prefix. */
  readonly issues: readonly string[];
  /** Position of a TOML syntax error (1-based). */
  readonly line: number | undefined;
  readonly column: number | undefined;

  constructor(message: string, issues: readonly string[], position?: { line: number; column: number }) {
    super(message);
    this.name = 'ServiceTomlError';
    this.issues = issues;
    this.line = position?.line;
    this.column = position?.column;
  }
}

/** The name of the ConfigMap a folder's Python code is shipped in when deployed. */
export function codeConfigMapName(appName: string): string {
  return `${appName}-code`;
}

/** Reads `<dir>/service.toml` (absent: every default, named after the folder). */
export async function loadAppDir(dir: string): Promise<LoadedApp> {
  const absolute = resolve(dir);
  const folder = await stat(absolute).catch(() => undefined);
  if (!folder?.isDirectory()) throw new Error(`app folder ${absolute} does not exist or is not a folder`);
  const file = join(absolute, 'service.toml');
  const text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return '';
    throw new Error(`cannot read ${file}: ${error.message}`, { cause: error });
  });
  return { ...parseServiceToml(text, { defaultName: basename(absolute), source: file }), dir: absolute };
}

/** service.toml text → app name and spec with defaults; for `runlet dev`, so a custom image is optional. */
export function parseServiceToml(text: string, options: ParseServiceTomlOptions): ParsedServiceToml {
  return convert(text, options, { requireImage: false });
}

/** service.toml text → App object for the cluster (a custom runtime needs its image here). */
export function serviceTomlToApp(text: string, options: ParseServiceTomlOptions & { namespace: string }): App {
  const { name, spec } = convert(text, options, { requireImage: true });
  return {
    apiVersion: RUNLET_API_VERSION,
    kind: APP_KIND,
    metadata: { name, namespace: options.namespace },
    // convert() with requireImage reported a custom runtime without image as an error.
    spec: spec as AppSpec,
  };
}

/**
 * App → service.toml text. What service.toml cannot express (a Python image, code not shipped in the
 * `<name>-code` ConfigMap, env from Secrets) is listed in comments at the top rather than dropped unseen.
 */
export function appToServiceToml(app: App): string {
  const doc: Record<string, unknown> = {};
  setIn(doc, [NAME_KEY.table, NAME_KEY.key], app.metadata.name);
  const custom = app.spec.runtime.custom !== undefined;
  for (const field of TOML_FIELDS) {
    if (field.runtime === 'python' && custom) continue;
    const value = getIn(app.spec, field.specPath);
    if (value !== undefined) setIn(doc, [...field.table.split('.'), field.key], field.toToml ? field.toToml(value) : value);
  }
  const plainEnv = (app.spec.env ?? []).filter((env) => env.valueFrom === undefined);
  if (plainEnv.length > 0) setIn(doc, ENV_TABLE.split('.'), Object.fromEntries(plainEnv.map((env) => [env.name, env.value ?? ''])));
  const notes = inexpressible(app).map((note) => `#   ${note}\n`);
  const header = notes.length > 0 ? `# Not expressible in service.toml, kept on the App "${app.metadata.name}" only:\n${notes.join('')}\n` : '';
  return header + stringifyToml(doc);
}

function inexpressible(app: App): string[] {
  const notes: string[] = [];
  const python = app.spec.runtime.python;
  if (python?.image !== undefined) notes.push(`spec.runtime.python.image = ${JSON.stringify(python.image)}`);
  if (python && python.code.configMap?.name !== codeConfigMapName(app.metadata.name)) {
    notes.push(`spec.runtime.python.code = ${JSON.stringify(python.code)}`);
  }
  (app.spec.env ?? []).forEach((env, i) => {
    const ref = env.valueFrom?.secretKeyRef;
    if (ref) notes.push(`spec.env[${i}]: ${env.name} from Secret ${JSON.stringify(ref.name)} key ${JSON.stringify(ref.key)}`);
  });
  return notes;
}

function convert(text: string, options: ParseServiceTomlOptions, mode: { requireImage: boolean }): ParsedServiceToml {
  const source = options.source ?? 'service.toml';
  const doc = readToml(text, source);
  const warnings: string[] = [];
  const issues: string[] = [];
  inspectTable(doc, '', warnings, issues);

  const nameIssue = appNameIssue(doc, options.defaultName);
  if (nameIssue) issues.push(nameIssue);
  const name = String(getTable(doc, NAME_KEY.table)?.[NAME_KEY.key] ?? options.defaultName);

  const { spec, envNames } = buildSpec(doc, name, warnings, issues);
  const defaulted = applyAppSpecDefaults(spec) as LocalAppSpec;
  const customImageMissing = defaulted.runtime.custom !== undefined && defaulted.runtime.custom.image === undefined;
  for (const issue of validateAppSpec(defaulted, { nameOf: tomlNameOf(envNames) })) {
    // The code ConfigMap is named after the app: a bad name is reported once, as the name.
    if (nameIssue && startsWith(issue.path, ['spec', 'runtime', 'python', 'code'])) continue;
    if (customImageMissing && startsWith(issue.path, ['spec', 'runtime', 'custom', 'image'])) {
      if (mode.requireImage) issues.push('[runtime.custom] image is required to deploy (only runlet dev runs the folder without one)');
      continue;
    }
    issues.push(issue.message);
  }
  if (issues.length > 0) throw new ServiceTomlError(issues.map((issue) => `${source}: ${issue}`).join('\n'), issues);
  return { name, spec: defaulted, warnings };
}

function readToml(text: string, source: string): Record<string, unknown> {
  try {
    return parseToml(text, { unsafeKeyBehaviour: 'throw' });
  } catch (error) {
    if (!(error instanceof TomlError)) throw error;
    // smol-toml's message is "reason\n\ncode block"; the position goes in front, the code block stays.
    const reason = error.message.split('\n')[0]!.replace(/^Invalid TOML document: /, '');
    const message = `${source}:${error.line}:${error.column}: invalid TOML: ${reason}\n${error.codeblock}`;
    throw new ServiceTomlError(message, [`invalid TOML: ${reason}`], error);
  }
}

/** Warns about what service.toml does not know; reports known tables that are not tables. */
function inspectTable(table: Record<string, unknown>, at: string, warnings: string[], issues: string[]): void {
  const known = knownKeysOf(at);
  for (const [key, value] of Object.entries(table)) {
    const child = at === '' ? key : `${at}.${key}`;
    if (KNOWN_TABLES.has(child)) {
      if (!isTable(value)) issues.push(`${child} must be a table ([${child}]), got ${describeActual(value)}`);
      else if (child !== ENV_TABLE) inspectTable(value, child, warnings, issues);
    } else if (at === 'dependencies' && isTable(value)) {
      // Not a typo to point out but packages the app expects: said plainly, with what to do about them.
      const packages = Array.isArray(value.packages) && value.packages.length > 0 ? ` (${value.packages.map(String).join(', ')})` : '';
      warnings.push(
        `[${child}]${packages} is not installed: Runlet installs [dependencies.pip] only. ` +
          'Install these yourself: on this machine for runlet dev, in the app\'s image for a cluster',
      );
    } else if (!known.has(key)) {
      warnings.push(isTable(value) ? `unknown section [${child}] (ignored)` : `unknown key ${at === '' ? '' : `[${at}] `}${key} (ignored)`);
    }
  }
}

function appNameIssue(doc: Record<string, unknown>, defaultName: string): string | undefined {
  const explicit = getTable(doc, NAME_KEY.table)?.[NAME_KEY.key];
  const name = explicit ?? defaultName;
  if (Value.Check(AppNameSchema, name)) return undefined;
  const expected = describeExpected(AppNameSchema);
  return explicit === undefined
    ? `the app name defaults to the folder name ${JSON.stringify(defaultName)}, which is not ${expected}; set [deployment] name`
    : `[deployment] name must be ${expected}, got ${describeActual(explicit)}`;
}

function buildSpec(doc: Record<string, unknown>, name: string, warnings: string[], issues: string[]) {
  const custom = getTable(doc, 'runtime.custom') !== undefined;
  const spec: Record<string, unknown> = {
    runtime: custom ? { custom: {} } : { python: { code: { configMap: { name: codeConfigMapName(name) } } } },
  };
  for (const field of TOML_FIELDS) {
    const value = getTable(doc, field.table)?.[field.key];
    if (value === undefined) continue;
    if (field.runtime === 'python' && custom) {
      warnings.push(`[${field.table}] ${field.key} applies to the Python runtime only (ignored with [runtime.custom])`);
      continue;
    }
    if (field.key === 'entrypoint' && typeof value !== 'string' && !Array.isArray(value)) {
      issues.push(`[runtime.custom] entrypoint must be a command string (run with /bin/sh -c) or an array of strings, got ${describeActual(value)}`);
      continue;
    }
    setIn(spec, field.specPath, field.fromToml ? field.fromToml(value) : value);
  }
  const env = Object.entries(getTable(doc, ENV_TABLE) ?? {});
  if (env.length > 0) spec.env = env.map(([envName, value]) => ({ name: envName, value }));
  return { spec, envNames: env.map(([envName]) => envName) };
}

/** App spec paths in service.toml's words: ['spec','scaling','minReplicas'] → `[scaling] min_replicas`. */
function tomlNameOf(envNames: readonly string[]): NameOf {
  return (path) => {
    const inSpec = path.slice(1);
    if (inSpec[0] === 'env' && typeof inSpec[1] === 'number') {
      // An issue with the name itself quotes the name as the value it got.
      return inSpec[2] === 'name' ? `[${ENV_TABLE}] key` : `[${ENV_TABLE}] ${tomlKey(envNames[inSpec[1]] ?? '')}`;
    }
    const field = TOML_FIELDS.find((candidate) => startsWith(inSpec, candidate.specPath));
    if (!field) return formatFieldPath(path);
    const rest = inSpec.slice(field.specPath.length).map((segment) => (typeof segment === 'number' ? `[${segment}]` : `.${segment}`));
    return `[${field.table}] ${field.key}${rest.join('')}`;
  };
}

/** A key as written in TOML: bare when it may be, quoted otherwise. */
function tomlKey(key: string): string {
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
}

function getTable(doc: Record<string, unknown>, dotted: string): Record<string, unknown> | undefined {
  let at: unknown = doc;
  for (const key of dotted.split('.')) {
    if (!isTable(at)) return undefined;
    at = at[key];
  }
  return isTable(at) ? at : undefined;
}

function getIn(root: unknown, path: readonly string[]): unknown {
  let at = root;
  for (const key of path) at = isTable(at) ? at[key] : undefined;
  return at;
}

function setIn(root: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let at = root;
  for (const key of path.slice(0, -1)) {
    if (!isTable(at[key])) at[key] = {};
    at = at[key] as Record<string, unknown>;
  }
  at[path[path.length - 1]!] = value;
}

function startsWith(path: FieldPath, prefix: readonly (string | number)[]): boolean {
  return prefix.every((segment, i) => path[i] === segment);
}

/** A TOML table: a plain object (smol-toml makes them without prototype), not an array or a date. */
function isTable(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === null || prototype === Object.prototype;
}
