// The current context of kubeconfig files as credentials: its cluster's server and TLS settings and its user's
// token, token file, client certificate or basic auth. Several files (KUBECONFIG=a:b) merge as kubectl merges
// them: the first file to set current-context or to define a name wins, and files that do not exist are skipped.
// Relative paths resolve against the folder of the file that holds them. A user whose credentials come from an
// `exec` or `auth-provider` plugin is handed to client-node, imported only then.
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { kubeConfigCredentials } from './kube-credentials-client-node.ts';
import type { KubeCredentials, KubeTls } from './kube-credentials.ts';
import { TokenFile } from './kube-token-file.ts';

type Kind = 'cluster' | 'user' | 'context';

/** A named cluster, user or context, and the file it came from. */
interface Entry {
  kind: Kind;
  name: string;
  fields: Record<string, unknown>;
  file: string;
}

interface Kubeconfig {
  /** The files that exist, in order. */
  files: string[];
  currentContext?: { name: string; file: string };
  entries: Record<Kind, Map<string, Entry>>;
}

export async function kubeconfigCredentials(paths: readonly string[]): Promise<KubeCredentials> {
  const config = await readKubeconfigs(paths);
  const { context, cluster, user } = currentContext(config);
  if (user !== undefined && (user.fields.exec != null || user.fields['auth-provider'] != null)) return pluginCredentials(context, cluster, user);
  return fileCredentials(cluster, user);
}

async function readKubeconfigs(paths: readonly string[]): Promise<Kubeconfig> {
  const config: Kubeconfig = { files: [], entries: { cluster: new Map(), user: new Map(), context: new Map() } };
  for (const path of paths) {
    const file = resolve(path);
    let text;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new Error(`cannot read the kubeconfig ${file}: ${(error as Error).message}`, { cause: error });
    }
    let document: unknown;
    try {
      document = (await parseKubeconfigText(text)) ?? {};
    } catch (error) {
      throw new Error(`the kubeconfig ${file} is not valid YAML: ${(error as Error).message}`, { cause: error });
    }
    if (!isMapping(document)) throw new Error(`the kubeconfig ${file} is not a YAML mapping`);
    config.files.push(file);
    const current = document['current-context'];
    if (config.currentContext === undefined && typeof current === 'string' && current !== '') config.currentContext = { name: current, file };
    for (const kind of ['cluster', 'user', 'context'] as const) addEntries(config.entries[kind], kind, document[`${kind}s`], file);
  }
  if (config.files.length === 0) throw new Error(`no kubeconfig file exists of ${paths.join(', ')}`);
  return config;
}

function addEntries(entries: Map<string, Entry>, kind: Kind, list: unknown, file: string): void {
  if (list == null) return;
  if (!Array.isArray(list)) throw new Error(`the kubeconfig ${file}: ${kind}s is not a list`);
  list.forEach((item: unknown, index) => {
    const where = `the kubeconfig ${file}: ${kind}s[${index}]`;
    if (!isMapping(item) || typeof item.name !== 'string' || item.name === '') throw new Error(`${where} has no name`);
    // `user: {}` (or no `user` at all) is an anonymous user.
    const fields = item[kind] ?? {};
    if (!isMapping(fields)) throw new Error(`${where} (${item.name}): ${kind} is not a mapping`);
    if (!entries.has(item.name)) entries.set(item.name, { kind, name: item.name, fields, file });
  });
}

function currentContext(config: Kubeconfig): { context: Entry; cluster: Entry; user: Entry | undefined } {
  const files = config.files.join(', ');
  if (config.currentContext === undefined) throw new Error(`the kubeconfig ${files} sets no current-context`);
  const { name, file } = config.currentContext;
  const context = config.entries.context.get(name);
  if (context === undefined) throw new Error(`the current-context "${name}" of ${file} is not a context of the kubeconfig ${files}`);
  const clusterName = text(context, 'cluster');
  if (clusterName === undefined) throw new Error(`${describe(context)} names no cluster`);
  const cluster = config.entries.cluster.get(clusterName);
  if (cluster === undefined) throw new Error(`${describe(context)} names cluster "${clusterName}", which the kubeconfig ${files} does not define`);
  const userName = text(context, 'user');
  if (userName === undefined) return { context, cluster, user: undefined };
  const user = config.entries.user.get(userName);
  if (user === undefined) throw new Error(`${describe(context)} names user "${userName}", which the kubeconfig ${files} does not define`);
  return { context, cluster, user };
}

