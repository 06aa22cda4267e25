// A process for the run store's crash test: saves one pending async run durably — the write an async run's 202
// waits for — and ends as soon as that save resolves, either with process.exit or killed by SIGKILL, without
// closing the store. With companions, as many other runs are saved at the same time (half durably, as other
// async accepts; half plain, as sync runs), so the run's commit is shared and more batches are on their way.
// Usage: node sqlite-run-store-crash-child.ts <dataDir> <runId> exit|sigkill [companions]
import { pino } from 'pino';
import { SqliteRunStore } from '../../sidecar/runs/sqlite-run-store.ts';
import { pendingAsyncRunRecord, runRecord } from './sqlite-run-records.ts';

const [dataDir, runId, ending, companionsArg = '0'] = process.argv.slice(2);
const companions = Number(companionsArg);
if (dataDir === undefined || runId === undefined || (ending !== 'exit' && ending !== 'sigkill') || !Number.isInteger(companions)) {
  throw new Error(`usage: sqlite-run-store-crash-child.ts <dataDir> <runId> exit|sigkill [companions]; got ${process.argv.slice(2)}`);
}

const store = new SqliteRunStore({ dataDir, logger: pino({ level: 'warn' }) });
const saveCompanion = (index: number): void => {
  // The process ends before most of these settle; none may reject before then.
  if (index % 2 === 0) void store.saveDurably(pendingAsyncRunRecord());
  else store.save(runRecord());
};
for (let index = 0; index < companions / 2; index += 1) saveCompanion(index);
const saved = store.saveDurably(pendingAsyncRunRecord({ id: runId }));
for (let index = Math.ceil(companions / 2); index < companions; index += 1) saveCompanion(index);
await saved;
// Here the sidecar would answer 202.
if (ending === 'sigkill') {
  process.kill(process.pid, 'SIGKILL');
} else {
  process.exit(0);
}
