// Object writes with the API server's semantics, on top of the plain store: server-owned metadata (uid,
// creationTimestamp, generation), resourceVersion preconditions, the status subresource, no-op writes
// that change nothing, finalizers, owner-reference garbage collection and namespace termination.
// Simplifications: deletion is immediate unless finalizers are set (no grace periods); garbage collection
// and namespace cleanup run synchronously inside the delete request; Foreground propagation behaves as
// Background, and Orphan strips owner references at once.

import { randomInt, randomUUID } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { appliedIdentityProblem, serverSideApply } from './apply.ts';
import { appliedListKeyError } from './apply-list-keys.ts';
import { kindBehaviors, type KindBehavior } from './kinds.ts';
import { recordUpdate, type UpdateWriter } from './managed-fields.ts';
import {
  APPLY_PATCH,
  JSON_PATCH,
  MERGE_PATCH,
  STRATEGIC_MERGE_PATCH,
  jsonPatch,
  mergePatch,
  strategicMergePatch,
} from './patch.ts';
import { enforcedLevel, podSecurityViolations } from './pod-security.ts';
import { apiVersionOf, resourceKey, type ResourceRegistry, type ResourceType } from './resources.ts';
import { conformToSchema } from './schema-conformance.ts';
import {
  STALE_OBJECT,
  alreadyExists,
  badRequest,
  conflict,
  forbidden,
  invalid,
  notFound,
  unsupportedPatchType,
} from './status.ts';
import type { ObjectStore } from './store.ts';
import { deepEqual, isPlainObject, timestamp, type KubeObject, type ManagedFieldsEntry } from './types.ts';
import { validateObject, validateUpdate } from './validation.ts';

export interface LifecycleOptions {
  /** Refuse to create objects in namespaces that do not exist, as the real server does. */
  requireNamespaces: boolean;
}

/** Who writes, and whether for real. */
export interface WriteOptions {
  /** The manager of the write's managedFields entry: `fieldManager`, else the User-Agent's product. */
  manager: string;
  /** `?dryRun=All`: the write is checked, defaulted and answered as if stored, but not stored (nor watched). */
  dryRun: boolean;
}

/** The server's own writes (the namespaces it starts with). */
const SERVER_WRITE: WriteOptions = { manager: 'kube-apiserver', dryRun: false };

export interface PatchRequest {
  contentType: string;
  body: unknown;
  /** The `fieldManager` parameter, which apply requires. */
  fieldManager: string | undefined;
  force: boolean;
}

export interface DeleteOptions {
  propagationPolicy: string | undefined;
  preconditions: { uid?: string; resourceVersion?: string } | undefined;
}

export interface DeleteOutcome {
  object: KubeObject;
  /** False when the object still exists, marked for deletion and waiting for its finalizers. */
  removed: boolean;
}

type Subresource = 'status' | undefined;

const NAMESPACES_KEY = 'namespaces';
/** Metadata a main-resource write cannot change (name is checked separately). */
const SERVER_OWNED_METADATA = [
  'namespace',
  'uid',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'generation',
  'managedFields',
];
const GENERATE_NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

function generatedName(prefix: string): string {
  let suffix = '';
  for (let i = 0; i < 5; i += 1) suffix += GENERATE_NAME_ALPHABET[randomInt(GENERATE_NAME_ALPHABET.length)];
  return prefix + suffix;
}

/** The part of an object whose changes bump generation: all but metadata, and status when it is a subresource. */
function generationRelevant(type: ResourceType, object: KubeObject): Record<string, unknown> {
  const { metadata: _metadata, status, ...rest } = object;
  return type.hasStatus ? rest : { ...rest, status };
}

const NON_APPLY_PATCHES: Record<string, (target: unknown, patch: unknown) => unknown> = {
  [MERGE_PATCH]: mergePatch,
  [STRATEGIC_MERGE_PATCH]: strategicMergePatch,
  [JSON_PATCH]: jsonPatch,
};
/** In the real server's order of its 415 message. */
const CUSTOM_RESOURCE_PATCHES = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH];

export class ObjectLifecycle {
  private readonly store: ObjectStore;
  private readonly registry: ResourceRegistry;
  private readonly options: LifecycleOptions;
  private readonly behaviors: Map<string, KindBehavior>;

