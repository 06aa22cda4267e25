// What this tier's kube-apiserver (1.20) does not serve, taken out of a manifest before `kubectl apply`
// (validation on) so the rest is applied as written: CEL rules (`x-kubernetes-validations`, served from 1.25)
// in CRD schemas, and the policy/v1 PodDisruptionBudget (1.21), applied as policy/v1beta1, which has the same
// fields. Those newer features stay covered by the in-memory API server and the schema tests.
import { parseAllDocuments, stringify } from 'yaml';

function withoutCelRules(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutCelRules);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => key !== 'x-kubernetes-validations')
      .map(([key, member]) => [key, withoutCelRules(member)]),
  );
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
      return object;
    })
    .map((object) => stringify(object))
    .join('---\n');
}
