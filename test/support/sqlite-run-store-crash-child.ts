// A process for the run store's crash test: saves one pending async run durably — the write an async run's 202
// waits for — and ends at once, either with process.exit or killed by SIGKILL, without closing the store.
// Usage: node sqlite-run-store-crash-child.ts <dataDir> <runId> exit|sigkill
import { pino } from 'pino';
import { SqliteRunStore } from '../../local/sqlite-run-store.ts';
import { pendingAsyncRunRecord } from './sqlite-run-records.ts';

const [dataDir, runId, ending] = process.argv.slice(2);
if (dataDir === undefined || runId === undefined || (ending !== 'exit' && ending !== 'sigkill')) {
  throw new Error(`usage: sqlite-run-store-crash-child.ts <dataDir> <runId> exit|sigkill; got ${process.argv.slice(2)}`);
}

const store = new SqliteRunStore({ dataDir, logger: pino({ level: 'warn' }) });
await store.saveDurably(pendingAsyncRunRecord({ id: runId }));
// Here the sidecar would answer 202.
if (ending === 'sigkill') {
  process.kill(process.pid, 'SIGKILL');
} else {
  process.exit(0);
}
