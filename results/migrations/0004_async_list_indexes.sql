-- The list of an app's async runs (`asyncOnly`), alone or with a status: partial indexes over async runs only.
-- Without them such a page walked the app's id (or status) index past every sync run: at 10 million rows with
-- 2% async, the failed async runs of an app took 40 s (bench/micro/results-store.ts). Sync runs, the many,
-- add nothing to them.
CREATE INDEX runlet_runs_async_by_app ON runlet_runs (project_id, app_name, id) WHERE async;
CREATE INDEX runlet_runs_async_by_app_status ON runlet_runs (project_id, app_name, status, id) WHERE async;