  constructor(store: ObjectStore, registry: ResourceRegistry, options: LifecycleOptions) {
    this.store = store;
    this.registry = registry;
    this.options = options;
    this.behaviors = kindBehaviors(registry, (key) => this.removeAllOf(key));
  }

  get(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const object = this.store.get(resourceKey(type), namespace, name);
    if (object === undefined) throw notFound(type, name);
    return object;
  }

  list(type: ResourceType, namespace: string | undefined): KubeObject[] {
    return this.store.list(resourceKey(type), namespace);
  }

  create(
    type: ResourceType,
    namespace: string | undefined,
    body: KubeObject,
    write: WriteOptions = SERVER_WRITE,
    appliedFields?: ManagedFieldsEntry[],
  ): KubeObject {
    const object = structuredClone(body);
    this.checkKind(type, object);
    const meta = object.metadata;
    if (!meta.name && meta.generateName) meta.name = generatedName(meta.generateName);
    if (!meta.name) {
      throw invalid(type, '', [
        { reason: 'FieldValueRequired', field: 'metadata.name', message: 'name or generateName is required' },
      ]);
    }
    this.placeInNamespace(type, object, namespace);
    this.admitToNamespace(type, meta.name, namespace);
    this.admitPodSecurity(type, object, namespace);
    if (this.store.get(resourceKey(type), namespace, meta.name) !== undefined) throw alreadyExists(type, meta.name);

    meta.uid = randomUUID();
    meta.creationTimestamp = timestamp();
    meta.generation = 1;
    for (const serverOwned of ['resourceVersion', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'managedFields']) {
      delete meta[serverOwned];
    }
    // Status is written through the subresource only; creation starts without one.
    if (type.hasStatus) delete object.status;
    this.prepareAndValidate(type, object, undefined);
    meta.managedFields = appliedFields ?? recordUpdate(this.writer(type, write, undefined), undefined, object, type.hasStatus);
    if (meta.managedFields.length === 0) delete meta.managedFields;
    if (write.dryRun) return object;

    const stored = this.store.create(resourceKey(type), object);
    this.behaviorOf(type)?.stored?.(stored);
    return stored;
  }

  replace(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    body: KubeObject,
    subresource: Subresource,
    write: WriteOptions,
  ): KubeObject {
    if (body.metadata.name !== name) {
      const bodyName = String(body.metadata.name);
      throw badRequest(`the name of the object (${bodyName}) does not match the name on the URL (${name})`);
    }
    const candidate = structuredClone(body);
    this.placeInNamespace(type, candidate, namespace);
    return this.commitUpdate(type, this.get(type, namespace, name), candidate, subresource, write);
  }

  patch(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    request: PatchRequest,
    subresource: Subresource,
    write: WriteOptions,
  ): { object: KubeObject; created: boolean } {
    if (request.contentType === APPLY_PATCH) return this.apply(type, namespace, name, request, subresource, write);
    // Custom resources have no Go types to carry the strategic merge keys: the real server takes the others only.
    const accepted = type.custom ? CUSTOM_RESOURCE_PATCHES : [...Object.keys(NON_APPLY_PATCHES), APPLY_PATCH];
    const patchFn = accepted.includes(request.contentType) ? NON_APPLY_PATCHES[request.contentType] : undefined;
    if (patchFn === undefined) throw unsupportedPatchType(accepted);
    if (request.force) throw badRequest('force may only be set for apply patches');
    const existing = this.get(type, namespace, name);
    const patched = patchFn(existing, request.body);
    if (!isPlainObject(patched) || !isPlainObject(patched.metadata)) {
      throw badRequest(`the ${request.contentType} patch did not leave an object with metadata`);
    }
    return { object: this.commitUpdate(type, existing, patched as KubeObject, subresource, write), created: false };
  }

