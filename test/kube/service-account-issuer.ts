// The server's service-account token issuer, as kube-apiserver's: an RSA key signing every TokenRequest token
// with RS256 (`kid`: the base64url SHA-256 of the public key's DER, as the real server derives it), and service
// account issuer discovery serving its public half (`/.well-known/openid-configuration` and `/openid/v1/jwks`,
// the ServiceAccountIssuerDiscovery endpoints, beta and on from 1.20). One key per test process, made on first use.
import { createHash, createSign, generateKeyPairSync, type KeyObject } from 'node:crypto';

/** The issuer the server's tokens carry in `iss`: the control-plane tier's --service-account-issuer. */
export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';
export const OPENID_CONFIGURATION_PATH = '/.well-known/openid-configuration';
export const JWKS_PATH = '/openid/v1/jwks';

interface SigningKey {
  privateKey: KeyObject;
  jwk: Record<string, unknown>;
}

let signingKey: SigningKey | undefined;

function key(): SigningKey {
  if (signingKey !== undefined) return signingKey;
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = createHash('sha256').update(publicKey.export({ format: 'der', type: 'spki' })).digest('base64url');
  signingKey = { privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), use: 'sig', kty: 'RSA', kid, alg: 'RS256' } };
  return signingKey;
}

/** A compact JWS of `claims`, signed RS256 by the server's key, as kube-apiserver signs service-account tokens. */
export function signServiceAccountToken(claims: object): string {
  const { privateKey, jwk } = key();
  const part = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const signed = `${part({ alg: 'RS256', kid: jwk.kid })}.${part({ iss: SERVICE_ACCOUNT_ISSUER, ...claims })}`;
  return `${signed}.${createSign('RSA-SHA256').update(signed).sign(privateKey).toString('base64url')}`;
}

/** What `/.well-known/openid-configuration` answers (the real server's fields, the JWKS at `jwksOrigin`). */
export function openIdConfiguration(jwksOrigin: string): object {
  return {
    issuer: SERVICE_ACCOUNT_ISSUER,
    jwks_uri: `${jwksOrigin}${JWKS_PATH}`,
    response_types_supported: ['id_token'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256'],
  };
}

/** What `/openid/v1/jwks` answers: the public key. */
export function serviceAccountKeySet(): object {
  return { keys: [key().jwk] };
}
