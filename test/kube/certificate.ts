// The fake API server's TLS identity: a self-signed certificate for 127.0.0.1 and localhost, made with openssl
// once per test process (node:crypto makes keys, not certificates), so clients verify the server with a CA
// as they do in a pod.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ServerCertificate {
  /** PEM; self-signed, so it is also the CA clients trust. */
  cert: string;
  key: string;
}

let made: ServerCertificate | undefined;

export function serverCertificate(): ServerCertificate {
  made ??= makeCertificate();
  return made;
}

function makeCertificate(): ServerCertificate {
  const dir = mkdtempSync(join(tmpdir(), 'runlet-fake-kube-tls-'));
  try {
    const [certFile, keyFile] = [join(dir, 'tls.crt'), join(dir, 'tls.key')];
    try {
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', '/CN=runlet-fake-kube-api',
          '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', keyFile, '-out', certFile],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
    } catch (error) {
      throw new Error(`the fake API server needs openssl to make its TLS certificate: ${(error as Error).message}`, { cause: error });
    }
    return { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
