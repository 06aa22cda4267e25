// `runlet dev`'s data dir holds every run's arguments' outcome, kept results, webhook addresses (with their query
// strings) and the API keys' list: for the user alone. The folder is made 0700 and the files runlet dev writes
// there 0600, at start — an existing data dir, written by an older runlet dev under a 022 umask, is tightened —
// and the SQLite file is made before SQLite opens it, so that its journal files, which SQLite creates with the
// database file's own mode, are 0600 too.
import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { RUNS_DB_FILE_NAME } from '../sidecar/runs/sqlite-run-store.ts';

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

/**
 * Creates `dataDir` (0700) if missing, tightens it and the regular files in it to 0700 / 0600, and creates the
 * run store's file 0600 if missing. Throws with the path when a mode cannot be set (a folder of another user).
 */
export function prepareDataDir(dataDir: string, logger: Logger): void {
  try {
    mkdirSync(dataDir, { recursive: true, mode: DIR_MODE });
  } catch {
    // A folder that cannot be made (a read-only mount): the run store, opened next, says why (sqlite-run-store.ts).
    return;
  }
  tighten(dataDir, DIR_MODE, logger);
  for (const entry of readdirSync(dataDir, { withFileTypes: true })) {
    // Symbolic links are left alone: chmod would change what they point to, which may be anywhere.
    if (entry.isFile()) tighten(join(dataDir, entry.name), FILE_MODE, logger);
  }
  // 'a': made if missing, left as it is if not; SQLite takes an empty file for an empty database. A folder that
  // cannot be written: the run store says why.
  let file: number;
  try {
    file = openSync(join(dataDir, RUNS_DB_FILE_NAME), 'a', FILE_MODE);
  } catch {
    return;
  }
  closeSync(file);
}

/**
 * A folder of the data dir for the user alone (the apps' environments): made 0700 if missing, tightened if not.
 * What it holds needs no mode of its own then, which a virtual environment's programs could not have.
 */
export function preparePrivateDir(path: string, logger: Logger): void {
  mkdirSync(path, { recursive: true, mode: DIR_MODE });
  // A link would have chmod, and everything written or removed here, act on what it points to, anywhere.
  if (lstatSync(path).isSymbolicLink()) throw new Error(`${path} is a symbolic link: runlet dev keeps its own folder there; remove the link`);
  tighten(path, DIR_MODE, logger);
}

function tighten(path: string, mode: number, logger: Logger): void {
  const current = lstatSync(path).mode & 0o777;
  if ((current & ~mode) === 0) return;
  try {
    chmodSync(path, current & mode);
  } catch (err) {
    throw new Error(`cannot make ${path} private to its user (mode ${mode.toString(8)}, now ${current.toString(8)}): ${(err as Error).message}`, { cause: err });
  }
  logger.info({ path, was: current.toString(8), now: (current & mode).toString(8) }, 'made private to its user');
}
