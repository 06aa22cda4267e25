// What run-interface authentication trusts and requires: the issuer whose key set signs tokens (in a cluster,
// the API server's service-account issuer), per-project shared HS256 keys, the audience, and the bounds of the
// verified-token cache. `loadRunAuthConfig` reads it from the sidecar's flags and environment;
// `loadIssuerAuthConfig`, its issuer part, is what the operator's holder reads from the same flags and variables,
// so that it trusts exactly the tokens the sidecars trust (it answers for every project, so no shared key).
import { accessSync, constants, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICE_ACCOUNT_DIR } from '../../kube/in-cluster.ts';

export const DEFAULT_AUDIENCE = 'runlet';

/** Asymmetric algorithms accepted from the issuer's key set. HS256 is never checked against it. */
export const JWKS_ALGORITHMS = ['RS256', 'ES256', 'EdDSA'] as const;
/** The only algorithm accepted with a project's shared key. */
export const SHARED_KEY_ALGORITHM = 'HS256';
/** RFC 7518 §3.2: an HS256 key must be at least as long as the hash output. */
export const MIN_SHARED_KEY_BYTES = 32;

export interface RunAuthConfig {
  /** The `aud` a token must carry (one of them, when several). */
  audience: string | readonly string[];
  /**
   * The `iss` that tokens signed by the key set must carry. When `jwksUrl` is absent, the key set is also
   * discovered from `<issuer>/.well-known/openid-configuration`. Unset: `iss` is not checked.
   */
  issuer?: string;
  /** The issuer's JSON Web Key Set, e.g. `https://kubernetes.default.svc/openid/v1/jwks` in a cluster. */
  jwksUrl?: string;
  /** PEM bundle trusted for HTTPS to the issuer (in a pod: the service account's `ca.crt`). */
  jwksCaFile?: string;
  /**
   * A bearer token sent when fetching the key set; the API server serves `/openid/v1/jwks` to authenticated
   * callers only. Re-read at every fetch: kubelet rotates projected tokens.
   */
  jwksTokenFile?: string;
  /** After a successful key-set fetch, an unknown `kid` refetches only once this long has passed. Default 30 s. */
  jwksCooldownMs?: number;
  /** The key set is refetched on first use after this age, so removed keys stop verifying. Default 10 min. */
  jwksMaxAgeMs?: number;
  /** Bound on one discovery or key-set request. Default 5 s. */
  jwksTimeoutMs?: number;
  /** Shared HS256 keys by project id, at least MIN_SHARED_KEY_BYTES each. */
  hs256Keys?: Readonly<Record<string, Uint8Array>>;
  /** Leeway for `exp` / `nbf` against clock skew between the token's issuer and this node. Default 5 s. */
  clockToleranceSeconds?: number;
  /** Verified tokens kept at most. Default 10 000. */
  cacheMaxEntries?: number;
  /** Bound on the characters of cached credentials (tokens are ~1–2 KB; a few can be far larger). Default 16 Mi. */
  cacheMaxChars?: number;
  /**
   * A verified token is re-verified after this long even if it expires later, so a key removed from the key set
   * or a rotated shared key stops admitting long-lived tokens within this bound. Default 10 min.
   */
  cacheMaxAgeMs?: number;
}

/** The issuer and audience flags, in the shape of an OPTIONS table (flag → environment variables, default): the sidecar's and the holder's. */
export const ISSUER_AUTH_OPTIONS = {
  'auth-audience': { env: ['RUNLET_AUTH_AUDIENCE'], default: DEFAULT_AUDIENCE },
  'auth-issuer': { env: ['RUNLET_AUTH_ISSUER'] },
  'auth-jwks-url': { env: ['RUNLET_AUTH_JWKS_URL'] },
  'auth-jwks-ca-file': { env: ['RUNLET_AUTH_JWKS_CA_FILE'] },
  'auth-jwks-token-file': { env: ['RUNLET_AUTH_JWKS_TOKEN_FILE'] },
} as const satisfies Record<string, { env: readonly string[]; default?: string }>;

/** Flags of `runlet sidecar`: the issuer's, and the project's shared key. */
export const RUN_AUTH_OPTIONS = {
  ...ISSUER_AUTH_OPTIONS,
  'auth-key-file': { env: ['RUNLET_AUTH_KEY_FILE'] },
} as const satisfies Record<string, { env: readonly string[]; default?: string }>;

export type IssuerAuthOptionName = keyof typeof ISSUER_AUTH_OPTIONS;
export type RunAuthOptionName = keyof typeof RUN_AUTH_OPTIONS;

/** The project's shared key as a value, never a flag: a flag would show in the pod spec and in `ps`. */
export const SHARED_KEY_ENV = 'RUNLET_AUTH_KEY';

