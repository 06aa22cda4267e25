// Python packages for tests that install them: wheels built here, served by a PEP 503 simple index on loopback,
// and an environment for pip that reaches that index only. No public index is reachable from the tests, and
// nothing the machine has installed or configured for pip (pip.conf, PIP_FIND_LINKS) takes part.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { basename } from 'node:path';
import { promisify } from 'node:util';

export const PYTHON = process.env.RUNLET_PYTHON ?? 'python3';

/**
 * A wheel is a zip with the package and its .dist-info (METADATA, WHEEL, RECORD): written by Python's zipfile,
 * so that no build backend (setuptools, wheel) need be installed. Returns the wheel's path.
 */
export async function buildWheel(dir: string, wheel: { name: string; version: string; files: Record<string, string> }): Promise<string> {
  const script = `import base64, hashlib, json, sys, zipfile
spec = json.loads(sys.stdin.read())
name, version = spec["name"], spec["version"]
info = f"{name}-{version}.dist-info"
files = dict(spec["files"])
files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n"
files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\\nGenerator: runlet-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
def record(path, text):
    data = text.encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"
records = [record(path, text) for path, text in files.items()] + [f"{info}/RECORD,,"]
path = f"{spec['dir']}/{name}-{version}-py3-none-any.whl"
with zipfile.ZipFile(path, "w") as archive:
    for member, text in files.items():
        archive.writestr(member, text)
    archive.writestr(f"{info}/RECORD", "\\n".join(records) + "\\n")
print(path)`;
  const child = promisify(execFile)(PYTHON, ['-c', script]);
  child.child.stdin!.end(JSON.stringify({ ...wheel, dir }));
  return (await child).stdout.trim();
}

export interface PipIndex {
  /** The index's root, for PIP_INDEX_URL: `http://127.0.0.1:<port>/simple/` */
  url: string;
  /** Every request's path, in order. */
  requests: string[];
  /** Answers nothing until the returned function is called: an install held mid-way. */
  hold(): () => void;
  close(): Promise<void>;
}

/** PEP 503: /simple/<project>/ lists a project's files as links with their sha256; /files/<wheel> serves one. */
export async function startPipIndex(wheelPaths: string[]): Promise<PipIndex> {
  const wheels = await Promise.all(
    wheelPaths.map(async (path) => {
      const bytes = await readFile(path);
      const file = basename(path);
      return { file, project: normalize(file.split('-')[0]!), bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
    }),
  );
  const requests: string[] = [];
  let held: Promise<void> | null = null;
  const server: Server = createServer(async (request, response) => {
    const path = request.url ?? '/';
    requests.push(path);
    if (held) await held;
    const project = /^\/simple\/([^/]+)\/?$/.exec(path)?.[1];
    if (project !== undefined) {
      const files = wheels.filter((wheel) => wheel.project === normalize(project));
      if (files.length === 0) return void response.writeHead(404).end('not found');
      const links = files.map((wheel) => `<a href="/files/${wheel.file}#sha256=${wheel.sha256}">${wheel.file}</a><br>`).join('\n');
      return void response.writeHead(200, { 'content-type': 'text/html' }).end(`<!DOCTYPE html><html><body>\n${links}\n</body></html>`);
    }
    const wheel = wheels.find((candidate) => path === `/files/${candidate.file}`);
    if (wheel === undefined) return void response.writeHead(404).end('not found');
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': wheel.bytes.length }).end(wheel.bytes);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/simple/`,
    requests,
    hold() {
      let release!: () => void;
      held = new Promise((resolve) => (release = resolve));
      return () => {
        held = null;
        release();
      };
    },
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * pip's environment for a process of the test: this index only, no configuration file of the machine's or
 * the user's, no find-links, no cache, a short timeout and no retries, so that a mistake fails at once.
 */
export function pipEnvironment(index: PipIndex): Record<string, string | undefined> {
  return {
    PIP_INDEX_URL: index.url,
    PIP_CONFIG_FILE: '/dev/null',
    PIP_FIND_LINKS: undefined,
    PIP_EXTRA_INDEX_URL: undefined,
    PIP_NO_INDEX: undefined,
    PIP_NO_CACHE_DIR: '1',
    PIP_DEFAULT_TIMEOUT: '5',
    PIP_RETRIES: '0',
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
  };
}

function normalize(project: string): string {
  return project.toLowerCase().replace(/[-_.]+/g, '-');
}
