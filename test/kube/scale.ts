// The `scale` subresource of Deployments (autoscaling/v1 Scale), as the real API server serves it: reading
// shows spec.replicas, the replicas the status counts and the pod selector; writing changes only the
// Deployment's spec.replicas (with the Scale's resourceVersion as the precondition, when it carries one).
import type { ObjectLifecycle } from './lifecycle.ts';
import { badRequest, conflict } from './status.ts';
import type { ResourceType } from './resources.ts';
import { isPlainObject, type KubeObject } from './types.ts';

const STALE_SCALE = 'the object has been modified; please apply your changes to the latest version and try again';

export function servesScale(type: ResourceType): boolean {
  return type.group === 'apps' && type.plural === 'deployments';
}

function scaleOf(deployment: KubeObject): KubeObject {
  const spec = (deployment.spec ?? {}) as { replicas?: number; selector?: { matchLabels?: Record<string, string> } };
  const status = (deployment.status ?? {}) as { replicas?: number };
  const selector = Object.entries(spec.selector?.matchLabels ?? {}).map(([key, value]) => `${key}=${value}`).join(',');
  const { name, namespace, uid, resourceVersion, creationTimestamp } = deployment.metadata;
  return {
    apiVersion: 'autoscaling/v1',
    kind: 'Scale',
    metadata: { name, namespace, uid, resourceVersion, creationTimestamp },
    spec: { replicas: spec.replicas ?? 1 },
    status: { replicas: status.replicas ?? 0, selector },
  };
}

function replicasOf(body: unknown): number {
  const replicas = isPlainObject(body) && isPlainObject(body.spec) ? body.spec.replicas : undefined;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) throw badRequest('Scale spec.replicas must be a non-negative integer');
  return replicas;
}

/** GET, PUT or merge PATCH of `deployments/{name}/scale`; the answer is the Scale after the write. */
export function handleScale(lifecycle: ObjectLifecycle, type: ResourceType, namespace: string | undefined, name: string, method: string, body: unknown): KubeObject | undefined {
  const deployment = lifecycle.get(type, namespace, name);
  if (method === 'GET') return scaleOf(deployment);
  if (method !== 'PUT' && method !== 'PATCH') return undefined;
  const precondition = method === 'PUT' && isPlainObject(body) && isPlainObject(body.metadata) ? body.metadata.resourceVersion : undefined;
  if (typeof precondition === 'string' && precondition !== deployment.metadata.resourceVersion) throw conflict(type, name, STALE_SCALE);
  const replicas = replicasOf(body);
  const { object } = lifecycle.patch(type, namespace, name, { contentType: 'application/merge-patch+json', body: { spec: { replicas } }, fieldManager: undefined, force: false }, undefined);
  return scaleOf(object);
}
