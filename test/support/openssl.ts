// Whether the openssl command is here: the TLS tests make their certificates with it, and are skipped without it.
import { execFileSync } from 'node:child_process';

export function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
