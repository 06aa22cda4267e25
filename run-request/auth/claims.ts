// Which project a token speaks for. Runlet tokens name it in `project_id`; a Kubernetes service-account token
// names its namespace, and projects are namespaces.
import type { JWTPayload } from 'jose';

const SERVICE_ACCOUNT_SUBJECT_PREFIX = 'system:serviceaccount:';

/**
 * The project of a token's claims, or null when it names none: `project_id`, else the service account's
 * namespace (`kubernetes.io.namespace`, else the `<ns>` of `sub` = `system:serviceaccount:<ns>:<name>`).
 */
export function projectOfClaims(claims: JWTPayload): string | null {
  if (claims.project_id !== undefined) return nonEmptyString(claims.project_id);
  const kubernetes = claims['kubernetes.io'];
  if (typeof kubernetes === 'object' && kubernetes !== null && 'namespace' in kubernetes) {
    return nonEmptyString(kubernetes.namespace);
  }
  return namespaceOfSubject(claims.sub);
}

function namespaceOfSubject(sub: string | undefined): string | null {
  if (sub === undefined || !sub.startsWith(SERVICE_ACCOUNT_SUBJECT_PREFIX)) return null;
  const rest = sub.slice(SERVICE_ACCOUNT_SUBJECT_PREFIX.length);
  const colon = rest.indexOf(':');
  // Both parts are Kubernetes names, so neither is empty nor holds a colon.
  if (colon <= 0 || colon === rest.length - 1 || rest.indexOf(':', colon + 1) !== -1) return null;
  return rest.slice(0, colon);
}

function nonEmptyString(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}
