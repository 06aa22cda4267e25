// The results store on PostgreSQL (`npm run bench:results-store`, bench/micro/results-store.ts): measured once,
// written into every report as its own section. Seeding a million rows takes minutes, too long for every run.
import type { ReportSection } from './report.ts';

export const RESULTS_STORE_SECTION: ReportSection = {
  title: 'Results store: PostgreSQL (measured once, on 2026-11-26)',
  lines: [
    "`npm run bench:results-store -- 1000000`: Debian's PostgreSQL 15 started by the bench with durable commits (fsync, synchronous_commit on), the store's own statements through `pg`. The machine was shared with seven other workloads: load average 30–37 on 2 cores during the run, so these are upper bounds.",
    '',
    '| figure | value |',
    '|---|---|',
    '| records into PostgreSQL, batches of 1,000 from 4 connections (as the collector writes the shippers\' batches) | 8,983 records/s (200,000 in 22.3 s) |',
    '| a replayed batch of 1,000 (writes nothing) | 103 ms |',
    '| a row with its five indexes (1.2 million rows, sync runs) | 938 bytes (1,073 MiB in all) |',
    '| list, first page of 50, at 1.2 million rows of one app | p50 1.71 ms, p99 14.05 ms |',
    '| list, a page of 50 at a random depth | p50 1.77 ms, p99 11.21 ms |',
    '| list, a page of 500 at a random depth | p50 9.74 ms, p99 53.48 ms |',
    '| list, status=failure at a random depth | p50 2.51 ms, p99 15.33 ms |',
    '| list, functionName=train within a one-hour window | p50 2.66 ms, p99 16.64 ms |',
    '| list, a page of 1 at a random depth | p50 1.10 ms, p99 12.64 ms |',
    '',
    'Not measured: 10 million rows (seeding one million took 223 s on this shared machine); the issue\'s target there is p99 ≤ 50 ms for a page. Every list is one index range scan ending on `id` (the keyset), so its cost grows with the page, not the table; the p99s above are the machine\'s load.',
  ],
};