export const ISSUER_AUTH_USAGE = `  --auth-audience LIST        accepted token audiences, comma-separated (default runlet) [RUNLET_AUTH_AUDIENCE]
  --auth-issuer URL           required iss of key-set tokens; key set discovered from it without --auth-jwks-url [RUNLET_AUTH_ISSUER]
  --auth-jwks-url URL         key set of the token issuer (in a pod, default the API server's) [RUNLET_AUTH_JWKS_URL]
  --auth-jwks-ca-file FILE    CA bundle for the issuer (in a pod, default the service account's) [RUNLET_AUTH_JWKS_CA_FILE]
  --auth-jwks-token-file FILE bearer token for key-set requests (in a pod, default the service account's) [RUNLET_AUTH_JWKS_TOKEN_FILE]`;

export const RUN_AUTH_USAGE = `${ISSUER_AUTH_USAGE}
  --auth-key-file FILE        the project's shared HS256 key (or its value in ${SHARED_KEY_ENV}) [RUNLET_AUTH_KEY_FILE]`;

/** Where the API server serves its service-account issuer's key set, inside the cluster. */
export const IN_CLUSTER_JWKS_URL = 'https://kubernetes.default.svc/openid/v1/jwks';

/**
 * Who issues the tokens callers present, and for which audience. In a pod (KUBERNETES_SERVICE_HOST set) with no
 * issuer configured, the API server's service-account issuer, reached with the CA and token in
 * `serviceAccountDir` (where the process finds its own API credentials). Neither issuer nor key set when none
 * is configured outside a pod. Throws an Error whose message names the flag to fix.
 */
export function loadIssuerAuthConfig(
  option: (name: IssuerAuthOptionName) => string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  serviceAccountDir: string = SERVICE_ACCOUNT_DIR,
): RunAuthConfig {
  const audience = (option('auth-audience') ?? DEFAULT_AUDIENCE).split(',').map((value) => value.trim()).filter(Boolean);
  if (audience.length === 0) throw new Error('--auth-audience must name at least one audience');
  const config: RunAuthConfig = { audience };

  const issuer = option('auth-issuer');
  let jwksUrl = option('auth-jwks-url');
  let caFile = option('auth-jwks-ca-file');
  let tokenFile = option('auth-jwks-token-file');
  if (!jwksUrl && !issuer && env.KUBERNETES_SERVICE_HOST) {
    jwksUrl = IN_CLUSTER_JWKS_URL;
    caFile ??= join(serviceAccountDir, 'ca.crt');
    tokenFile ??= join(serviceAccountDir, 'token');
  }
  if (issuer) config.issuer = checkedUrl('--auth-issuer', issuer);
  if (jwksUrl) config.jwksUrl = checkedUrl('--auth-jwks-url', jwksUrl);
  if (caFile) config.jwksCaFile = readableFile('--auth-jwks-ca-file', caFile);
  if (tokenFile) config.jwksTokenFile = readableFile('--auth-jwks-token-file', tokenFile);
  return config;
}

/**
 * The sidecar's auth configuration for the app's project: the issuer's (above) and the project's shared key.
 * Throws an Error whose message names the flag to fix.
 */
export function loadRunAuthConfig(
  option: (name: RunAuthOptionName) => string | undefined,
  projectId: string,
  env: NodeJS.ProcessEnv = process.env,
  serviceAccountDir: string = SERVICE_ACCOUNT_DIR,
): RunAuthConfig {
  const config = loadIssuerAuthConfig(option, env, serviceAccountDir);
  const keyFile = option('auth-key-file');
  const keyValue = env[SHARED_KEY_ENV];
  if (keyFile && keyValue) throw new Error(`give the shared key once: --auth-key-file or ${SHARED_KEY_ENV}, not both`);
  if (keyFile) config.hs256Keys = { [projectId]: readSharedKeyFile(keyFile) };
  else if (keyValue) config.hs256Keys = { [projectId]: sharedKeyFromText(keyValue, SHARED_KEY_ENV) };

  if (!config.jwksUrl && !config.issuer && !config.hs256Keys) {
    throw new Error(
      `run-interface auth needs a token issuer (--auth-jwks-url or --auth-issuer) or a shared key (--auth-key-file or ${SHARED_KEY_ENV}); ` +
        'in a pod the API server issuer is the default',
    );
  }
  return config;
}

/** A shared key is text (e.g. `openssl rand -hex 32`); surrounding whitespace, such as a file's final newline, is not part of it. */
export function sharedKeyFromText(text: string, origin: string): Uint8Array {
  const key = new TextEncoder().encode(text.trim());
  if (key.length < MIN_SHARED_KEY_BYTES) {
    throw new Error(`the shared key from ${origin} is ${key.length} bytes; HS256 needs at least ${MIN_SHARED_KEY_BYTES} (e.g. openssl rand -hex 32)`);
  }
  return key;
}

export function readSharedKeyFile(path: string): Uint8Array {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read the shared key file ${path}: ${(err as Error).message}`, { cause: err });
  }
  return sharedKeyFromText(text, path);
}

function checkedUrl(flag: string, value: string): string {
  if (!URL.canParse(value)) throw new Error(`${flag} must be an absolute URL, got "${value}"`);
  return value;
}

function readableFile(flag: string, path: string): string {
  try {
    accessSync(path, constants.R_OK);
  } catch (err) {
    throw new Error(`${flag}: cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
  return path;
}
