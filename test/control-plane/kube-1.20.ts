// What this tier's kube-apiserver (1.20) does not serve, taken out of a manifest before `kubectl apply`
// (validation on) so the rest is applied as written: CEL rules (`x-kubernetes-validations`, served from 1.25)
// in CRD schemas, the policy/v1 PodDisruptionBudget (1.21), applied as policy/v1beta1, which has the same
// fields, and native sidecars (1.29) in the operator's configuration. Those newer features stay covered by
// the in-memory API server and the schema tests.
//   npm run -s kube-1.20 -- install.yaml | kubectl apply -f -
import { readFile } from 'node:fs/promises';
import { parse, parseAllDocuments, stringify } from 'yaml';

function withoutCelRules(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutCelRules);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => key !== 'x-kubernetes-validations')
      .map(([key, member]) => [key, withoutCelRules(member)]),
  );
}

/** install.yaml's operator configuration, with the classic sidecar (a second container) for App pods. */
function withClassicSidecars(configMap: { data?: Record<string, string> }): object {
  const file = configMap.data?.['operator.yaml'];
  if (file === undefined) return configMap;
  return { ...configMap, data: { ...configMap.data, 'operator.yaml': stringify({ ...parse(file), nativeSidecars: false }) } };
}

/** The manifest's documents, each made servable by kube-apiserver 1.20. */
export function forKube120(manifest: string): string {
  const objects = parseAllDocuments(manifest)
    .map((document) => document.toJS() as { apiVersion?: string; kind?: string } | null)
    .filter((object) => object !== null);
  return objects
    .map((object) => {
      if (object.kind === 'CustomResourceDefinition') return withoutCelRules(object);
      if (object.kind === 'PodDisruptionBudget' && object.apiVersion === 'policy/v1') return { ...object, apiVersion: 'policy/v1beta1' };
      if (object.kind === 'ConfigMap') return withClassicSidecars(object as { data?: Record<string, string> });
      return object;
    })
    .map((object) => stringify(object))
    .join('---\n');
}

if (import.meta.main) {
  const [file] = process.argv.slice(2);
  if (file === undefined) throw new Error('usage: npm run -s kube-1.20 -- MANIFEST (prints it as kube-apiserver 1.20 serves it)');
  process.stdout.write(forKube120(await readFile(file, 'utf8')));
}
