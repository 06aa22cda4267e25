-- A run's kept result (`[runs] keep_results`: the function's result, a stream's items, a failed run's error) and
-- when it expires; beside `record`, which lists show without it. NULL when the App keeps none, the result was
-- too large, or it expired and was swept.
ALTER TABLE runlet_runs ADD COLUMN result json;
ALTER TABLE runlet_runs ADD COLUMN result_expires_at timestamptz;
-- The sweep of expired results reads only the rows still holding one.
CREATE INDEX runlet_runs_result_expiry ON runlet_runs (result_expires_at) WHERE result_expires_at IS NOT NULL;
