-- The run records of a cluster. Filtered and sorted columns beside the whole record as the API returns it.
-- `id` is the run's UUID v7: its byte order (uuid comparison) is creation order, so `ORDER BY id DESC` is
-- newest first and the id alone is the keyset cursor of a page.
CREATE TABLE runlet_runs (
  id uuid PRIMARY KEY,
  project_id text NOT NULL,
  app_name text NOT NULL,
  function_name text NOT NULL,
  async boolean NOT NULL,
  status text NOT NULL,
  created_at timestamptz NOT NULL,
  -- The pod that ran it: the operator closes the unfinished runs of pods that are gone.
  replica text NOT NULL,
  -- How far the record has come (writer.ts, recordVersion): an upsert only ever moves it forward, so a batch
  -- replayed after a restart, or one overtaken by a later state, writes nothing.
  version bigint NOT NULL,
  -- Something only its pod can finish: the run itself, or its webhook delivery. Written by the store, not
  -- generated from `record`: PostgreSQL's json operators refuse a record holding the escape \u0000.
  unfinished boolean NOT NULL,
  record json NOT NULL
);

-- The list of one app, newest first, and its filters: each an index range ending on `id`.
CREATE INDEX runlet_runs_by_app ON runlet_runs (project_id, app_name, id);
CREATE INDEX runlet_runs_by_app_status ON runlet_runs (project_id, app_name, status, id);
CREATE INDEX runlet_runs_by_app_function ON runlet_runs (project_id, app_name, function_name, id);
-- Retention deletes the oldest rows first, across apps.
CREATE INDEX runlet_runs_by_created ON runlet_runs (created_at);
-- The operator's sweep for runs of gone pods reads only these.
CREATE INDEX runlet_runs_unfinished ON runlet_runs (id) WHERE unfinished;
