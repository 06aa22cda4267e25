// `error.type` values the platform itself records on runs (a function's own exceptions keep their class name).
// Schema-free, so the sidecar can import it without loading TypeBox (sidecar/start-modules.test.ts).

/** A run the platform stopped at its time limit, whether it was running or still queued. */
export const TIMEOUT_ERROR_TYPE = 'Timeout';
