// API keys in a cluster: a key is a ServiceAccount in the project's namespace, labelled as a Runlet key, bound
// (RoleBinding) to the ClusterRole `runlet-api-key`, the caller role; its token comes from the TokenRequest API
// with the expiry asked (which the API server may shorten: --service-account-max-token-expiration; the management
// API refuses one past its own maximum first). The token is for Runlet only: its audience is the run interface's
// (`runlet`), never the API server's, so a key handed to a CI system calls apps and reads runs but is no
// credential of the Kubernetes API (kubectl) — the management API reviews it for that audience
// (management/kube-auth.ts). Both hold a key to the namespace it was made in.
// Revoking deletes the ServiceAccount: the API server then refuses its token (TokenReview: the management API at
// its next review, within its 30 s cache), and the sidecars, which verify tokens offline, ask whether it still
// exists before they cache it for at most a minute (run-request/auth/service-account-check.ts).
//
// What it needs of the operator's RBAC: create/get/patch/delete and list on serviceaccounts, create on
// serviceaccounts/token and on rolebindings (bound to the ClusterRole runlet-api-key, which the operator may
// therefore bind), in the namespaces whose keys it makes.
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { KubeApi } from '../kube/client.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import type { ApiKey, ApiKeyStore, CreatedApiKey } from '../management/api-keys.ts';
import { API_KEY_ACCOUNT_PREFIX } from '../crds/route-names.ts';

/** The ClusterRole a key is bound to (charts/runlet/templates/api-key-clusterrole.yaml); fixed, as `runlet-sidecar`. */
export const API_KEY_ROLE = 'runlet-api-key';
export const API_KEY_LABEL = 'runlet.dev/api-key';
const NAME_ANNOTATION = 'runlet.dev/api-key-name';
const EXPIRY_ANNOTATION = 'runlet.dev/expires-at';
/** Key `ci` is ServiceAccount `runlet-key-ci`: a key never takes the name of a ServiceAccount made otherwise. */
const PREFIX = API_KEY_ACCOUNT_PREFIX;
const EXPIRY_TOLERANCE_MS = 5_000;

interface ServiceAccount extends KubeObject {
  metadata: KubeObject['metadata'] & { uid?: string; creationTimestamp?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
}

interface TokenRequest extends KubeObject {
  spec: { audiences?: string[]; expirationSeconds: number };
  status?: { token: string; expirationTimestamp: string };
}

export interface KubeApiKeysOptions {
  api: KubeApi;
  /** The audiences the sidecars accept (`--auth-audience`, default runlet): a key's token has these only. */
  runAudiences: readonly string[];
}

export class KubeApiKeys implements ApiKeyStore {
  readonly #api: KubeApi;
  readonly #runAudiences: readonly string[];

  constructor(options: KubeApiKeysOptions) {
    this.#api = options.api;
    this.#runAudiences = options.runAudiences;
  }

  async list(projectId: string): Promise<ApiKey[]> {
    // Expired keys too: their ServiceAccounts stay until revoked, and the list is where one revokes them.
    const { items } = await this.#api.list<ServiceAccount>(serviceAccounts(projectId), { labelSelector: `${API_KEY_LABEL}=true` });
    return items.map(keyOf);
  }

  async create(projectId: string, name: string, expiresAt: Date): Promise<CreatedApiKey> {
    const serviceAccountName = PREFIX + name;
    let account: ServiceAccount;
    try {
      account = await this.#api.create<ServiceAccount>(serviceAccounts(projectId), {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: {
          name: serviceAccountName,
          namespace: projectId,
          labels: { [API_KEY_LABEL]: 'true', 'app.kubernetes.io/managed-by': 'runlet' },
          annotations: { [NAME_ANNOTATION]: name, [EXPIRY_ANNOTATION]: expiresAt.toISOString() },
        },
      });
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 409) {
        throw new ProblemError(Problems.keyExists, `project ${projectId} has an API key named ${name} already (ServiceAccount ${serviceAccountName}); revoke it first, or choose another name`);
      }
      throw err;
    }
    try {
      await this.#bind(projectId, account);
      const granted = await this.#token(projectId, serviceAccountName, expiresAt);
      const expiry = granted.status!.expirationTimestamp;
      // The API server may have shortened the expiry: the key shows the one its token has (beyond the second or
      // two between asking and issuing).
      if (Math.abs(Date.parse(expiry) - expiresAt.getTime()) > EXPIRY_TOLERANCE_MS) {
        account = await this.#api.mergePatch<ServiceAccount>(serviceAccounts(projectId).named(serviceAccountName), { metadata: { annotations: { [EXPIRY_ANNOTATION]: expiry } } });
      }
      return { item: keyOf(account), token: granted.status!.token };
    } catch (err) {
      // No key half made: without its binding or token it would only be listed, never usable.
      await this.#api.delete(serviceAccounts(projectId).named(serviceAccountName)).catch(() => undefined);
      throw err;
    }
  }

  async revoke(projectId: string, name: string): Promise<void> {
    const path = serviceAccounts(projectId).named(PREFIX + name);
    const account = await this.#api.find<ServiceAccount>(path);
    if (account === undefined || account.metadata.labels?.[API_KEY_LABEL] !== 'true') {
      throw new ProblemError(Problems.keyNotFound, `project ${projectId} has no API key named ${name}`);
    }
    // Its RoleBinding, owned by it, goes with it (garbage collection).
    await this.#api.delete(path, { uid: account.metadata.uid });
  }

  #bind(projectId: string, account: ServiceAccount): Promise<KubeObject> {
    const name = account.metadata.name!;
    return this.#api.create(KubePath.of({ group: 'rbac.authorization.k8s.io', version: 'v1', namespace: projectId, resource: 'rolebindings' }), {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: {
        name,
        namespace: projectId,
        labels: { [API_KEY_LABEL]: 'true', 'app.kubernetes.io/managed-by': 'runlet' },
        ownerReferences: [{ apiVersion: 'v1', kind: 'ServiceAccount', name, uid: account.metadata.uid!, blockOwnerDeletion: false }],
      },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: API_KEY_ROLE },
      subjects: [{ kind: 'ServiceAccount', name, namespace: projectId }],
    } as KubeObject);
  }

  #token(projectId: string, serviceAccountName: string, expiresAt: Date): Promise<TokenRequest> {
    // Never empty: a TokenRequest without audiences is for the API server's.
    const audiences = [...new Set(this.#runAudiences)];
    if (audiences.length === 0) throw new Error('an API key needs the audience of the run interface; none is configured');
    const expirationSeconds = Math.ceil((expiresAt.getTime() - Date.now()) / 1000);
    return this.#api.create<TokenRequest>(serviceAccounts(projectId).named(serviceAccountName).subresource('token'), {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { audiences, expirationSeconds },
    });
  }
}

function serviceAccounts(namespace: string): KubePath {
  return KubePath.of({ version: 'v1', namespace, resource: 'serviceaccounts' });
}

function keyOf(account: ServiceAccount): ApiKey {
  const { annotations = {}, name = '', creationTimestamp } = account.metadata;
  return {
    name: annotations[NAME_ANNOTATION] ?? name.slice(PREFIX.length),
    createdAt: creationTimestamp ?? new Date(0).toISOString(),
    expiresAt: annotations[EXPIRY_ANNOTATION] ?? new Date(0).toISOString(),
  };
}
