// An app folder as the cluster sees it: the App resource (from service.toml) and, for Python code that is not
// baked into an image, the ConfigMap holding the code. Shared by `runlet manifest` and `runlet deploy`.
import { readdir, readFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import type { App } from '../crds/app-schema.ts';
import { codeConfigMapName, serviceTomlToApp } from '../crds/service-toml.ts';
import { CliError } from './cli-error.ts';

export interface CodeConfigMap {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  data: Record<string, string>;
  binaryData?: Record<string, string>;
}

export interface AppManifests {
  app: App;
  /** Absent for custom runtimes and for Python code baked into an image. */
  code: CodeConfigMap | null;
}

/** The API server refuses objects over ~1 MiB; code larger than that belongs in an image. */
const CONFIGMAP_LIMIT_BYTES = 1024 * 1024 - 16 * 1024;
/** Not part of the app: local state, caches, VCS and build files. */
const IGNORED = new Set(['.runlet', '__pycache__', '.git', '.venv', 'venv', 'node_modules', 'Dockerfile', '.dockerignore', '.DS_Store']);

export async function appManifests(appDir: string, options: { namespace: string; image?: string }): Promise<AppManifests> {
  const dir = resolve(appDir);
  const tomlPath = join(dir, 'service.toml');
  const text = await readFile(tomlPath, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return '';
    throw new CliError(`cannot read ${tomlPath}: ${err.message}`);
  });
  let app: App;
  try {
    app = serviceTomlToApp(text, { defaultName: basename(dir), namespace: options.namespace, source: tomlPath });
  } catch (err) {
    throw new CliError((err as Error).message);
  }
  const python = app.spec.runtime.python;
  if (!python) return { app, code: null };
  if (options.image) {
    app.spec.runtime.python = { ...python, image: options.image, code: { baked: true } };
    return { app, code: null };
  }
  return { app, code: await codeConfigMap(dir, app.metadata.name, options.namespace) };
}

async function codeConfigMap(dir: string, appName: string, namespace: string): Promise<CodeConfigMap> {
  const data: Record<string, string> = {};
  const binaryData: Record<string, string> = {};
  let bytes = 0;
  for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
    if (IGNORED.has(entry.name) || entry.name.endsWith('.pyc')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      throw new CliError(
        `${path} is a folder: a code ConfigMap holds the app folder's top-level files only. ` +
          `Bake the code into an image instead: runlet dockerfile ${dir}, build it, then runlet deploy ${dir} --image IMAGE`,
      );
    }
    if (!entry.isFile()) continue;
    const content = await readFile(path);
    bytes += content.length;
    const text = content.toString('utf8');
    if (Buffer.from(text, 'utf8').equals(content)) data[entry.name] = text;
    else binaryData[entry.name] = content.toString('base64');
  }
  if (bytes > CONFIGMAP_LIMIT_BYTES) {
    throw new CliError(
      `the files of ${dir} take ${bytes} bytes, more than a ConfigMap holds (about 1 MiB). ` +
        `Bake the code into an image instead: runlet dockerfile ${dir}, build it, then runlet deploy ${dir} --image IMAGE`,
    );
  }
  if (!Object.keys(data).some((name) => name.endsWith('.py'))) {
    throw new CliError(`${dir} has no Python file: a Python app needs its module (main.py by default) beside service.toml`);
  }
  const configMap: CodeConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: codeConfigMapName(appName), namespace, labels: { 'app.kubernetes.io/name': appName, 'app.kubernetes.io/managed-by': 'runlet' } },
    data,
  };
  if (Object.keys(binaryData).length > 0) configMap.binaryData = binaryData;
  return configMap;
}
