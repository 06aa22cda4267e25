// Renders a Helm chart the way `helm template` would, for the chart's tests and for install.yaml: there is
// no helm binary on these machines. It implements the Go text/template subset charts/runlet uses, with
// Helm's and Sprig's semantics, and fails loudly (TemplateError with file and line) on anything else:
//
//   actions      {{ pipeline }}, with {{- and -}} trimming, and {{/* comments */}}
//   operands     .  .Field.Chain  $  $.Field.Chain  "strings" `raw strings`  integers  true false  ( pipeline )
//   data         .Values (values.yaml coalesced with the given values), .Release.Name/.Namespace/.Service,
//                .Chart.Name/.Version/.AppVersion (and the other Chart.yaml fields, capitalised as in Helm),
//                .Capabilities.KubeVersion.Version/.Major/.Minor (of the given kubeVersion)
//   pipelines    cmd arg… | cmd arg…  (the previous result is the last argument)
//   control      if / else if / else / end;  with / else / end;  range LIST / else / end (over a list, `.`
//                each element; no variables);  define "name" / end  (in any template file; all share one
//                namespace)
//   functions    toYaml nindent quote default required include printf(%s) trunc trimSuffix contains
//                sha256sum semverCompare eq fail  (template-functions.ts)
//
// Not supported, because the chart does not use them (errors, so a template that starts to is noticed):
// range over a map, variables and assignment, template/block, and/or/not/ne and every other function, field access
// on a function result, printing maps or lists (use toYaml). Stricter than Helm: printing or quoting a
// missing value is an error (Helm prints nothing), which catches typos in value paths.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml, parseDocument } from 'yaml';
import { FunctionError, TEMPLATE_FUNCTIONS, isEmpty, printValue, type FunctionContext } from './template-functions.ts';
import { TemplateError, parseTemplate, type Operand, type ParsedTemplate, type Pipeline, type TemplateNode } from './template-parse.ts';

export interface Release {
  name: string;
  namespace: string;
  /** Helm's is always "Helm"; install.yaml, applied with kubectl, says otherwise. */
  service?: string;
}

export interface RenderOptions {
  release: Release;
  /** Values files applied over values.yaml, in order (as `helm -f`). */
  valuesFiles?: string[];
  /** Applied last (as `helm --set`). */
  values?: Record<string, unknown>;
  /** The cluster's version as `.Capabilities.KubeVersion` (as `helm template --kube-version`). Default DEFAULT_KUBE_VERSION. */
  kubeVersion?: string;
}

/** What `helm template` assumes without a cluster or --kube-version: a current release. */
export const DEFAULT_KUBE_VERSION = 'v1.33.0';

/** One object of the output: the YAML text of its document and the object it parses to. */
export interface RenderedManifest {
  /** `templates/deployment.yaml` */
  source: string;
  text: string;
  object: KubeManifest;
}

export interface KubeManifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

export interface RenderedChart {
  /** Chart.yaml with Helm's field names (`.Chart.AppVersion`). */
  chart: Record<string, unknown>;
  values: Record<string, unknown>;
  /** The files of crds/, as they are (Helm does not template them). */
  crds: { source: string; text: string }[];
  manifests: RenderedManifest[];
  notes: string;
}

type Scope = { dot: unknown; root: unknown };

/** Chart.yaml keys as Helm's chart.Metadata names them in templates. */
const CHART_FIELDS: Record<string, string> = {
  apiVersion: 'APIVersion',
  name: 'Name',
  version: 'Version',
  appVersion: 'AppVersion',
  description: 'Description',
  type: 'Type',
  kubeVersion: 'KubeVersion',
  home: 'Home',
  keywords: 'Keywords',
};

