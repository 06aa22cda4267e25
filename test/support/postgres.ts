// A real PostgreSQL for a test file: Debian's server (installed by test/postgres/install-postgres.sh where
// missing), a cluster made by initdb in a temporary directory, listening on an ephemeral loopback port and a unix
// socket in that directory, stopped and removed by stop(). initdb runs once per machine and version into a
// template under ~/.cache/runlet/postgres that each server copies: a copy takes milliseconds, initdb seconds.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir, userInfo } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './custom-app.ts';
import { waitFor } from './wait.ts';

const run = promisify(execFile);
const INSTALL_SCRIPT = resolve(import.meta.dirname, '../postgres/install-postgres.sh');
const TEMPLATE_ROOT = join(homedir(), '.cache/runlet/postgres');
/** initdb and postgres refuse to run as root: as root, the server runs as Debian's `postgres` user. */
const SERVICE_USER = 'postgres';
const USER = 'runlet';

export interface PostgresServer {
  port: number;
  /** A libpq URL of `database` (default: the server's own `runlet` database), as RUNLET_RESULTS_DSN takes it. */
  dsn(database?: string): string;
  /** Makes an empty database; resolves with its name. */
  createDatabase(name: string): Promise<string>;
  /** Shuts the server down (an outage), keeping its data; resolves once it has exited. */
  halt(): Promise<void>;
  /** Starts a halted server again, on the same port and data; resolves once it accepts connections. */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

export interface PostgresOptions {
  /**
   * Durable commits (fsync, synchronous_commit) as production runs them: for benchmarks. Tests turn them off,
   * which changes nothing they check and spares a shared disk.
   */
  durable?: boolean;
}

let binDirPromise: Promise<string> | undefined;

function binDir(): Promise<string> {
  binDirPromise ??= run(INSTALL_SCRIPT, { timeout: 600_000 }).then(
    ({ stdout }) => stdout.trim(),
    (error: unknown) => {
      throw new Error(`PostgreSQL is needed by this test and could not be installed by ${INSTALL_SCRIPT}`, { cause: error });
    },
  );
  return binDirPromise;
}

interface ServiceAccount {
  uid: number;
  gid: number;
}

async function serviceAccount(): Promise<ServiceAccount | undefined> {
  if (userInfo().uid !== 0) return undefined;
  const [uid, gid] = await Promise.all([run('id', ['-u', SERVICE_USER]), run('id', ['-g', SERVICE_USER])]);
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

function chownTree(path: string, account: ServiceAccount): void {
  chownSync(path, account.uid, account.gid);
  if (!statSync(path).isDirectory()) return;
  for (const entry of readdirSync(path)) chownTree(join(path, entry), account);
}

/**
 * The initdb'd cluster every server copies, made once: initdb runs in a temporary directory (the service user
 * may not enter the cache under root's home), whose copy is renamed into place, so racing test files agree.
 */
async function template(bin: string, account: ServiceAccount | undefined): Promise<string> {
  const path = join(TEMPLATE_ROOT, basename(dirname(bin)));
  if (existsSync(join(path, 'PG_VERSION'))) return path;
  const staging = mkdtempSync(join(tmpdir(), 'runlet-pg-template-'));
  try {
    if (account !== undefined) chownTree(staging, account);
    await run(join(bin, 'initdb'), ['-D', staging, '-U', USER, '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync'], {
      uid: account?.uid,
      gid: account?.gid,
      timeout: 120_000,
    }).catch((error: unknown) => {
      throw new Error(`initdb into ${staging} failed`, { cause: error });
    });
    mkdirSync(TEMPLATE_ROOT, { recursive: true });
    const copy = mkdtempSync(join(TEMPLATE_ROOT, '.staging-'));
    cpSync(staging, copy, { recursive: true });
    try {
      renameSync(copy, path);
    } catch (error) {
      // Another test file placed it first: use theirs.
      rmSync(copy, { recursive: true, force: true });
      if (!existsSync(join(path, 'PG_VERSION'))) throw new Error(`cannot place the PostgreSQL template at ${path}`, { cause: error });
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return path;
}

export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresServer> {
  const bin = await binDir();
  const account = await serviceAccount();
  const templateDir = await template(bin, account);
  const root = mkdtempSync(join(tmpdir(), 'runlet-pg-'));
  const dataDir = join(root, 'data');
  cpSync(templateDir, dataDir, { recursive: true });
  // postgres refuses a data directory others may read.
  chmodSync(dataDir, 0o700);
  if (account !== undefined) chownTree(root, account);
  const durability = options.durable === true ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'];
  const launch = (port: number) => launchServer(bin, account, root, port, durability);
  // A port taken between freePort and postgres' bind fails its start: try another.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const launched = await launch(port);
    if (launched.ready) return serverHandle(launched.server, root, port, launch);
    if (attempt === 3) {
      rmSync(root, { recursive: true, force: true });
      throw new Error(`postgres did not start on 127.0.0.1:${port} (data ${dataDir}); its log ends:\n${launched.log()}`);
    }
  }
}

interface RunningServer {
  process: ChildProcess;
  exited: Promise<number | null>;
}

type Launch = (port: number) => Promise<{ ready: boolean; server: RunningServer; log(): string }>;

/** postgres on the data directory under `root`, at `port`; `ready` once it accepts connections, false if it exited first. */
async function launchServer(bin: string, account: ServiceAccount | undefined, root: string, port: number, durability: string[]): ReturnType<Launch> {
  const child = spawn(
    join(bin, 'postgres'),
    ['-D', join(root, 'data'), '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${root}`, '-c', 'max_connections=200', ...durability],
    { uid: account?.uid, gid: account?.gid, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    log = (log + chunk).slice(-4096);
  });
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  const ready = await Promise.race([acceptsConnections(port).then(() => true), exited.then(() => false)]);
  return { ready, server: { process: child, exited }, log: () => log };
}

async function acceptsConnections(port: number): Promise<void> {
  await waitFor(
    async () => {
      const client = new pg.Client({ host: '127.0.0.1', port, user: USER, database: 'postgres' });
      await client.connect();
      await client.end();
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 50, what: `postgres on 127.0.0.1:${port} to accept connections` },
  );
}

/** SIGINT: the fast shutdown, which ends the sessions still open. */
async function shutDown(server: RunningServer): Promise<void> {
  if (server.process.exitCode === null && server.process.signalCode === null) server.process.kill('SIGINT');
  await server.exited;
}

function serverHandle(first: RunningServer, root: string, port: number, launch: Launch): PostgresServer {
  const dsn = (database = 'postgres') => `postgresql://${USER}@127.0.0.1:${port}/${database}`;
  let current: RunningServer | undefined = first;
  return {
    port,
    dsn,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: dsn() });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      } finally {
        await client.end();
      }
      return name;
    },
    async halt() {
      if (current === undefined) throw new Error(`postgres on 127.0.0.1:${port} is already halted`);
      await shutDown(current);
      current = undefined;
    },
    async resume() {
      if (current !== undefined) throw new Error(`postgres on 127.0.0.1:${port} runs: halt() it first`);
      const launched = await launch(port);
      if (!launched.ready) throw new Error(`postgres did not start again on 127.0.0.1:${port}; its log ends:\n${launched.log()}`);
      current = launched.server;
    },
    async stop() {
      if (current !== undefined) await shutDown(current);
      current = undefined;
      rmSync(root, { recursive: true, force: true });
    },
  };
}
