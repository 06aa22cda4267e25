-- Each App's run counters (App.status.runs), kept current by the statements that write runlet_runs rather
-- than counted again: an aggregate over an App's index entries grows with its history, and the operator reads
-- every App's counters every 10 s; this table is one row per App.
--
-- Statement triggers with transition tables see each statement's rows as the table changed them, in the same
-- transaction: a run inserted counts once, a state it moves to moves it between the columns, a record the
-- upsert leaves alone (a replayed batch, an older state) changes nothing, and retention deletes take runs out.
-- last_run_at only moves forward: the newest run's creation time, kept when that run is deleted.
CREATE TABLE runlet_app_run_counts (
  project_id text NOT NULL,
  app_name text NOT NULL,
  total bigint NOT NULL,
  success bigint NOT NULL,
  failure bigint NOT NULL,
  -- pending or running; a cancelled run counts in the total only, as the sidecars count.
  in_flight bigint NOT NULL,
  last_run_at timestamptz,
  PRIMARY KEY (project_id, app_name)
);

-- One function per kind of statement (each sees its own transition tables), each adding its changes to the
-- counters: +1 for a row as the statement left it, -1 for a row as it found it. Apps are written in key
-- order, so statements touching the same Apps wait for one another rather than deadlock; an App whose counts
-- did not move (a webhook attempt recorded) is not written.
CREATE FUNCTION runlet_count_inserted_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Runs new to the table.
  INSERT INTO runlet_app_run_counts AS c (project_id, app_name, total, success, failure, in_flight, last_run_at)
  SELECT project_id, app_name, total, success, failure, in_flight, last_run_at FROM (
    SELECT project_id, app_name, sum(n) AS total, coalesce(sum(n) FILTER (WHERE status = 'success'), 0) AS success,
           coalesce(sum(n) FILTER (WHERE status = 'failure'), 0) AS failure,
           coalesce(sum(n) FILTER (WHERE status IN ('pending', 'running')), 0) AS in_flight, max(created_at) AS last_run_at
      FROM (SELECT project_id, app_name, status, created_at, 1 AS n FROM runlet_new_runs) AS changes
     GROUP BY project_id, app_name
  ) AS delta
   WHERE (total, success, failure, in_flight) <> (0, 0, 0, 0)
   ORDER BY project_id, app_name
  ON CONFLICT (project_id, app_name) DO UPDATE SET
    total = c.total + excluded.total, success = c.success + excluded.success, failure = c.failure + excluded.failure,
    in_flight = c.in_flight + excluded.in_flight, last_run_at = greatest(c.last_run_at, excluded.last_run_at);
  RETURN NULL;
END $$;

CREATE FUNCTION runlet_count_updated_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Runs that moved on: an update never changes a run's App (the upsert leaves project_id and app_name alone).
  INSERT INTO runlet_app_run_counts AS c (project_id, app_name, total, success, failure, in_flight, last_run_at)
  SELECT project_id, app_name, total, success, failure, in_flight, last_run_at FROM (
    SELECT project_id, app_name, sum(n) AS total, coalesce(sum(n) FILTER (WHERE status = 'success'), 0) AS success,
           coalesce(sum(n) FILTER (WHERE status = 'failure'), 0) AS failure,
           coalesce(sum(n) FILTER (WHERE status IN ('pending', 'running')), 0) AS in_flight, max(created_at) AS last_run_at
      FROM (SELECT project_id, app_name, status, NULL::timestamptz AS created_at, 1 AS n FROM runlet_new_runs
            UNION ALL SELECT project_id, app_name, status, NULL, -1 FROM runlet_old_runs) AS changes
     GROUP BY project_id, app_name
  ) AS delta
   WHERE (total, success, failure, in_flight) <> (0, 0, 0, 0)
   ORDER BY project_id, app_name
  ON CONFLICT (project_id, app_name) DO UPDATE SET
    total = c.total + excluded.total, success = c.success + excluded.success, failure = c.failure + excluded.failure,
    in_flight = c.in_flight + excluded.in_flight, last_run_at = greatest(c.last_run_at, excluded.last_run_at);
  RETURN NULL;
END $$;

CREATE FUNCTION runlet_count_deleted_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Runs deleted (retention): out of the counts; last_run_at stays.
  INSERT INTO runlet_app_run_counts AS c (project_id, app_name, total, success, failure, in_flight, last_run_at)
  SELECT project_id, app_name, total, success, failure, in_flight, last_run_at FROM (
    SELECT project_id, app_name, sum(n) AS total, coalesce(sum(n) FILTER (WHERE status = 'success'), 0) AS success,
           coalesce(sum(n) FILTER (WHERE status = 'failure'), 0) AS failure,
           coalesce(sum(n) FILTER (WHERE status IN ('pending', 'running')), 0) AS in_flight, max(created_at) AS last_run_at
      FROM (SELECT project_id, app_name, status, NULL::timestamptz AS created_at, -1 AS n FROM runlet_old_runs) AS changes
     GROUP BY project_id, app_name
  ) AS delta
   WHERE (total, success, failure, in_flight) <> (0, 0, 0, 0)
   ORDER BY project_id, app_name
  ON CONFLICT (project_id, app_name) DO UPDATE SET
    total = c.total + excluded.total, success = c.success + excluded.success, failure = c.failure + excluded.failure,
    in_flight = c.in_flight + excluded.in_flight, last_run_at = greatest(c.last_run_at, excluded.last_run_at);
  RETURN NULL;
END $$;

-- Writers wait from here to the commit, so the counts below and the triggers' changes add up exactly.
LOCK TABLE runlet_runs IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER runlet_count_inserted_runs AFTER INSERT ON runlet_runs REFERENCING NEW TABLE AS runlet_new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION runlet_count_inserted_runs();
CREATE TRIGGER runlet_count_updated_runs AFTER UPDATE ON runlet_runs REFERENCING OLD TABLE AS runlet_old_runs NEW TABLE AS runlet_new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION runlet_count_updated_runs();
CREATE TRIGGER runlet_count_deleted_runs AFTER DELETE ON runlet_runs REFERENCING OLD TABLE AS runlet_old_runs
  FOR EACH STATEMENT EXECUTE FUNCTION runlet_count_deleted_runs();

-- The runs already kept (a database migrated from an earlier runlet): counted once, here.
INSERT INTO runlet_app_run_counts (project_id, app_name, total, success, failure, in_flight, last_run_at)
SELECT project_id, app_name, count(*), count(*) FILTER (WHERE status = 'success'), count(*) FILTER (WHERE status = 'failure'),
       count(*) FILTER (WHERE status IN ('pending', 'running')), max(created_at)
  FROM runlet_runs GROUP BY project_id, app_name;
