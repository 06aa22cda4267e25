// Whether an API key still exists, for the sidecars, which verify service-account tokens offline (against the
// issuer's key set) and so would go on admitting a revoked key's token until it expires. A key is a
// ServiceAccount named `runlet-key-<name>` (operator/api-keys.ts); revoking deletes it. So the token of such a
// ServiceAccount is admitted only while the ServiceAccount with the token's uid exists, asked of the API server
// when the token is verified, and verified again at least every minute: a revoked key stops working within a
// minute. Other service-account tokens are not asked about: their lifetime is the caller's to choose.
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { KubeApi } from '../../kube/client.ts';
import { isNotFound } from '../../kube/errors.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { KubePath } from '../../kube/paths.ts';
import { API_KEY_ACCOUNT_PREFIX } from '../../crds/route-names.ts';

/** How long a key's token is admitted without asking again whether the key exists. */
export const API_KEY_RECHECK_MS = 60_000;

export interface ServiceAccountRef {
  namespace: string;
  name: string;
  uid: string;
}

/** True while the ServiceAccount exists with that uid; throws the ProblemError to answer when it cannot tell. */
export type ServiceAccountCheck = (account: ServiceAccountRef) => Promise<boolean>;

/** The key's ServiceAccount, from a service-account token's claims; null for any other token. */
export function apiKeyAccountOf(claims: Record<string, unknown>): ServiceAccountRef | null {
  const kubernetes = claims['kubernetes.io'] as { namespace?: unknown; serviceaccount?: { name?: unknown; uid?: unknown } } | undefined;
  const namespace = kubernetes?.namespace;
  const name = kubernetes?.serviceaccount?.name;
  const uid = kubernetes?.serviceaccount?.uid;
  if (typeof namespace !== 'string' || typeof name !== 'string' || typeof uid !== 'string') return null;
  return name.startsWith(API_KEY_ACCOUNT_PREFIX) ? { namespace, name, uid } : null;
}

/** Asks the API server (the sidecar needs `get` on serviceaccounts in its namespace). */
export function kubeServiceAccountCheck(api: KubeApi): ServiceAccountCheck {
  return async ({ namespace, name, uid }) => {
    try {
      const account = await api.get<KubeObject & { metadata: { uid?: string } }>(KubePath.of({ version: 'v1', namespace, resource: 'serviceaccounts', name }));
      return account.metadata.uid === uid;
    } catch (err) {
      if (isNotFound(err)) return false;
      // Not let through: the key may have been revoked. The caller retries; a key whose check works is unaffected.
      throw new ProblemError(Problems.authKeysUnavailable, `Whether the API key ${name} still exists could not be checked with the Kubernetes API server; retry shortly`, {
        headers: { 'retry-after': '5' },
        cause: err,
      });
    }
  };
}