  delete(type: ResourceType, namespace: string | undefined, name: string, options: DeleteOptions): DeleteOutcome {
    const existing = this.get(type, namespace, name);
    const { uid, resourceVersion } = options.preconditions ?? {};
    if (uid !== undefined && uid !== existing.metadata.uid) {
      const why = `Precondition failed: UID in precondition: ${uid}, UID in object meta: ${existing.metadata.uid}`;
      throw conflict(type, name, why);
    }
    if (resourceVersion !== undefined && resourceVersion !== existing.metadata.resourceVersion) {
      throw conflict(type, name, STALE_OBJECT);
    }
    if (options.propagationPolicy === 'Orphan') this.orphanDependents(existing.metadata.uid!);
    if (resourceKey(type) === NAMESPACES_KEY) return this.terminateNamespace(existing);
    return this.deleteObject(type, existing);
  }

  private apply(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    request: PatchRequest,
    subresource: Subresource,
    write: WriteOptions,
  ): { object: KubeObject; created: boolean } {
    if (!request.fieldManager) throw badRequest('fieldManager is required for apply patches');
    const applied = request.body;
    if (!isPlainObject(applied) || !isPlainObject(applied.metadata)) {
      throw badRequest('an applied configuration must be an object with metadata');
    }
    const configuration = applied as KubeObject;
    const problem = appliedIdentityProblem(configuration, type, name);
    if (problem !== undefined) throw badRequest(problem);
    const listKeyError = appliedListKeyError(type, configuration);
    if (listKeyError !== undefined) throw listKeyError;
    this.placeInNamespace(type, configuration, namespace);

    const { status, ...withoutStatus } = configuration;
    const scoped: KubeObject =
      subresource === 'status'
        ? { apiVersion: configuration.apiVersion, kind: type.kind, metadata: { name, namespace }, status }
        : type.hasStatus
          ? withoutStatus
          : configuration;
    const live = this.store.get(resourceKey(type), namespace, name);
    if (live === undefined && subresource !== undefined) throw notFound(type, name);
    const next = serverSideApply({
      type,
      name,
      live,
      applied: scoped,
      manager: request.fieldManager,
      force: request.force,
      subresource,
      now: timestamp(),
    });
    if (live === undefined) {
      return { object: this.create(type, namespace, next, write, next.metadata.managedFields), created: true };
    }
    const object = this.commitUpdate(type, live, next, subresource, write, next.metadata.managedFields);
    return { object, created: false };
  }

  private commitUpdate(
    type: ResourceType,
    existing: KubeObject,
    candidate: KubeObject,
    subresource: Subresource,
    write: WriteOptions,
    appliedFields?: ManagedFieldsEntry[],
  ): KubeObject {
    const name = existing.metadata.name!;
    if (candidate.metadata.name !== undefined && candidate.metadata.name !== name) {
      throw badRequest(`metadata.name is immutable: cannot change ${name} to ${String(candidate.metadata.name)}`);
    }
    const requiredVersion = candidate.metadata.resourceVersion;
    if (requiredVersion !== undefined && requiredVersion !== existing.metadata.resourceVersion) {
      throw conflict(type, name, STALE_OBJECT);
    }

    const next =
      subresource === 'status'
        ? this.withStatusOf(existing, candidate)
        : this.withServerFields(type, existing, candidate);
    this.prepareAndValidate(type, next, existing);
    next.metadata.managedFields = appliedFields ?? recordUpdate(this.writer(type, write, subresource), existing, next, type.hasStatus);
    if (next.metadata.managedFields.length === 0) delete next.metadata.managedFields;
    if (!deepEqual(generationRelevant(type, next), generationRelevant(type, existing))) {
      next.metadata.generation = (existing.metadata.generation ?? 0) + 1;
    }
    next.metadata.resourceVersion = existing.metadata.resourceVersion;
    // A write that changes nothing is not a write: no new resourceVersion, no watch event.
    if (deepEqual(next, existing)) return existing;
    if (write.dryRun) return next;

    const stored = this.store.update(resourceKey(type), next);
    this.behaviorOf(type)?.stored?.(stored);
    const { deletionTimestamp, finalizers } = stored.metadata;
    const finalized = deletionTimestamp !== undefined && (finalizers ?? []).length === 0;
    return finalized ? this.removeObject(type, stored) : stored;
  }

  /** A status write: the existing object with only its status replaced. */
  private withStatusOf(existing: KubeObject, candidate: KubeObject): KubeObject {
    const next = structuredClone(existing);
    if (candidate.status === undefined) delete next.status;
    else next.status = structuredClone(candidate.status);
    return next;
  }

