-- What each App's kept runs weigh, beside its run counters (migration 0003), so that a namespace's usage of the
-- shared store (runs, record bytes, kept-result bytes: the sum over its Apps' rows) is read from a few rows, at
-- each batch the collector takes, and bounded by the operator's quotas (results/namespace-quotas.ts). Without
-- a bound, one namespace keeping 16 MiB results filled the chart's 10 GiB volume in about 640 calls, and every
-- namespace's async calls were refused after.
--
-- Bytes are the JSON text as written (octet_length of the json column, the size of its text before any
-- compression): what the collector measures in a batch before it writes it. The record and the kept result
-- are measured apart, as they are bounded apart.
--
-- Kept by statement triggers beside 0003's, in the same transaction as the write, on the same rows: the counters'
-- rows of 0003, which every writer already takes in key order (the upsert's `taken` before any trigger fires;
-- a delete's 0003 trigger before this one, by name), so these triggers add no lock a writer did not hold, nor
-- another order to take them in. A result's expiry (an UPDATE that moves no counter) takes its Apps' rows here
-- alone, in key order. Nothing here names runlet_runs' key: the rows are matched by the transition tables.
ALTER TABLE runlet_app_run_counts
  ADD COLUMN record_bytes bigint NOT NULL DEFAULT 0,
  ADD COLUMN kept_result_bytes bigint NOT NULL DEFAULT 0;

-- One function per kind of statement, each adding its changes: + a row as the statement left it, - a row as it
-- found it. Measuring a json value reads its text back: a large kept result (TOASTed, compressed) is read again
-- by the statement that writes it, and by each statement that replaces its row (a later state carrying it).
-- Most results are small and stored inline, where that is a copy.
CREATE FUNCTION runlet_measure_inserted_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO runlet_app_run_counts AS c (project_id, app_name, total, success, failure, in_flight, record_bytes, kept_result_bytes)
  SELECT project_id, app_name, 0, 0, 0, 0, record_bytes, kept_result_bytes FROM (
    SELECT project_id, app_name, sum(octet_length(record::text)) AS record_bytes, coalesce(sum(octet_length(result::text)), 0) AS kept_result_bytes
      FROM runlet_new_runs GROUP BY project_id, app_name
  ) AS delta
   WHERE (record_bytes, kept_result_bytes) <> (0, 0)
   ORDER BY project_id, app_name
  ON CONFLICT (project_id, app_name) DO UPDATE SET
    record_bytes = c.record_bytes + excluded.record_bytes, kept_result_bytes = c.kept_result_bytes + excluded.kept_result_bytes;
  RETURN NULL;
END $$;

CREATE FUNCTION runlet_measure_updated_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO runlet_app_run_counts AS c (project_id, app_name, total, success, failure, in_flight, record_bytes, kept_result_bytes)
  SELECT project_id, app_name, 0, 0, 0, 0, record_bytes, kept_result_bytes FROM (
    SELECT project_id, app_name, sum(record_bytes) AS record_bytes, sum(kept_result_bytes) AS kept_result_bytes FROM (
      SELECT project_id, app_name, octet_length(record::text) AS record_bytes, coalesce(octet_length(result::text), 0) AS kept_result_bytes FROM runlet_new_runs
      UNION ALL
      SELECT project_id, app_name, -octet_length(record::text), -coalesce(octet_length(result::text), 0) FROM runlet_old_runs
    ) AS changes GROUP BY project_id, app_name
  ) AS delta
   WHERE (record_bytes, kept_result_bytes) <> (0, 0)
   ORDER BY project_id, app_name
  ON CONFLICT (project_id, app_name) DO UPDATE SET
    record_bytes = c.record_bytes + excluded.record_bytes, kept_result_bytes = c.kept_result_bytes + excluded.kept_result_bytes;
  RETURN NULL;
END $$;

CREATE FUNCTION runlet_measure_deleted_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO runlet_app_run_counts AS c (project_id, app_name, total, success, failure, in_flight, record_bytes, kept_result_bytes)
  SELECT project_id, app_name, 0, 0, 0, 0, record_bytes, kept_result_bytes FROM (
    SELECT project_id, app_name, -sum(octet_length(record::text)) AS record_bytes, -coalesce(sum(octet_length(result::text)), 0) AS kept_result_bytes
      FROM runlet_old_runs GROUP BY project_id, app_name
  ) AS delta
   WHERE (record_bytes, kept_result_bytes) <> (0, 0)
   ORDER BY project_id, app_name
  ON CONFLICT (project_id, app_name) DO UPDATE SET
    record_bytes = c.record_bytes + excluded.record_bytes, kept_result_bytes = c.kept_result_bytes + excluded.kept_result_bytes;
  RETURN NULL;
END $$;

-- Writers wait from here to the commit, so the measure below and the triggers' changes add up exactly.
LOCK TABLE runlet_runs IN SHARE ROW EXCLUSIVE MODE;

-- Named after 0003's (runlet_count_…): of the triggers of one event, PostgreSQL fires them in name order, so a
-- delete's counters' rows are taken by 0003's trigger, in key order, before these write them.
CREATE TRIGGER runlet_measure_inserted_runs AFTER INSERT ON runlet_runs REFERENCING NEW TABLE AS runlet_new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION runlet_measure_inserted_runs();
CREATE TRIGGER runlet_measure_updated_runs AFTER UPDATE ON runlet_runs REFERENCING OLD TABLE AS runlet_old_runs NEW TABLE AS runlet_new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION runlet_measure_updated_runs();
CREATE TRIGGER runlet_measure_deleted_runs AFTER DELETE ON runlet_runs REFERENCING OLD TABLE AS runlet_old_runs
  FOR EACH STATEMENT EXECUTE FUNCTION runlet_measure_deleted_runs();

-- The runs already kept (a database migrated from an earlier runlet): measured once, here. Every App with runs
-- has its counters' row (0003).
UPDATE runlet_app_run_counts AS c SET record_bytes = m.record_bytes, kept_result_bytes = m.kept_result_bytes
  FROM (SELECT project_id, app_name, sum(octet_length(record::text)) AS record_bytes, coalesce(sum(octet_length(result::text)), 0) AS kept_result_bytes
          FROM runlet_runs GROUP BY project_id, app_name) AS m
 WHERE c.project_id = m.project_id AND c.app_name = m.app_name;
