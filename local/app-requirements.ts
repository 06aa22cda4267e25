// What `runlet dev` installs for a Python app: its [dependencies.pip] packages (service.toml, as parsed for
// `runlet dockerfile` too), else the requirements.txt beside its main.py, else nothing (no environment at all).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LoadedApp } from '../crds/service-toml.ts';

export const REQUIREMENTS_FILE = 'requirements.txt';

export interface Requirements {
  /** Where they come from, as the log and the banner say it: `[dependencies.pip]` or the file's path. */
  source: string;
  /** What follows `pip install`. */
  pipArgs: string[];
  /** What the environment is keyed by besides the interpreter: the packages, or the file's text. */
  keyText: string;
  /** A short list for messages: `numpy==2.1.0, requests`. */
  summary: string;
  /** Said once, when read: a requirements.txt that [dependencies.pip] takes precedence over. */
  notes: string[];
}

/** Null when the app has nothing to install. */
export async function appRequirements(app: LoadedApp): Promise<Requirements | null> {
  const path = join(app.dir, REQUIREMENTS_FILE);
  const text = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw new Error(`cannot read ${path}: ${err.message}`, { cause: err });
  });
  const packages = app.spec.pip ?? [];
  if (packages.length > 0) {
    return {
      source: '[dependencies.pip]',
      // `--`: a specifier is never taken for one of pip's options.
      pipArgs: ['--', ...packages],
      keyText: JSON.stringify(packages),
      summary: packages.join(', '),
      notes: text === null ? [] : [`${path} is not installed: [dependencies.pip] in service.toml is (and is what an image built by runlet dockerfile installs)`],
    };
  }
  if (text === null) return null;
  const lines = text.split('\n').map((line) => line.replace(/(^|\s)#.*$/, '').trim()).filter((line) => line !== '');
  if (lines.length === 0) return null;
  return { source: path, pipArgs: ['-r', path], keyText: text, summary: lines.join(', '), notes: [] };
}
