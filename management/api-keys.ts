// API keys, as the dashboard's API keys page makes them (interface section 5.3): a named credential of a
// project with an expiry date, whose token is shown once, at creation, and never again. Where they live is the
// store's: in `runlet dev`, tokens signed with its auth key (local/dev-api-keys.ts); in a cluster, a
// ServiceAccount of the project's namespace and a token from the TokenRequest API (operator/api-keys.ts).

export interface ApiKey {
  name: string;
  /** RFC 3339. */
  createdAt: string;
  /** RFC 3339: when its token stops working (in a cluster, as the API server granted it, which may cap it). */
  expiresAt: string;
}

export interface CreatedApiKey {
  item: ApiKey;
  /** The bearer token: returned here only, stored nowhere. */
  token: string;
}

export interface ApiKeyStore {
  /**
   * The project's keys not revoked, expired ones included (until runlet dev forgets them; in a cluster until
   * revoked, which deletes their ServiceAccount): listed, they can be revoked.
   */
  list(projectId: string): Promise<ApiKey[]>;
  /** Throws ProblemError `key-exists` when the project has a key of that name. */
  create(projectId: string, name: string, expiresAt: Date): Promise<CreatedApiKey>;
  /** Throws ProblemError `key-not-found` when there is none of that name. Its token is refused from then on. */
  revoke(projectId: string, name: string): Promise<void>;
}

// A key's name follows crds/route-names.ts KEY_NAME: a DNS-1123 label, short enough to take its ServiceAccount's prefix.

/**
 * The shortest lifetime a key may be made with: the TokenRequest API's minimum (10 minutes), kept locally too so
 * that a key behaves alike in both places.
 */
export const MIN_KEY_LIFETIME_MS = 10 * 60_000;
/**
 * The longest lifetime a key may be made with unless its operator sets another (the chart's
 * `apiKeys.maxExpiryDays`): a key handed to a CI system must still end some day.
 */
export const DEFAULT_MAX_KEY_LIFETIME_MS = 365 * 86_400_000;
