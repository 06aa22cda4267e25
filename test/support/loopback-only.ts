// The rule of this machine, enforced where the tests run: no connection may go anywhere but the loopback
// (127.0.0.0/8, ::1). The cluster fixtures report pods at addresses of a documentation range that nothing may
// dial (test/kubelet/pod-network.ts); this guard refuses — before any packet — every TCP connection whose
// destination is not loopback, in the test process and (through `node`, an --import of
// loopback-only-preload.ts) in the Node processes the test kubelet starts, and remembers each refusal, so a
// fixture can fail the tests that caused one even where the error itself was caught and retried.
import { existsSync, readFileSync } from 'node:fs';
import { isIP, Socket } from 'node:net';
import { join } from 'node:path';

/** The variable naming the file the guarded child processes append their refusals to. */
export const REFUSED_DIALS_ENV = 'RUNLET_TEST_REFUSED_DIALS';
const PRELOAD = join(import.meta.dirname, 'loopback-only-preload.ts');

export function isLoopbackAddress(host: string): boolean {
  if (isIP(host) === 4) return host.startsWith('127.');
  const lower = host.toLowerCase().replace(/^\[|\]$/g, '');
  return lower === '::1' || /^::ffff:127\./.test(lower);
}

/** `host:port` of a connect call's arguments (any form Socket#connect takes), or undefined for a Unix socket. */
export function connectDestination(args: readonly unknown[]): { host: string; port: unknown } | undefined {
  // net.connect passes its normalized arguments as one array: [options, callback].
  const first = Array.isArray(args[0]) ? (args[0] as unknown[])[0] : args[0];
  if (typeof first === 'object' && first !== null) {
    const options = first as { path?: unknown; host?: unknown; port?: unknown };
    // A Unix socket has a path and no port; node:http's options carry the request's path beside a port.
    if (options.path !== undefined && options.path !== null && (options.port === undefined || options.port === null)) return undefined;
    return { host: typeof options.host === 'string' && options.host !== '' ? options.host : 'localhost', port: options.port };
  }
  if (typeof first === 'string' && !/^\d+$/.test(first)) return undefined; // connect(path)
  return { host: typeof args[1] === 'string' && args[1] !== '' ? args[1] : 'localhost', port: first };
}

/** A name is not an address: only `localhost` is known to stay on the machine. */
function staysLocal(host: string): boolean {
  return isIP(host.replace(/^\[|\]$/g, '')) === 0 ? host.toLowerCase() === 'localhost' : isLoopbackAddress(host);
}

type Connect = (this: Socket, ...args: unknown[]) => Socket;

/**
 * Wraps `target.connect` (Socket.prototype's, or a stand-in in a test): a connection to anything but loopback
 * is reported to `refused` and throws before the original runs. Returns the function that unwraps it.
 */
export function guardConnect(target: { connect: Connect }, refused: (destination: string) => void): () => void {
  const original = target.connect;
  let active = true;
  const guarded: Connect = function (this: Socket, ...args: unknown[]) {
    const destination = active ? connectDestination(args) : undefined;
    if (destination !== undefined && !staysLocal(destination.host)) {
      const where = `${destination.host}:${String(destination.port)}`;
      refused(where);
      throw Object.assign(new Error(`connection to ${where} refused: tests may only connect to 127.0.0.0/8 or ::1 (test/support/loopback-only.ts)`), {
        code: 'ERR_LOOPBACK_ONLY',
      });
    }
    return original.apply(this, args);
  };
  target.connect = guarded;
  return () => {
    active = false;
    // Unwrapped only if nothing wrapped it since; otherwise the wrapper stays, passing everything through.
    if (target.connect === guarded) target.connect = original;
  };
}

export interface LoopbackGuard {
  /** Argv prefix of a guarded Node process: the node binary and the --import of the guard. */
  readonly node: readonly string[];
  /** Environment of a guarded Node process: where it records what it refused. */
  readonly env: Readonly<Record<string, string>>;
  /** Every connection refused so far, here and in the guarded processes: `<where> (<who>)`. */
  refused(): string[];
  /** Throws, listing them, if any connection was refused. */
  assertNoneRefused(): void;
  uninstall(): void;
}

/** Guards this process's connections from now on; `refusedLog`: the file guarded child processes append to. */
export function installLoopbackGuard(refusedLog: string): LoopbackGuard {
  const here: string[] = [];
  const uninstall = guardConnect(Socket.prototype as unknown as { connect: Connect }, (where) => here.push(`${where} (test process ${process.pid})`));
  const refused = () => {
    const children = existsSync(refusedLog) ? readFileSync(refusedLog, 'utf8').split('\n').filter((line) => line !== '') : [];
    return [...here, ...children];
  };
  return {
    node: [process.execPath, '--import', PRELOAD],
    env: { [REFUSED_DIALS_ENV]: refusedLog },
    refused,
    assertNoneRefused() {
      const found = refused();
      if (found.length > 0) throw new Error(`connections to non-loopback addresses were attempted (and refused): ${found.join(', ')}`);
    },
    uninstall,
  };
}
