// The run history contract (run-history-contract.ts) on both stores: SQLite as `runlet dev` keeps it, and
// PostgreSQL as the operator's results store keeps it, a real server started for this file.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteRunStore } from '../../sidecar/runs/sqlite-run-store.ts';
import { testLogger } from '../support/logger.ts';
import { startPostgres } from '../support/postgres.ts';
import { openResults } from '../../results/open.ts';
import { keptResultOf } from '../../sidecar/runs/kept-result.ts';
import { describeRunHistoryContract } from './run-history-contract.ts';

describeRunHistoryContract('SQLite', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'runlet-history-'));
  const store = new SqliteRunStore({ dataDir, logger: testLogger() });
  return {
    history: store,
    async write(records) {
      for (const record of records) store.save(record);
      await store.flush();
    },
    async close() {
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
});

describeRunHistoryContract('PostgreSQL', async () => {
  const server = await startPostgres();
  const results = await openResults({ dsn: server.dsn(await server.createDatabase('history')), logger: testLogger() });
  return {
    history: results.store,
    // As the shipper carries them: a record with its kept result as `result`.
    async write(records) {
      await results.store.writeBatch(records.map((record) => {
        const kept = keptResultOf(record);
        return kept === undefined ? record : { ...record, result: JSON.parse(kept.json) as unknown };
      }));
    },
    async close() {
      await results.close();
      await server.stop();
    },
  };
});