export function renderChart(chartDir: string, options: RenderOptions): RenderedChart {
  const chartYaml = readYamlMapping(join(chartDir, 'Chart.yaml'));
  const chart = Object.fromEntries(
    Object.entries(chartYaml).map(([key, value]) => {
      const field = CHART_FIELDS[key];
      if (field === undefined) throw new Error(`${chartDir}/Chart.yaml: the field "${key}" is not known to this renderer`);
      return [field, value];
    }),
  );
  let values = readYamlMapping(join(chartDir, 'values.yaml'));
  for (const file of options.valuesFiles ?? []) values = coalesceValues(values, readYamlMapping(file));
  if (options.values !== undefined) values = coalesceValues(values, options.values);

  const templateDir = join(chartDir, 'templates');
  const templates = readdirSync(templateDir)
    .sort()
    .map((name) => parseTemplate(`templates/${name}`, readFileSync(join(templateDir, name), 'utf8')));
  const defines = new Map<string, TemplateNode[]>();
  for (const template of templates) {
    for (const [name, body] of template.defines) {
      if (defines.has(name)) throw new TemplateError(template.file, 1, `template "${name}" is defined in two files`);
      defines.set(name, body);
    }
  }
  const release = { Name: options.release.name, Namespace: options.release.namespace, Service: options.release.service ?? 'Helm' };
  const root = { Values: values, Release: release, Chart: chart, Capabilities: { KubeVersion: kubeVersionCapability(options.kubeVersion ?? DEFAULT_KUBE_VERSION) } };
  const renderer = new TemplateRenderer(defines);

  const manifests: RenderedManifest[] = [];
  let notes = '';
  for (const template of templates) {
    const name = template.file.slice('templates/'.length);
    if (name.startsWith('_')) continue;
    const output = renderer.render(template, root);
    if (name === 'NOTES.txt') notes = output;
    else if (name.endsWith('.yaml')) manifests.push(...splitManifests(template.file, output));
    else throw new Error(`${template.file}: only *.yaml, NOTES.txt and _*.tpl files are expected in templates/`);
  }

  const crdDir = join(chartDir, 'crds');
  const crds = readdirSync(crdDir)
    .sort()
    .map((name) => ({ source: `crds/${name}`, text: readFileSync(join(crdDir, name), 'utf8') }));
  return { chart, values, crds, manifests, notes };
}

/** Helm's chartutil.KubeVersion: `Version` as given (v-prefixed), `Major` and `Minor` as strings. */
function kubeVersionCapability(version: string): { Version: string; Major: string; Minor: string } {
  const numbers = /^v?(\d+)\.(\d+)(\.\d+.*)?$/.exec(version);
  if (numbers === null) throw new Error(`kubeVersion must look like v1.20.2, got "${version}"`);
  return { Version: `v${numbers[1]}.${numbers[2]}${numbers[3] ?? '.0'}`, Major: numbers[1]!, Minor: numbers[2]! };
}

/** One template source rendered with `data` as `.` and `$`; `helpers` are sources whose defines it may include. */
export function renderTemplate(source: string, data: unknown, helpers: string[] = []): string {
  const template = parseTemplate('template', source);
  const defines = new Map(template.defines);
  for (const [index, helper] of helpers.entries()) {
    for (const [name, body] of parseTemplate(`helper${index}`, helper).defines) defines.set(name, body);
  }
  return new TemplateRenderer(defines).render(template, data);
}

/** Helm's coalescing of values: maps merge key by key, anything else replaces, and null deletes the key. */
export function coalesceValues(base: Record<string, unknown>, overrides: Record<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(overrides)) {
    const current = result[key];
    if (value === null) delete result[key];
    else if (isMapping(value) && isMapping(current)) result[key] = coalesceValues(current, value);
    else result[key] = value;
  }
  return result;
}

class TemplateRenderer {
  readonly #defines: Map<string, TemplateNode[]>;
  #file = '';
  #depth = 0;

  constructor(defines: Map<string, TemplateNode[]>) {
    this.#defines = defines;
  }

  render(template: ParsedTemplate, data: unknown): string {
    this.#file = template.file;
    return this.#nodes(template.nodes, { dot: data, root: data });
  }