/** Credentials read from the kubeconfig and the files it names, which are read now so that errors show at startup. */
async function fileCredentials(cluster: Entry, user: Entry | undefined): Promise<KubeCredentials> {
  const server = text(cluster, 'server');
  if (server === undefined) throw new Error(`${describe(cluster)} has no server`);
  if (!URL.canParse(server) || !/^https?:$/.test(new URL(server).protocol)) throw new Error(`${describe(cluster)}: server ${server} is not an http(s) URL`);
  const insecure = flag(cluster, 'insecure-skip-tls-verify');
  // Bearer tokens in clear text only when asked for, as client-node requires.
  if (server.startsWith('http:') && !insecure) throw new Error(`${describe(cluster)}: server ${server} is plain HTTP, allowed only with insecure-skip-tls-verify: true`);
  const tls: KubeTls = { rejectUnauthorized: !insecure };
  const ca = await fileOrData(cluster, 'certificate-authority');
  if (ca !== undefined) tls.ca = ca;
  const servername = text(cluster, 'tls-server-name');
  if (servername !== undefined) tls.servername = servername;

  const headers: Record<string, string> = {};
  let tokenFile: TokenFile | undefined;
  if (user !== undefined) {
    const cert = await fileOrData(user, 'client-certificate');
    const key = await fileOrData(user, 'client-key');
    if ((cert === undefined) !== (key === undefined)) throw new Error(`${describe(user)}: a client certificate needs both client-certificate and client-key`);
    if (cert !== undefined && key !== undefined) {
      tls.cert = cert;
      tls.key = key;
    }

    const token = text(user, 'token');
    const tokenPath = text(user, 'tokenFile');
    const username = text(user, 'username');
    const password = text(user, 'password');
    if ((token !== undefined || tokenPath !== undefined) && (username !== undefined || password !== undefined)) {
      throw new Error(`${describe(user)} has both a token and a username/password; use one`);
    }
    // A token in the kubeconfig wins over a token file, as in client-node.
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    else if (tokenPath !== undefined) {
      tokenFile = new TokenFile(resolve(dirname(user.file), tokenPath));
      await tokenFile.read();
    } else if (username !== undefined || password !== undefined) {
      headers.authorization = `Basic ${Buffer.from(`${username ?? ''}:${password ?? ''}`).toString('base64')}`;
    }
    const impersonate = text(user, 'as');
    if (impersonate !== undefined) headers['impersonate-user'] = impersonate;
  }
  return {
    server: server.replace(/\/+$/, ''),
    proxyUrl: text(cluster, 'proxy-url'),
    tls: async () => tls,
    // A new object each time: the caller adds its own headers.
    authHeaders: async () => (tokenFile === undefined ? { ...headers } : { ...headers, authorization: `Bearer ${await tokenFile.read()}` }),
  };
}

/**
 * client-node's KubeConfig for the one context, with paths made absolute, since it implements the plugins (cloud
 * providers' token commands, OIDC refresh). Imported here only: see kube-credentials.ts.
 */
async function pluginCredentials(context: Entry, cluster: Entry, user: Entry): Promise<KubeCredentials> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kubeConfig = new KubeConfig();
  // JSON is YAML, which loadFromString parses with client-node's own reading of each field.
  kubeConfig.loadFromString(
    JSON.stringify({
      clusters: [{ name: cluster.name, cluster: withAbsolutePaths(cluster, ['certificate-authority']) }],
      users: [{ name: user.name, user: withAbsolutePaths(user, ['client-certificate', 'client-key']) }],
      contexts: [{ name: context.name, context: context.fields }],
      'current-context': context.name,
    }),
  );
  return kubeConfigCredentials(kubeConfig);
}

function withAbsolutePaths(entry: Entry, keys: string[]): Record<string, unknown> {
  const fields = { ...entry.fields };
  for (const key of keys) {
    const path = text(entry, key);
    if (path !== undefined) fields[key] = resolve(dirname(entry.file), path);
  }
  return fields;
}

/** `<key>-data` (base64) or the file `<key>` names; the data wins when both are set, as in kubectl. */
async function fileOrData(entry: Entry, key: string): Promise<Buffer | undefined> {
  const data = text(entry, `${key}-data`);
  if (data !== undefined) return Buffer.from(data, 'base64');
  const path = text(entry, key);
  if (path === undefined) return undefined;
  const file = resolve(dirname(entry.file), path);
  try {
    return await readFile(file);
  } catch (error) {
    throw new Error(`${describe(entry)}: cannot read ${key} ${file}: ${(error as Error).message}`, { cause: error });
  }
}

function text(entry: Entry, key: string): string | undefined {
  const value = entry.fields[key];
  if (value == null || value === '') return undefined;
  if (typeof value !== 'string') throw new Error(`${describe(entry)}: ${key} must be a string, got ${JSON.stringify(value)}`);
  return value;
}

function flag(entry: Entry, key: string): boolean {
  const value = entry.fields[key];
  if (value == null) return false;
  if (typeof value !== 'boolean') throw new Error(`${describe(entry)}: ${key} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

function describe(entry: Entry): string {
  return `${entry.kind} "${entry.name}" in the kubeconfig ${entry.file}`;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A kubeconfig is YAML, and JSON is YAML: a file written as JSON is read without loading the YAML parser (~8 MB
 * of RSS in a sidecar whose target is 80 MB).
 */
async function parseKubeconfigText(text: string): Promise<unknown> {
  if (text.trimStart().startsWith('{')) {
    try {
      return JSON.parse(text);
    } catch {
      // YAML flow mappings start with `{` too, and are not always JSON: the YAML parser reads those.
    }
  }
  const { parse } = await import('yaml');
  return parse(text);
}
