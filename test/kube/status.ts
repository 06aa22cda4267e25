// Kubernetes `Status` failures: every error the fake server answers is a KubeError rendered as the
// real API server renders it, so clients branch on `code`/`reason` exactly as they would in a cluster.

import { resourceKey, type ResourceType } from './resources.ts';

export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

export class KubeError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;

  constructor(code: number, reason: string, message: string, details?: StatusDetails) {
    super(message);
    this.name = 'KubeError';
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  toStatus(): StatusBody {
    return failureStatus(this.code, this.reason, this.message, this.details);
  }
}

export function failureStatus(code: number, reason: string, message: string, details?: StatusDetails): StatusBody {
  const body: StatusBody = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
  if (details !== undefined) body.details = details;
  return body;
}

export function successStatus(details: StatusDetails): StatusBody {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details, code: 200 };
}

function objectDetails(type: ResourceType, name: string): StatusDetails {
  return { name, group: type.group, kind: type.plural };
}

export function notFound(type: ResourceType, name: string): KubeError {
  return new KubeError(404, 'NotFound', `${resourceKey(type)} "${name}" not found`, objectDetails(type, name));
}

export function alreadyExists(type: ResourceType, name: string): KubeError {
  return new KubeError(
    409,
    'AlreadyExists',
    `${resourceKey(type)} "${name}" already exists`,
    objectDetails(type, name),
  );
}

export function conflict(type: ResourceType, name: string, why: string): KubeError {
  return new KubeError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${resourceKey(type)} "${name}": ${why}`,
    objectDetails(type, name),
  );
}

export const STALE_OBJECT =
  'the object has been modified; please apply your changes to the latest version and try again';

export function invalid(type: ResourceType, name: string, causes: StatusCause[]): KubeError {
  const summary = causes.map((c) => `${c.field ?? ''}: ${c.message}`).join(', ');
  return new KubeError(422, 'Invalid', `${type.kind} "${name}" is invalid: ${summary}`, {
    ...objectDetails(type, name),
    kind: type.kind,
    causes,
  });
}

export function badRequest(message: string): KubeError {
  return new KubeError(400, 'BadRequest', message);
}

/** What the real server answers a patch type the resource does not take (strategic merge on custom resources). */
export function unsupportedPatchType(accepted: readonly string[]): KubeError {
  return new KubeError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
  );
}

export function methodNotAllowed(method: string, path: string): KubeError {
  return new KubeError(405, 'MethodNotAllowed', `the server does not allow method ${method} on ${path}`);
}

export function resourceNotServed(path: string): KubeError {
  return new KubeError(404, 'NotFound', `the server could not find the requested resource (${path})`);
}

export function forbidden(message: string): KubeError {
  return new KubeError(403, 'Forbidden', message);
}

export function expired(message: string): KubeError {
  return new KubeError(410, 'Expired', message);
}
