// What the end-to-end tests ask of the local processes standing for pods: whether one still runs, and what a
// file it writes holds so far.
import { readFileSync } from 'node:fs';

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The file's text, or '' when it does not exist (yet). */
export function readOrEmpty(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}
