// Resource URLs of the Kubernetes REST API, parsed:
//   /api/v1[/watch][/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]
//   /apis/{group}/{version}[/watch][/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]
// `/api/v1/namespaces/{name}[/status]` is the namespace object itself, not a namespace scope.

import { badRequest } from './status.ts';

export interface ResourcePath {
  group: string;
  version: string;
  namespace: string | undefined;
  plural: string;
  name: string | undefined;
  subresource: string | undefined;
  /** The legacy `/watch/` path prefix was used. */
  watchPrefix: boolean;
}

const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);

/** Undefined when the path is not a resource path (discovery, unknown prefixes). */
export function parseResourcePath(pathname: string): ResourcePath | undefined {
  let segments: string[];
  try {
    segments = pathname.split('/').filter((s) => s !== '').map(decodeURIComponent);
  } catch {
    throw badRequest(`malformed percent-encoding in path ${pathname}`);
  }
  let group: string;
  let version: string;
  let rest: string[];
  if (segments[0] === 'api' && segments.length >= 3) {
    [group, version, rest] = ['', segments[1], segments.slice(2)];
  } else if (segments[0] === 'apis' && segments.length >= 4) {
    [group, version, rest] = [segments[1], segments[2], segments.slice(3)];
  } else {
    return undefined;
  }
  const watchPrefix = rest[0] === 'watch';
  if (watchPrefix) rest = rest.slice(1);

  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3 && !NAMESPACE_SUBRESOURCES.has(rest[2])) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [plural, name, subresource, ...extra] = rest;
  if (plural === undefined || extra.length > 0) return undefined;
  return { group, version, namespace, plural, name, subresource, watchPrefix };
}