  /** A main-resource write: the candidate, with the metadata the server owns (and status) kept. */
  private withServerFields(type: ResourceType, existing: KubeObject, candidate: KubeObject): KubeObject {
    const next = structuredClone(candidate);
    next.apiVersion = apiVersionOf(type);
    next.kind = type.kind;
    for (const field of SERVER_OWNED_METADATA) {
      if (existing.metadata[field] === undefined) delete next.metadata[field];
      else next.metadata[field] = structuredClone(existing.metadata[field]);
    }
    next.metadata.name = existing.metadata.name;
    if (type.hasStatus) {
      if (existing.status === undefined) delete next.status;
      else next.status = structuredClone(existing.status);
    }
    return next;
  }

  private deleteObject(type: ResourceType, existing: KubeObject): DeleteOutcome {
    if ((existing.metadata.finalizers ?? []).length === 0) {
      return { object: this.removeObject(type, existing), removed: true };
    }
    if (existing.metadata.deletionTimestamp !== undefined) return { object: existing, removed: false };
    const marked = structuredClone(existing);
    marked.metadata.deletionTimestamp = timestamp();
    marked.metadata.deletionGracePeriodSeconds = 0;
    return { object: this.store.update(resourceKey(type), marked), removed: false };
  }

  private removeObject(type: ResourceType, object: KubeObject): KubeObject {
    const tombstone = this.store.remove(resourceKey(type), object);
    this.behaviorOf(type)?.removed?.(tombstone);
    this.collectGarbage(tombstone.metadata.uid!);
    const { namespace } = tombstone.metadata;
    if (namespace !== undefined) this.finishNamespaceIfEmpty(namespace);
    return tombstone;
  }

  /** Background garbage collection: dependents left without any live owner are deleted, recursively. */
  private collectGarbage(ownerUid: string): void {
    for (const { key, object } of [...this.store.entries()]) {
      if (!(object.metadata.ownerReferences ?? []).some((ref) => ref.uid === ownerUid)) continue;
      // Earlier deletions in this loop may have removed or changed it.
      const current = this.store.get(key, object.metadata.namespace, object.metadata.name!);
      if (current === undefined || current.metadata.uid !== object.metadata.uid) continue;
      const references = current.metadata.ownerReferences ?? [];
      if (!references.some((ref) => ref.uid === ownerUid)) continue;
      if (references.some((ref) => this.store.hasUid(ref.uid))) {
        // Other owners are alive: the dependent stays, minus its dangling reference.
        this.dropOwnerReference(key, current, ownerUid);
      } else {
        this.deleteObject(this.typeForKey(key), current);
      }
    }
  }

  private orphanDependents(ownerUid: string): void {
    for (const { key, object } of [...this.store.entries()]) {
      if ((object.metadata.ownerReferences ?? []).some((ref) => ref.uid === ownerUid)) {
        this.dropOwnerReference(key, object, ownerUid);
      }
    }
  }

  private dropOwnerReference(key: string, object: KubeObject, ownerUid: string): void {
    const next = structuredClone(object);
    next.metadata.ownerReferences = (object.metadata.ownerReferences ?? []).filter((ref) => ref.uid !== ownerUid);
    if (next.metadata.ownerReferences.length === 0) delete next.metadata.ownerReferences;
    this.store.update(key, next);
  }

  /** Namespace deletion: mark it Terminating, delete its content, and remove it once empty. */
  private terminateNamespace(namespace: KubeObject): DeleteOutcome {
    const name = namespace.metadata.name!;
    let current = namespace;
    if (current.metadata.deletionTimestamp === undefined) {
      const terminating = structuredClone(current);
      terminating.metadata.deletionTimestamp = timestamp();
      terminating.metadata.deletionGracePeriodSeconds = 0;
      terminating.status = { ...(isPlainObject(terminating.status) ? terminating.status : {}), phase: 'Terminating' };
      current = this.store.update(NAMESPACES_KEY, terminating);
    }
    for (const { key, object } of [...this.store.entries()]) {
      if (object.metadata.namespace !== name) continue;
      const live = this.store.get(key, name, object.metadata.name!);
      if (live !== undefined) this.deleteObject(this.typeForKey(key), live);
    }
    this.finishNamespaceIfEmpty(name);
    return { object: current, removed: this.store.get(NAMESPACES_KEY, undefined, name) === undefined };
  }

