// Opens the results store of a cluster: a pool on RUNLET_RESULTS_DSN (a libpq URL), the schema brought up to
// date (migrate.ts), the store over the pool. Pool errors of idle connections (a restarted server) are logged,
// not thrown: the next query opens a new connection.
import pg from 'pg';
import type { Logger } from 'pino';
import { migrate } from './migrate.ts';
import { PgResults } from './pg-results.ts';

/** The environment variable the chart sets from its Secret's `dsn` key. */
export const RESULTS_DSN_ENV = 'RUNLET_RESULTS_DSN';

export interface ResultsOptions {
  dsn: string;
  logger: Logger;
  /** Connections of this process; the collector's batches and the API's reads share them. */
  maxConnections?: number;
}

export interface OpenResults {
  store: PgResults;
  pool: pg.Pool;
  schemaVersion: number;
  close(): Promise<void>;
}

const DEFAULT_MAX_CONNECTIONS = 10;
/** A query waits at most this long for a connection, then fails (the API answers 500, the collector 503). */
const CONNECT_TIMEOUT_MS = 5_000;

export async function openResults(options: ResultsOptions): Promise<OpenResults> {
  const pool = new pg.Pool({
    connectionString: options.dsn,
    max: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: 'runlet',
  });
  const where = describeDsn(options.dsn);
  // The message only: pg's error carries its client, whose serialisation is kilobytes of internals.
  pool.on('error', (error) => options.logger.warn({ error: error.message, database: where }, 'an idle results store connection failed'));
  let schemaVersion: number;
  try {
    schemaVersion = await migrate(pool);
  } catch (error) {
    await pool.end();
    throw new Error(`results store ${where}: cannot open it`, { cause: error });
  }
  options.logger.info({ database: where, schemaVersion }, 'results store opened');
  return { store: new PgResults(pool), pool, schemaVersion, close: () => pool.end() };
}

/** The DSN without its password, for messages and logs. */
export function describeDsn(dsn: string): string {
  try {
    const url = new URL(dsn);
    url.password = '';
    return url.toString();
  } catch {
    return '(an unparsable DSN)';
  }
}
