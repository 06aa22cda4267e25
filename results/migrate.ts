// The results store's schema: the ordered SQL files of migrations/ (0001_name.sql, 0002_…), each applied once, in
// its own transaction, and recorded in runlet_schema_migrations. Every operator replica calls this at start;
// a session advisory lock makes them take turns, so the first applies what is missing and the others find it
// done. Append a file, never edit one: a database migrated by an older runlet is brought forward in place.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Pool } from 'pg';

/** The migrations folder: next to this module in the sources, copied beside the compiled module in dist/. */
const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
const FILE_NAME = /^(\d{4})_[a-z0-9_]+\.sql$/;
/** pg_advisory_lock's key: any constant of our own; "runlet" in ASCII. */
const MIGRATION_LOCK_KEY = 0x72756e6c6574;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function readMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  const migrations = readdirSync(dir)
    .filter((name) => name.endsWith('.sql'))
    .map((name) => {
      const match = FILE_NAME.exec(name);
      if (match === null) throw new Error(`results store migration ${dir}${name}: its name must be NNNN_words.sql`);
      return { version: Number(match[1]), name, sql: readFileSync(`${dir}${name}`, 'utf8') };
    })
    .sort((a, b) => a.version - b.version);
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new Error(`results store migrations in ${dir}: expected version ${index + 1}, found ${migration.name}`);
    }
  });
  return migrations;
}

/** Brings the database to the newest schema; resolves with its version. Refuses a database newer than this runlet. */
export async function migrate(pool: Pool, migrations: readonly Migration[] = readMigrations()): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(
        `CREATE TABLE IF NOT EXISTS runlet_schema_migrations (
           version integer PRIMARY KEY,
           name text NOT NULL,
           applied_at timestamptz NOT NULL DEFAULT now()
         )`,
      );
      const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM runlet_schema_migrations');
      const current = rows[0]?.version ?? 0;
      const newest = migrations.length;
      if (current > newest) {
        throw new Error(
          `the results database has schema version ${current}, newer than ${newest} known to this runlet: upgrade runlet`,
        );
      }
      for (const migration of migrations.slice(current)) {
        await client.query('BEGIN');
        try {
          await client.query(migration.sql);
          await client.query('INSERT INTO runlet_schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name]);
          await client.query('COMMIT');
        } catch (cause) {
          await client.query('ROLLBACK');
          throw new Error(`results store: applying migration ${migration.name} failed`, { cause });
        }
      }
      return newest;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    client.release();
  }
}