  #nodes(nodes: TemplateNode[], scope: Scope): string {
    let output = '';
    for (const node of nodes) output += this.#node(node, scope);
    return output;
  }

  #node(node: TemplateNode, scope: Scope): string {
    switch (node.kind) {
      case 'text':
        return node.text;
      case 'print':
        return this.#guard(node.pipeline.line, () => printValue(this.#pipeline(node.pipeline, scope), 'printing'));
      case 'if': {
        const branch = node.branches.find((candidate) => !isEmpty(this.#pipeline(candidate.condition, scope)));
        return this.#nodes(branch?.body ?? node.otherwise, scope);
      }
      case 'with': {
        const value = this.#pipeline(node.value, scope);
        return isEmpty(value) ? this.#nodes(node.otherwise, scope) : this.#nodes(node.body, { dot: value, root: scope.root });
      }
      case 'range': {
        const value = this.#pipeline(node.value, scope);
        if (isEmpty(value)) return this.#nodes(node.otherwise, scope);
        if (!Array.isArray(value)) throw new TemplateError(this.#file, node.value.line, 'range over a map is not supported by this renderer: give it a list');
        return value.map((element: unknown) => this.#nodes(node.body, { dot: element, root: scope.root })).join('');
      }
    }
  }

  #pipeline(pipeline: Pipeline, scope: Scope): unknown {
    return this.#guard(pipeline.line, () => {
      let piped: { value: unknown } | undefined;
      for (const command of pipeline.commands) piped = { value: this.#command(command, scope, piped, pipeline.line) };
      return piped!.value;
    });
  }

  #command(command: Operand[], scope: Scope, piped: { value: unknown } | undefined, line: number): unknown {
    const [head, ...rest] = command;
    if (head!.kind !== 'function') {
      if (rest.length > 0 || piped !== undefined) throw new TemplateError(this.#file, line, 'only a function can take arguments');
      return this.#operand(head!, scope, line);
    }
    const fn = TEMPLATE_FUNCTIONS[head!.name];
    if (fn === undefined) throw new TemplateError(this.#file, line, `the function "${head!.name}" is not supported by this renderer`);
    const args = rest.map((operand) => this.#operand(operand, scope, line));
    if (piped !== undefined) args.push(piped.value);
    const context: FunctionContext = { include: (name, data) => this.#include(name, data, line) };
    return fn(args, context);
  }

  #operand(operand: Operand, scope: Scope, line: number): unknown {
    switch (operand.kind) {
      case 'string':
      case 'number':
      case 'bool':
        return operand.value;
      case 'pipeline':
        return this.#pipeline(operand.pipeline, scope);
      case 'function':
        throw new TemplateError(this.#file, line, `"${operand.name}" used as a value: call it in parentheses`);
      case 'field': {
        let value = operand.from === 'root' ? scope.root : scope.dot;
        const walked: string[] = [];
        for (const name of operand.path) {
          // Go: a field of nil is an error ("nil pointer evaluating"), a missing map key is nil.
          if (value === undefined || value === null) throw new TemplateError(this.#file, line, `nil pointer evaluating .${walked.join('.')}.${name}`);
          if (!isMapping(value)) throw new TemplateError(this.#file, line, `can't evaluate field ${name} in .${walked.join('.')} (not a map)`);
          value = Object.hasOwn(value, name) ? value[name] : undefined;
          walked.push(name);
        }
        return value;
      }
    }
  }

  #include(name: string, data: unknown, line: number): string {
    const body = this.#defines.get(name);
    if (body === undefined) throw new TemplateError(this.#file, line, `no template named "${name}"`);
    // Helm stops runaway recursion at 1000 nested includes.
    if (++this.#depth > 1000) throw new TemplateError(this.#file, line, `include "${name}" nests too deeply`);
    try {
      return this.#nodes(body, { dot: data, root: data });
    } finally {
      this.#depth--;
    }
  }

  /** Function errors get the file and line of the action that called them. */
  #guard<T>(line: number, run: () => T): T {
    try {
      return run();
    } catch (error) {
      if (error instanceof FunctionError) throw new TemplateError(this.#file, line, error.message);
      throw error;
    }
  }
}

/**
 * The documents of one template's output, split as Helm splits them (a line `---`); blank ones dropped,
 * any other without apiVersion, kind and metadata.name refused.
 */
function splitManifests(source: string, output: string): RenderedManifest[] {
  const manifests: RenderedManifest[] = [];
  for (const chunk of output.split(/(?:^|\s*\n)---\s*/)) {
    const text = chunk.trim();
    if (text === '') continue;
    // kubectl and the API server read YAML 1.1 (sigs.k8s.io/yaml): `off` is false there, not a string.
    const document = parseDocument(text, { version: '1.1', uniqueKeys: true });
    if (document.errors.length > 0) throw new Error(`${source} renders invalid YAML: ${document.errors[0]!.message}\n${text}`);
    const object: unknown = document.toJS();
    if (!isMapping(object) || typeof object.apiVersion !== 'string' || typeof object.kind !== 'string' || !isMapping(object.metadata) || typeof object.metadata.name !== 'string') {
      throw new Error(`${source} renders a document without apiVersion, kind and metadata.name:\n${text}`);
    }
    manifests.push({ source, text, object: object as KubeManifest });
  }
  return manifests;
}

function readYamlMapping(path: string): Record<string, unknown> {
  // Helm reads values and Chart.yaml as YAML 1.1 (sigs.k8s.io/yaml), where `off` is false.
  const parsed: unknown = parseYaml(readFileSync(path, 'utf8'), { version: '1.1', uniqueKeys: true });
  if (parsed === null || parsed === undefined) return {};
  if (!isMapping(parsed)) throw new Error(`${path} must hold a mapping`);
  return parsed;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
