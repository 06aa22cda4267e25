// The cluster's service-account token issuer, which the in-memory API server does not have: an ES256 key whose
// key set is served on 127.0.0.1 (as the API server serves /openid/v1/jwks), and tokens shaped like those of
// `kubectl create token`. Sidecars given its key set verify them as they verify service-account tokens in a
// cluster: one issuer for every project, the token's namespace standing for its project.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';

const KEY_ID = 'runlet-e2e-issuer';

export interface ServiceAccountIssuer {
  /** The key set's URL: the sidecars' `RUNLET_AUTH_JWKS_URL`. */
  readonly jwksUrl: string;
  /** A token of service account `name` (with `uid`) in `namespace`, for `audience` (default runlet), valid for an hour. */
  token(namespace: string, options?: { name?: string; uid?: string; audience?: string }): Promise<string>;
  close(): Promise<void>;
}

export async function startServiceAccountIssuer(): Promise<ServiceAccountIssuer> {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const keySet = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: KEY_ID, alg: 'ES256', use: 'sig' }] });
  const server: Server = createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/openid/v1/jwks') {
      response.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end(keySet);
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    jwksUrl: `${base}/openid/v1/jwks`,
    token: (namespace, options = {}) => sign(privateKey, base, namespace, options.name ?? 'default', options.audience ?? 'runlet', options.uid),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function sign(key: CryptoKey, issuer: string, namespace: string, name: string, audience: string, uid?: string): Promise<string> {
  return new SignJWT({ 'kubernetes.io': { namespace, serviceaccount: uid === undefined ? { name } : { name, uid } } })
    .setProtectedHeader({ alg: 'ES256', kid: KEY_ID, typ: 'JWT' })
    .setIssuer(issuer)
    .setSubject(`system:serviceaccount:${namespace}:${name}`)
    .setAudience(audience)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(key);
}
