// Validates rendered objects against the Kubernetes schemas: types, enums and required fields through the
// kubernetes-models validators, and unknown fields (which those schemas let through, while `kubectl apply`
// refuses them under strict field validation) through the field lists of @kubernetes/client-node's models.
import * as clientNode from '@kubernetes/client-node';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ConfigMap, Namespace, Service, ServiceAccount } from 'kubernetes-models/v1';

interface Validatable {
  validate(): void;
}

/** The kinds the chart and install.yaml hold: a kind outside this list is an error, not unchecked. */
const KINDS: Record<string, { model: new (data: never) => Validatable; type: string }> = {
  'v1/ConfigMap': { model: ConfigMap, type: 'V1ConfigMap' },
  'v1/Namespace': { model: Namespace, type: 'V1Namespace' },
  'v1/Service': { model: Service, type: 'V1Service' },
  'v1/ServiceAccount': { model: ServiceAccount, type: 'V1ServiceAccount' },
  'apps/v1/Deployment': { model: Deployment, type: 'V1Deployment' },
  'apps/v1/StatefulSet': { model: StatefulSet, type: 'V1StatefulSet' },
  'policy/v1/PodDisruptionBudget': { model: PodDisruptionBudget, type: 'V1PodDisruptionBudget' },
  'networking.k8s.io/v1/Ingress': { model: Ingress, type: 'V1Ingress' },
  'networking.k8s.io/v1/NetworkPolicy': { model: NetworkPolicy, type: 'V1NetworkPolicy' },
  'rbac.authorization.k8s.io/v1/ClusterRole': { model: ClusterRole, type: 'V1ClusterRole' },
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': { model: ClusterRoleBinding, type: 'V1ClusterRoleBinding' },
  'rbac.authorization.k8s.io/v1/Role': { model: Role, type: 'V1Role' },
  'rbac.authorization.k8s.io/v1/RoleBinding': { model: RoleBinding, type: 'V1RoleBinding' },
  'apiextensions.k8s.io/v1/CustomResourceDefinition': { model: CustomResourceDefinition, type: 'V1CustomResourceDefinition' },
};

/** Every problem of one object: schema violations and unknown fields, each with its path. Empty: valid. */
export function kubernetesProblems(object: { apiVersion?: unknown; kind?: unknown }): string[] {
  const key = `${String(object.apiVersion)}/${String(object.kind)}`;
  const kind = KINDS[key];
  if (kind === undefined) return [`${key} is not a kind this validator knows`];
  const problems: string[] = [];
  try {
    new kind.model(object as never).validate();
  } catch (error) {
    problems.push(`schema: ${(error as Error).message}`);
  }
  problems.push(...unknownFields(object, kind.type, '').map((path) => `unknown field ${path}`));
  return problems;
}

interface AttributeType {
  baseName: string;
  type: string;
}

type ModelClass = { getAttributeTypeMap(): AttributeType[] };

/** Leaf types of client-node's models: nothing inside them to check. */
const LEAF_TYPES = new Set(['string', 'number', 'boolean', 'Date', 'IntOrString', 'any', 'object']);

/** Paths of the fields `value` has that the model `type` (a client-node type expression) does not. */
function unknownFields(value: unknown, type: string, path: string): string[] {
  if (value === null || value === undefined || LEAF_TYPES.has(type)) return [];
  const list = type.match(/^Array<(.+)>$/);
  if (list !== null) return Array.isArray(value) ? value.flatMap((item, i) => unknownFields(item, list[1]!, `${path}[${i}]`)) : [];
  const map = type.match(/^\{ \[key: string\]: (.+); \}$/);
  if (map !== null) return isObject(value) ? Object.entries(value).flatMap(([key, item]) => unknownFields(item, map[1]!, `${path}.${key}`)) : [];
  const model = (clientNode as unknown as Record<string, ModelClass | undefined>)[type];
  if (typeof model?.getAttributeTypeMap !== 'function') throw new Error(`@kubernetes/client-node has no model ${type} (at ${path || 'the root'})`);
  if (!isObject(value)) return [];
  const fields = new Map(model.getAttributeTypeMap().map((attribute) => [attribute.baseName, attribute.type]));
  return Object.entries(value).flatMap(([key, item]) => {
    const fieldType = fields.get(key);
    return fieldType === undefined ? [`${path}.${key}`] : unknownFields(item, fieldType, `${path}.${key}`);
  });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
