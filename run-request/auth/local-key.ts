// Auth with a local shared key, for `runlet dev --auth-key-file F`: the same check as in a cluster, with an HS256
// key a developer keeps in a file instead of a token issuer. `signLocalToken` makes the matching tokens, e.g.
//   node --input-type=module -e "import { signLocalToken } from './run-request/auth/local-key.ts';
//     import { readFileSync } from 'node:fs'; console.log(await signLocalToken({ projectId: 'dev', key: readFileSync('dev.key', 'utf8') }))"
import { SignJWT } from 'jose';
import { DEFAULT_AUDIENCE, SHARED_KEY_ALGORITHM, readSharedKeyFile, sharedKeyFromText } from './config.ts';
import type { RunAuthConfig } from './config.ts';

/** Auth config admitting tokens signed with the key in `keyFile` for `projectId`. Throws when the key is unusable. */
export function localDevAuth(keyFile: string, projectId: string, audience: string = DEFAULT_AUDIENCE): RunAuthConfig {
  return { audience, hs256Keys: { [projectId]: readSharedKeyFile(keyFile) } };
}

export interface LocalTokenRequest {
  projectId: string;
  /** The shared key, as text (as in the key file) or bytes. */
  key: string | Uint8Array;
  /** Lifetime: seconds, or a jose time span such as `'1h'`. Default one hour. */
  expiresIn?: number | string;
  audience?: string;
}

/** An HS256 token for `projectId` that `localDevAuth` (or a sidecar holding the same key) accepts. */
export function signLocalToken(request: LocalTokenRequest): Promise<string> {
  const key = typeof request.key === 'string' ? sharedKeyFromText(request.key, 'the key given') : request.key;
  const expiresIn = request.expiresIn ?? '1h';
  return new SignJWT({ project_id: request.projectId })
    .setProtectedHeader({ alg: SHARED_KEY_ALGORITHM, typ: 'JWT' })
    .setAudience(request.audience ?? DEFAULT_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(typeof expiresIn === 'number' ? `${expiresIn}s` : expiresIn)
    .sign(key);
}
