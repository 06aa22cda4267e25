// How a container written for its own filesystem and network namespace runs as a local process: the
// paths it was given under a volume's mountPath point into the volume's local directory instead, and the
// pod's ports become the free local ports the pod was given. Only the strings a container is configured
// with (command, args, env values, workingDir) are rewritten; what a program computes at run time is not.
//
// Paths: an argument, the value of a `--flag=value` argument, or one `:`-separated element of an env value
// that equals a mountPath or starts with `mountPath/` has that prefix replaced (the longest mountPath wins).
// Ports: a known pod port number is replaced where it is the value of a port flag (`--port N`,
// `--admin-port=N`, any `-…port` flag), a `host:N` of a loopback or any-address host, or the whole value
// of an env variable whose name contains PORT.

export interface MountRewrite {
  /** Where the container expects the volume, e.g. /var/run/runlet. */
  mountPath: string;
  /** The local directory standing in for it. */
  localPath: string;
}

export interface Rewrites {
  /** Pod port → local port. */
  ports: ReadonlyMap<number, number>;
  /** This container's mounts. */
  mounts: readonly MountRewrite[];
}

const PORT_FLAG = /^--?[A-Za-z0-9-]*port$/i;
const PORT_FLAG_WITH_VALUE = /^(--?[A-Za-z0-9-]*port=)(\d+)$/i;
const LOOPBACK_HOST_PORT = /\b(127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]|\[::\]):(\d+)\b/g;
const PORT_ENV_NAME = /PORT/i;

function normalizedMountPath(path: string): string {
  return path.length > 1 ? path.replace(/\/+$/, '') : path;
}

function rewritePath(value: string, mounts: readonly MountRewrite[]): string {
  let best: MountRewrite | undefined;
  for (const mount of mounts) {
    const prefix = normalizedMountPath(mount.mountPath);
    const matches = value === prefix || value.startsWith(prefix === '/' ? '/' : `${prefix}/`);
    if (matches && (best === undefined || prefix.length > normalizedMountPath(best.mountPath).length)) best = mount;
  }
  if (best === undefined) return value;
  return best.localPath + value.slice(normalizedMountPath(best.mountPath).length);
}

function rewriteHostPorts(value: string, ports: ReadonlyMap<number, number>): string {
  return value.replace(LOOPBACK_HOST_PORT, (whole, host: string, port: string) => {
    const local = ports.get(Number(port));
    return local === undefined ? whole : `${host}:${local}`;
  });
}

function mappedPort(value: string, ports: ReadonlyMap<number, number>): string {
  if (!/^\d+$/.test(value)) return value;
  const local = ports.get(Number(value));
  return local === undefined ? value : String(local);
}

/** The port numbers a command line names through port flags (they are pod ports too). */
export function portFlagValues(argv: readonly string[]): number[] {
  const found: number[] = [];
  argv.forEach((arg, index) => {
    const inline = PORT_FLAG_WITH_VALUE.exec(arg);
    if (inline !== null) found.push(Number(inline[2]));
    const next = argv[index + 1];
    if (PORT_FLAG.test(arg) && next !== undefined && /^\d+$/.test(next)) found.push(Number(next));
  });
  return found.filter((port) => port > 0 && port < 65536);
}

export function rewriteArgv(argv: readonly string[], rewrites: Rewrites): string[] {
  return argv.map((arg, index) => {
    const previous = index > 0 ? argv[index - 1]! : '';
    if (PORT_FLAG.test(previous)) return mappedPort(arg, rewrites.ports);
    const inlinePort = PORT_FLAG_WITH_VALUE.exec(arg);
    if (inlinePort !== null) return inlinePort[1] + mappedPort(inlinePort[2]!, rewrites.ports);
    const flag = /^(--?[A-Za-z0-9-]+=)(.*)$/s.exec(arg);
    const rewritten = flag === null ? rewritePath(arg, rewrites.mounts) : flag[1] + rewritePath(flag[2]!, rewrites.mounts);
    return rewriteHostPorts(rewritten, rewrites.ports);
  });
}

export function rewriteEnvValue(name: string, value: string, rewrites: Rewrites): string {
  if (PORT_ENV_NAME.test(name) && /^\d+$/.test(value)) return mappedPort(value, rewrites.ports);
  const paths = value
    .split(':')
    .map((element) => rewritePath(element, rewrites.mounts))
    .join(':');
  return rewriteHostPorts(paths, rewrites.ports);
}

export function rewritePathValue(value: string, rewrites: Rewrites): string {
  return rewritePath(value, rewrites.mounts);
}
