// What one batch of run records to the results collector may be: the collector refuses more, the shipper sends
// less. Its own module, so that the sidecar reads the numbers without loading the collector.
import { RESULT_KEEP_BYTES_MAX } from '../crds/app-limits.ts';

export const MAX_BATCH_RECORDS = 2000;
/** A record carrying the largest result an App may keep, alone, with room for the record around it. */
export const MAX_BATCH_BYTES = RESULT_KEEP_BYTES_MAX + 1024 * 1024;
/**
 * What the shipper puts in one batch at most (a record larger than this travels alone): far above a batch of
 * plain records (about 700 bytes each), small enough that kept results do not make each batch a large body.
 */
export const SHIPPER_BATCH_BYTES = 4 * 1024 * 1024;
