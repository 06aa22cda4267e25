// API keys in a cluster: a key is a ServiceAccount in the project's namespace, labelled as a Runlet key, bound
// (RoleBinding) to the ClusterRole `runlet-api-key`, the caller role; its token comes from the TokenRequest API
// with the expiry asked (which the API server may shorten: --service-account-max-token-expiration). The token is
// valid for the run interface's audience and the API server's own, so that one key calls apps and reads runs.
// Revoking deletes the ServiceAccount: the API server then refuses its token (TokenReview: the management API at
// its next review, within its 30 s cache), and the sidecars, which verify tokens offline, ask whether it still
// exists before they cache it for at most a minute (run-request/auth/service-account-check.ts).
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { KubeApi } from '../kube/client.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';
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
  /** The audiences the sidecars accept (`--auth-audience`, default runlet). */
  runAudiences: readonly string[];
}

export class KubeApiKeys implements ApiKeyStore {
  readonly #api: KubeApi;
  readonly #runAudiences: readonly string[];
  /** The API server's own audiences, read once from a token it issued with none asked. */
  #apiAudiences: Promise<string[]> | null = null;

  constructor(options: KubeApiKeysOptions) {
    this.#api = options.api;
    this.#runAudiences = options.runAudiences;
  }

  async list(projectId: string): Promise<ApiKey[]> {
    // Expired keys too: their ServiceAccounts stay until revoked, and the list is where one revokes them.
    const { items } = await this.#api.list<ServiceAccount>(serviceAccountsPath(projectId), { labelSelector: `${API_KEY_LABEL}=true` });
    return items.map(keyOf);
  }

  async create(projectId: string, name: string, expiresAt: Date): Promise<CreatedApiKey> {
    const serviceAccountName = PREFIX + name;
    let account: ServiceAccount;
    try {
      account = await this.#api.create<ServiceAccount>(serviceAccountsPath(projectId), {
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
        account = await this.#api.mergePatch<ServiceAccount>(`${serviceAccountsPath(projectId)}/${serviceAccountName}`, { metadata: { annotations: { [EXPIRY_ANNOTATION]: expiry } } });
      }
      return { item: keyOf(account), token: granted.status!.token };
    } catch (err) {
      // No key half made: without its binding or token it would only be listed, never usable.
      await this.#api.delete(`${serviceAccountsPath(projectId)}/${serviceAccountName}`).catch(() => undefined);
      throw err;
    }
  }

  async revoke(projectId: string, name: string): Promise<void> {
    const path = `${serviceAccountsPath(projectId)}/${PREFIX}${name}`;
    const account = await this.#api.find<ServiceAccount>(path);
    if (account === undefined || account.metadata.labels?.[API_KEY_LABEL] !== 'true') {
      throw new ProblemError(Problems.keyNotFound, `project ${projectId} has no API key named ${name}`);
    }
    // Its RoleBinding, owned by it, goes with it (garbage collection).
    await this.#api.delete(path, { uid: account.metadata.uid });
  }

  #bind(projectId: string, account: ServiceAccount): Promise<KubeObject> {
    const name = account.metadata.name!;
    return this.#api.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${projectId}/rolebindings`, {
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

  async #token(projectId: string, serviceAccountName: string, expiresAt: Date): Promise<TokenRequest> {
    const audiences = [...new Set([...(await this.#apiServerAudiences(projectId, serviceAccountName)), ...this.#runAudiences])];
    const expirationSeconds = Math.ceil((expiresAt.getTime() - Date.now()) / 1000);
    return this.#api.create<TokenRequest>(`${serviceAccountsPath(projectId)}/${serviceAccountName}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { audiences, expirationSeconds },
    });
  }

  /**
   * The API server's audiences (its --api-audiences, which no API lists): the `aud` of a token it issues when none
   * is asked. That short token is never handed out, and dies with the key's ServiceAccount.
   */
  #apiServerAudiences(projectId: string, serviceAccountName: string): Promise<string[]> {
    this.#apiAudiences ??= this.#api
      .create<TokenRequest>(`${serviceAccountsPath(projectId)}/${serviceAccountName}/token`, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 600 },
      })
      .then((probe) => {
        const { aud } = JSON.parse(Buffer.from(probe.status!.token.split('.')[1]!, 'base64url').toString()) as { aud: string | string[] };
        return [aud].flat();
      })
      .catch((err: unknown) => {
        this.#apiAudiences = null;
        throw err;
      });
    return this.#apiAudiences;
  }
}

function serviceAccountsPath(namespace: string): string {
  return `/api/v1/namespaces/${namespace}/serviceaccounts`;
}

function keyOf(account: ServiceAccount): ApiKey {
  const { annotations = {}, name = '', creationTimestamp } = account.metadata;
  return {
    name: annotations[NAME_ANNOTATION] ?? name.slice(PREFIX.length),
    createdAt: creationTimestamp ?? new Date(0).toISOString(),
    expiresAt: annotations[EXPIRY_ANNOTATION] ?? new Date(0).toISOString(),
  };
}