  private finishNamespaceIfEmpty(name: string): void {
    const namespace = this.store.get(NAMESPACES_KEY, undefined, name);
    if (namespace?.metadata.deletionTimestamp === undefined || (namespace.metadata.finalizers ?? []).length > 0) return;
    for (const { object } of this.store.entries()) {
      if (object.metadata.namespace === name) return;
    }
    this.removeObject(this.typeForKey(NAMESPACES_KEY), namespace);
  }

  /** Every object of a resource goes, finalizers or not (used when its CRD is deleted). */
  private removeAllOf(key: string): void {
    const type = this.typeForKey(key);
    for (const object of this.store.list(key)) {
      if (this.store.get(key, object.metadata.namespace, object.metadata.name!) !== undefined) {
        this.removeObject(type, object);
      }
    }
  }

  private checkKind(type: ResourceType, object: KubeObject): void {
    const apiVersion = apiVersionOf(type);
    const kindMismatch = object.kind !== undefined && object.kind !== type.kind;
    if (kindMismatch || (object.apiVersion !== undefined && object.apiVersion !== apiVersion)) {
      throw badRequest(
        `the body is ${String(object.apiVersion)} ${String(object.kind)} but the URL is for ${apiVersion} ${type.kind}`,
      );
    }
    object.apiVersion = apiVersion;
    object.kind = type.kind;
  }

  private placeInNamespace(type: ResourceType, object: KubeObject, namespace: string | undefined): void {
    if (!type.namespaced) {
      delete object.metadata.namespace;
      return;
    }
    if (object.metadata.namespace !== undefined && object.metadata.namespace !== namespace) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    object.metadata.namespace = namespace;
  }

  private admitToNamespace(type: ResourceType, name: string, namespace: string | undefined): void {
    if (!type.namespaced || !this.options.requireNamespaces || namespace === undefined) return;
    const owner = this.store.get(NAMESPACES_KEY, undefined, namespace);
    if (owner === undefined) throw notFound(this.typeForKey(NAMESPACES_KEY), namespace);
    if (owner.metadata.deletionTimestamp !== undefined) {
      throw forbidden(
        `${resourceKey(type)} "${name}" is forbidden: ` +
          `unable to create new content in namespace ${namespace} because it is being terminated`,
      );
    }
  }

  /**
   * The PodSecurity admission, at the level the namespace's `pod-security.kubernetes.io/enforce` label names,
   * on pod creation (as the real one; pod updates and workload objects get at most warnings there).
   */
  private admitPodSecurity(type: ResourceType, pod: KubeObject, namespace: string | undefined): void {
    if (type.group !== '' || type.plural !== 'pods' || namespace === undefined) return;
    const labels = this.store.get(NAMESPACES_KEY, undefined, namespace)?.metadata.labels;
    const level = enforcedLevel(labels);
    const violations = podSecurityViolations(pod as V1Pod, level);
    if (violations.length === 0) return;
    throw forbidden(`pods "${pod.metadata.name}" is forbidden: violates PodSecurity "${level}:latest": ${violations.join(', ')}`);
  }

  private writer(type: ResourceType, write: WriteOptions, subresource: Subresource): UpdateWriter {
    return { manager: write.manager, apiVersion: apiVersionOf(type), subresource, now: timestamp() };
  }

  private prepareAndValidate(type: ResourceType, next: KubeObject, previous: KubeObject | undefined): void {
    if (type.schema !== undefined) conformToSchema(next, type.schema);
    const causes = [
      ...validateObject(type, next),
      ...(previous === undefined ? [] : validateUpdate(previous, next)),
      ...(this.behaviorOf(type)?.prepare?.(next, previous) ?? []),
    ];
    if (causes.length > 0) throw invalid(type, next.metadata.name ?? '', causes);
  }

  private behaviorOf(type: ResourceType): KindBehavior | undefined {
    return this.behaviors.get(resourceKey(type));
  }

  private typeForKey(key: string): ResourceType {
    const type = this.registry.forKey(key);
    if (type === undefined) throw new Error(`no served resource type for stored key ${key}`);
    return type;
  }
}
