// Opens the results store of a cluster: a pool on RUNLET_RESULTS_DSN (a libpq URL), the schema brought up to
// date (migrate.ts), the store over the pool. Pool errors of idle connections (a restarted server) are logged,
// not thrown: the next query opens a new connection.
//
// Two ways: openResults tries once and fails (tools, tests); openResultsWhenReachable, the operator's, returns at
// once and keeps trying with backoff, since the chart's embedded PostgreSQL starts beside the operator and may
// answer only minutes later (its volume bound, initdb run). Until it opens, every use of the store is refused
// 503 run-store-unavailable with the reason (the collector's batches stay in the pods' journals, a list is
// retried), and the state says why for the operator's readiness.
import pg from 'pg';
import type { Logger } from 'pino';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { migrate } from './migrate.ts';
import { NamespaceUsageReader } from './namespace-usage.ts';
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
  /** What each namespace keeps, for the quotas and the operator's metrics. */
  usage: NamespaceUsageReader;
  pool: pg.Pool;
  schemaVersion: number;
  close(): Promise<void>;
}

/** Open (the schema migrated, at `schemaVersion`), or not yet and why. */
export type ResultsState = { open: true; schemaVersion: number } | { open: false; waitingFor: string };

export interface OpeningResults {
  store: PgResults;
  usage: NamespaceUsageReader;
  pool: pg.Pool;
  state(): ResultsState;
  /** Resolves once open; rejects only when closed first. */
  readonly opened: Promise<void>;
  /** Stops trying (when still closed) and ends the pool. */
  close(): Promise<void>;
}

const DEFAULT_MAX_CONNECTIONS = 10;
/** A query waits at most this long for a connection, then fails (the API answers 500, the collector 503). */
const CONNECT_TIMEOUT_MS = 5_000;
/** Between tries to open: doubling from the first to the last, so a slow start is met quickly and a dead server is not hammered. */
export const OPEN_RETRY_FIRST_MS = 1_000;
export const OPEN_RETRY_MAX_MS = 30_000;
/** What a refused call is told to wait, in seconds. */
const RETRY_AFTER_SECONDS = 5;

function newPool(options: ResultsOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.dsn,
    max: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: 'runlet',
  });
  // The message only: pg's error carries its client, whose serialisation is kilobytes of internals.
  pool.on('error', (error) => options.logger.warn({ error: error.message, database: describeDsn(options.dsn) }, 'an idle results store connection failed'));
  return pool;
}

export async function openResults(options: ResultsOptions): Promise<OpenResults> {
  const pool = newPool(options);
  const where = describeDsn(options.dsn);
  let schemaVersion: number;
  try {
    schemaVersion = await migrate(pool);
  } catch (error) {
    await pool.end();
    throw new Error(`results store ${where}: cannot open it`, { cause: error });
  }
  options.logger.info({ database: where, schemaVersion }, 'results store opened');
  return { store: new PgResults(pool), usage: new NamespaceUsageReader(pool), pool, schemaVersion, close: () => pool.end() };
}

/** The store at once; the database reached and migrated in the background, tried again with backoff until it is. */
export function openResultsWhenReachable(options: ResultsOptions & { retryFirstMs?: number; retryMaxMs?: number }): OpeningResults {
  const pool = newPool(options);
  const where = describeDsn(options.dsn);
  let state: ResultsState = { open: false, waitingFor: `the results store ${where} has not been reached yet` };
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;
  const assertOpen = (): void => {
    if (state.open) return;
    throw new ProblemError(Problems.runStoreUnavailable, `${state.waitingFor}; runs are kept by the pods meanwhile and listed once it opens`, {
      headers: { 'retry-after': String(RETRY_AFTER_SECONDS) },
    });
  };
  const store = new PgResults(pool, { assertOpen });
  const usage = new NamespaceUsageReader(pool, { assertOpen });
  const opened = (async () => {
    let delayMs = options.retryFirstMs ?? OPEN_RETRY_FIRST_MS;
    for (let attempt = 1; !closed; attempt += 1) {
      try {
        const schemaVersion = await migrate(pool);
        state = { open: true, schemaVersion };
        options.logger.info({ database: where, schemaVersion, attempts: attempt }, 'results store opened');
        return;
      } catch (error) {
        if (closed) break;
        const cause = causeOf(error);
        state = { open: false, waitingFor: `the results store ${where} cannot be opened yet (${cause})` };
        options.logger.warn({ database: where, cause, attempt, retryInMs: delayMs }, 'the results store cannot be opened yet; trying again (runs wait in the pods meanwhile)');
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, delayMs);
      });
      delayMs = Math.min(delayMs * 2, options.retryMaxMs ?? OPEN_RETRY_MAX_MS);
    }
    throw new Error(`results store ${where}: closed before it could be opened`);
  })();
  // A caller that never awaits `opened` must not see an unhandled rejection when it closes first.
  opened.catch(() => {});
  return {
    store,
    usage,
    pool,
    state: () => state,
    opened,
    async close() {
      closed = true;
      clearTimeout(timer);
      wake?.();
      await opened.catch(() => {});
      await pool.end();
    },
  };
}

/**
 * pg's errors: a message, a code (ECONNREFUSED, 57P03 "the database system is starting up", 28P01, ...); a
 * host with several addresses (localhost) fails with an AggregateError of one per address, its own message empty.
 */
function causeOf(error: unknown): string {
  if (error instanceof AggregateError && error.message === '') return error.errors.map(causeOf).join('; ');
  const { message, code } = error as { message?: string; code?: string };
  const text = message === undefined || message === '' ? String(error) : message;
  return code === undefined || text.includes(code) ? text : `${code}: ${text}`;
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
