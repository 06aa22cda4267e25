-- A run is one App's: its row is keyed by (project_id, app_name, id), not by the id alone. Run ids are not secret
-- (callers, webhook receivers and logs see them), so with the id alone as the key a record of one App carrying
-- another App's run id overwrote that run (its status, webhook and kept result), or, written first, took it into
-- the other project. Now such a record is another row: each App's runs are written only by its own records (the
-- collector takes a pod's records only for that pod's App), and reads, sweeps and deletes name the whole key.
--
-- The key's index replaces runlet_runs_by_app (the same columns); the unfinished sweep pages by (id, project_id,
-- app_name), as an id alone may now stand for runs of two Apps. On a large table this builds one index over every
-- row, under the migration's lock: writers wait (pods keep their runs meanwhile), readers of the store too.
CREATE UNIQUE INDEX runlet_runs_key ON runlet_runs (project_id, app_name, id);
ALTER TABLE runlet_runs DROP CONSTRAINT runlet_runs_pkey;
ALTER TABLE runlet_runs ADD CONSTRAINT runlet_runs_pkey PRIMARY KEY USING INDEX runlet_runs_key;
DROP INDEX runlet_runs_by_app;
DROP INDEX runlet_runs_unfinished;
CREATE INDEX runlet_runs_unfinished ON runlet_runs (id, project_id, app_name) WHERE unfinished;
