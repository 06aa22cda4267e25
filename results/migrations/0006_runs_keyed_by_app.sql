-- Placeholder on the quotas branch only: migration 0006 belongs to the results-identity branch (runlet_runs keyed
-- by project, app and id), which replaces this file when the branches are merged. It exists so that migrate.ts,
-- which wants consecutive versions, applies 0007 on this branch.
SELECT 1;
