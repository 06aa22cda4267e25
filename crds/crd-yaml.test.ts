import { readFile } from 'node:fs/promises';
import { CustomResourceDefinition as CrdModel } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { customApp, runLog } from '../test/support/crd-fixtures.ts';
import { crdFiles } from './crd-yaml.ts';
import type { StructuralSchema } from './structural-schema.ts';

const files = crdFiles();

describe.each(files)('$fileName', ({ fileName, crd, yaml }) => {
  const version = crd.spec.versions[0]!;
  const root = version.schema.openAPIV3Schema;

  it('is committed as generated (run `npm run crds` after changing a schema)', async () => {
    const committed = await readFile(new URL(fileName, import.meta.url), 'utf8');
    expect(committed, `crds/${fileName} is stale: run npm run crds`).toBe(yaml);
  });

  it('parses back to the CRD object', () => {
    expect(parse(yaml)).toEqual(crd);
  });

  it('is a valid apiextensions.k8s.io/v1 CustomResourceDefinition (kubernetes-models)', () => {
    expect(() => new CrdModel(parse(yaml)).validate()).not.toThrow();
  });

  it('is namespaced in group runlet.dev, version v1alpha1, with the status subresource', () => {
    expect(crd.metadata.name).toBe(`${crd.spec.names.plural}.runlet.dev`);
    expect(crd.spec.scope).toBe('Namespaced');
    expect(version).toMatchObject({ name: 'v1alpha1', served: true, storage: true, subresources: { status: {} } });
  });

  it('has a structural schema', () => {
    expect(structuralProblems(root, '')).toEqual([]);
    // Only name and generateName of metadata may be constrained.
    expect(Object.keys(root.properties!.metadata!.properties ?? {}).filter((key) => key !== 'name')).toEqual([]);
    expect(root.properties!.metadata!.type).toBe('object');
  });

  it('prints columns whose paths exist in the schema', () => {
    for (const column of version.additionalPrinterColumns) {
      if (column.jsonPath === '.metadata.creationTimestamp') continue;
      const target = column.jsonPath.slice(1).split('.').reduce<StructuralSchema | undefined>((at, key) => at?.properties?.[key], root);
      expect(target, column.jsonPath).toBeDefined();
      expect(target!.type, column.jsonPath).toBe(column.type);
    }
  });
});

it('shows desired and ready replicas, the last scaling, URL and age for apps; app, runs and age for runlogs', () => {
  const columns = Object.fromEntries(files.map((file) => [file.crd.spec.names.plural, file.crd.spec.versions[0]!.additionalPrinterColumns.map((c) => c.name)]));
  expect(columns).toEqual({ apps: ['Desired', 'Ready', 'Scaling', 'URL', 'Age'], runlogs: ['App', 'Runs', 'Age'] });
});

it('the fixtures exercise every App and RunLog field (so the schemas are not tested on a subset)', () => {
  const [appFile, runLogFile] = files;
  const unexercised = (schema: StructuralSchema, value: unknown, path: string): string[] => {
    if (schema.type === 'array') {
      if (!Array.isArray(value) || value.length === 0) return [path];
      // A field counts as exercised when any item has it.
      const perItem = value.map((item) => unexercised(schema.items!, item, `${path}[]`));
      return perItem[0]!.filter((missing) => perItem.every((list) => list.includes(missing)));
    }
    if (schema.type !== 'object' || !schema.properties) return value === undefined ? [path] : [];
    const record = (value ?? {}) as Record<string, unknown>;
    return Object.entries(schema.properties).flatMap(([key, child]) => unexercised(child, record[key], `${path}.${key}`));
  };
  const appRoot = appFile!.crd.spec.versions[0]!.schema.openAPIV3Schema.properties!;
  const logRoot = runLogFile!.crd.spec.versions[0]!.schema.openAPIV3Schema.properties!;
  const app = customApp();
  // customApp is the custom runtime; the Python side is covered by the python fields of this variant.
  const python = { runtime: { python: { image: 'i', module: 'main', code: { configMap: { name: 'c' }, baked: true } } } };
  const missing = [
    ...unexercised(appRoot.spec!, { ...app.spec, runtime: { ...app.spec.runtime, ...python.runtime } }, 'spec'),
    ...unexercised(appRoot.status!, app.status, 'status'),
    ...unexercised(logRoot.spec!, runLog().spec, 'spec'),
    ...unexercised(logRoot.status!, runLog().status, 'status'),
  ];
  expect(missing).toEqual([]);
});

/** The rules of a structural schema (Kubernetes "Specifying a structural schema") that apply to ours. */
function structuralProblems(schema: StructuralSchema, path: string): string[] {
  const problems: string[] = [];
  const raw = schema as unknown as Record<string, unknown>;
  if (!schema.type) problems.push(`${path}: no type`);
  for (const forbidden of ['anyOf', 'oneOf', 'allOf', 'not', 'const', 'additionalProperties', 'x-kubernetes-preserve-unknown-fields', '$ref']) {
    if (forbidden in raw) problems.push(`${path}: ${forbidden}`);
  }
  if (schema.default !== undefined && !defaultFits(schema.default, schema)) problems.push(`${path}: default does not fit its schema`);
  if (schema.type === 'array') {
    if (!schema.items) problems.push(`${path}: array without items`);
    else problems.push(...structuralProblems(schema.items, `${path}[]`));
    for (const key of schema['x-kubernetes-list-map-keys'] ?? []) {
      const keySchema = schema.items?.properties?.[key];
      const requiredOrDefaulted = schema.items?.required?.includes(key) || keySchema?.default !== undefined;
      if (!requiredOrDefaulted) problems.push(`${path}: list-map key ${key} must be required or defaulted`);
    }
  }
  for (const [key, child] of Object.entries(schema.properties ?? {})) problems.push(...structuralProblems(child, `${path}.${key}`));
  for (const key of schema.required ?? []) {
    if (!schema.properties?.[key]) problems.push(`${path}: required ${key} is not a property`);
  }
  return problems;
}

function defaultFits(value: unknown, schema: StructuralSchema): boolean {
  switch (schema.type) {
    case 'object':
      return typeof value === 'object' && value !== null && Object.keys(value).every((key) => key in (schema.properties ?? {}));
    case 'integer':
      return Number.isInteger(value);
    case 'array':
      return Array.isArray(value);
    default:
      return typeof value === schema.type;
  }
}
