// The list filters a run source may not have indexed (the RunLog cache indexes async and status only), applied
// to one record as the SQL sources apply them.
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { ListRunsQuery } from './run-source.ts';

type RecordFilters = Pick<ListRunsQuery, 'functionName' | 'createdAfter' | 'createdBefore'>;

export function hasRecordFilters(query: RecordFilters): boolean {
  return query.functionName !== null || query.createdAfter !== null || query.createdBefore !== null;
}

/** createdAt is written by Date#toISOString, as the filters are normalised (routes.ts): text order is time order. */
export function matchesRecordFilters(record: RunRecord, query: RecordFilters): boolean {
  if (query.functionName !== null && record.functionName !== query.functionName) return false;
  if (query.createdAfter !== null && record.createdAt < query.createdAfter) return false;
  if (query.createdBefore !== null && record.createdAt >= query.createdBefore) return false;
  return true;
}
