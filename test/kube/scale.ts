// The `/scale` subresource of Deployments and ReplicaSets (autoscaling/v1 Scale), as the real server serves
// it: GET answers the replicas wanted and seen with the selector as a string; PUT and merge/JSON patches
// change only `spec.replicas` of the parent object (its generation moves, as for any spec change).
import { JSON_PATCH, jsonPatch, MERGE_PATCH, mergePatch, STRATEGIC_MERGE_PATCH, strategicMergePatch } from './patch.ts';
import { apiVersionOf, type ResourceType } from './resources.ts';
import { badRequest, conflict, invalid } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

const SCALABLE = new Set(['apps/deployments', 'apps/replicasets']);

/** Scale is a built-in kind: all three non-apply patch types apply to it. */
const SCALE_PATCHES: Record<string, (target: unknown, patch: unknown) => unknown> = {
  [MERGE_PATCH]: mergePatch,
  [STRATEGIC_MERGE_PATCH]: strategicMergePatch,
  [JSON_PATCH]: jsonPatch,
};

export function servesScale(type: ResourceType): boolean {
  return SCALABLE.has(`${type.group}/${type.plural}`);
}

interface Scalable extends KubeObject {
  spec?: { replicas?: number; selector?: { matchLabels?: Record<string, string> } };
  status?: { replicas?: number };
}

/** The Scale object standing for `parent`. */
export function scaleOf(parent: KubeObject): KubeObject {
  const { spec, status } = parent as Scalable;
  const { name, namespace, uid, resourceVersion, creationTimestamp } = parent.metadata;
  const selector = Object.entries(spec?.selector?.matchLabels ?? {})
    .map(([key, value]) => `${key}=${value}`)
    .join(',');
  return {
    apiVersion: 'autoscaling/v1',
    kind: 'Scale',
    metadata: { name, namespace, uid, resourceVersion, creationTimestamp },
    spec: { replicas: spec?.replicas ?? 1 },
    status: { replicas: status?.replicas ?? 0, selector },
  };
}

/**
 * The parent with the replicas a Scale write asks for. `write` is a PUT body or a patch (`contentType`) of
 * the Scale object; a stale `metadata.resourceVersion` in it is a conflict, as on the real server.
 */
export function scaledParent(type: ResourceType, parent: KubeObject, write: { contentType?: string; body: unknown }): KubeObject {
  const current = scaleOf(parent);
  let next: unknown = write.body;
  if (write.contentType !== undefined) {
    const patchFn = SCALE_PATCHES[write.contentType];
    if (patchFn === undefined) throw badRequest(`unsupported patch content type ${write.contentType} for the scale subresource`);
    next = patchFn(current, write.body);
  }
  if (!isPlainObject(next)) throw badRequest('the Scale must be a JSON object');
  const name = parent.metadata.name!;
  const wantedVersion = isPlainObject(next.metadata) ? next.metadata.resourceVersion : undefined;
  if (typeof wantedVersion === 'string' && wantedVersion !== '' && wantedVersion !== parent.metadata.resourceVersion) {
    throw conflict(type, name, 'the object has been modified; please apply your changes to the latest version and try again');
  }
  const replicas = isPlainObject(next.spec) ? next.spec.replicas : undefined;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) {
    throw invalid(type, name, [{ reason: 'FieldValueInvalid', message: `Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`, field: 'spec.replicas' }]);
  }
  const scaled = structuredClone(parent) as Scalable;
  scaled.spec = { ...scaled.spec, replicas };
  return { ...scaled, apiVersion: apiVersionOf(type), kind: type.kind };
}
