// Limits of an App's spec that code outside the schema needs as numbers (crds/app-schema.ts checks Apps against
// them): apart from the schema, so that the sidecar does not load the schema library (TypeBox) to know them.

/** The largest result an App may keep (`result_keep_bytes`): the results collector takes a record carrying one. */
export const RESULT_KEEP_BYTES_MAX = 16 * 1024 * 1024;
